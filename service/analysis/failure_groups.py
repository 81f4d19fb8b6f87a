"""Failing tests grouped by the test function they parametrize: one bug, one change.

A kernel bug fails every parametrization of its test that reaches it — ``test_rmsnorm[4096-bf16]``,
``test_rmsnorm[8192-bf16]`` and nine more — and listing each as a change of its own made eleven
rows to read, eleven to triage and eleven ranges to bisect for one cause. pytest names a
parametrization ``<function>[<id>]`` (``<classname>::<function>[<id>]`` in roofwatch's test ids), so
the function is the id up to the bracket that opens the parametrization:

- in an A/B (a pull request, ``roofwatch compare``) the head's new failures are one group per
  function (``group_failures``): everything there broke between the same two commits;
- on a branch's history each parametrization's failing stretches (``history.failure_episodes``)
  are grouped by function *and* the commit each stretch starts at (``group_episodes``): the
  parametrizations one commit broke are one change; one that breaks at a later commit is another.

A group names its parametrizations (the failing ones, in the order given) and carries the first
one's failure text. Pure: ids and outcomes in, groups out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from roofwatch.service.analysis.history import Episode, Outcome

PARAMETRIZATIONS_NAMED = 8  # parametrizations spelled out in one line of text; the rest are counted


def _bracket(test_id: str) -> int:
    """Where ``test_id``'s parametrization opens, or -1: the first ``[`` that follows a function name.

    Checked against the name before it, not just the first ``[``: a parametrization id may itself
    hold ``[``, ``]`` or ``::`` (``test_x[a::b]``, ``test_x[[1, 2]]``), a function name never does.
    """
    if not test_id.endswith("]"):
        return -1
    start = test_id.find("[")
    while start > 0:
        if test_id[:start].rsplit("::", 1)[-1].rsplit(".", 1)[-1].isidentifier():
            return start
        start = test_id.find("[", start + 1)
    return -1


def function_id(test_id: str) -> str:
    """``mod::test_x[a-b]`` → ``mod::test_x``; a test that is not parametrized is its own function."""
    start = _bracket(test_id)
    return test_id if start < 0 else test_id[:start]


def parametrization(test_id: str) -> str | None:
    """``mod::test_x[a-b]`` → ``a-b``; None for a test that is not parametrized."""
    start = _bracket(test_id)
    return None if start < 0 else test_id[start + 1:-1]


def shown_name(function: str, tests: Sequence[str]) -> str:
    """What a group is called: its one test's full id, else its function's."""
    return tests[0] if len(tests) == 1 else function


def parametrizations_text(tests: Sequence[str], named: int = PARAMETRIZATIONS_NAMED) -> str:
    """``11 parametrizations: [4096-bf16], [8192-bf16], … and 3 more``; "" for a group of one test."""
    if len(tests) <= 1:
        return ""
    ids = [f"[{parametrization(t)}]" if parametrization(t) is not None else t for t in tests]
    shown = ", ".join(ids[:named])
    more = f" and {len(ids) - named} more" if len(ids) > named else ""
    return f"{len(ids)} parametrizations: {shown}{more}"


@dataclass(frozen=True)
class FailureGroup:
    """The failing parametrizations of one test function, with the first one's failure text."""

    function: str
    tests: tuple[str, ...]
    message: str

    @property
    def name(self) -> str:
        return shown_name(self.function, self.tests)


def group_failures(failures: Iterable[tuple[str, str]]) -> list[FailureGroup]:
    """``(test id, failure text)`` pairs → one group per test function, in the order first seen."""
    tests: dict[str, list[str]] = {}
    messages: dict[str, str] = {}
    for test_id, message in failures:
        function = function_id(test_id)
        members = tests.setdefault(function, [])
        if test_id not in members:
            members.append(test_id)
        messages.setdefault(function, message)
    return [FailureGroup(function, tuple(members), messages[function]) for function, members in tests.items()]


@dataclass(frozen=True)
class EpisodeGroup:
    """The parametrizations of one function that started failing at the same commit, as one stretch.

    ``last_good`` is the latest commit on which any of them passed before (the bug came after it);
    ``fixed_at`` the commit from which all of them pass again (None while any still fails).
    """

    function: str
    tests: tuple[str, ...]
    last_good: Outcome | None
    first_bad: Outcome
    fixed_at: Outcome | None

    @property
    def name(self) -> str:
        return shown_name(self.function, self.tests)


def _position(outcome: Outcome) -> int:
    return outcome.position


def group_episodes(episodes: Mapping[str, Sequence[Episode]]) -> list[EpisodeGroup]:
    """Each test's failing stretches (``{test id: episodes}``, tests in the order to list them) → one
    group per function and first bad commit, oldest first (then by function)."""
    members: dict[tuple[str, int], list[tuple[str, Episode]]] = {}
    for test_id, stretches in episodes.items():
        for episode in stretches:
            members.setdefault((function_id(test_id), episode.first_bad.position), []).append((test_id, episode))
    groups = []
    for (function, _), found in sorted(members.items(), key=lambda item: (item[0][1], item[0][0])):
        goods = [e.last_good for _, e in found if e.last_good is not None]
        fixes = [e.fixed_at for _, e in found if e.fixed_at is not None]
        groups.append(EpisodeGroup(
            function=function, tests=tuple(dict.fromkeys(t for t, _ in found)),
            last_good=max(goods, key=_position) if goods else None, first_bad=found[0][1].first_bad,
            # Fixed once every one of them passes again: from the last of them to be fixed.
            fixed_at=max(fixes, key=_position) if len(fixes) == len(found) else None))
    return groups
