"""Table-driven tests of grouping failing parametrizations by their test function: one bug, one change."""

from __future__ import annotations

import pytest

from roofwatch.service.analysis.failure_groups import (
    EpisodeGroup,
    FailureGroup,
    function_id,
    group_episodes,
    group_failures,
    parametrization,
    parametrizations_text,
    shown_name,
)
from roofwatch.service.analysis.history import Outcome, failure_episodes

M = "checks.test_kernel"


@pytest.mark.parametrize(("test_id", "function", "params"), [
    (f"{M}::test_rmsnorm[4096-bf16]", f"{M}::test_rmsnorm", "4096-bf16"),
    (f"{M}::test_rmsnorm", f"{M}::test_rmsnorm", None),                    # not parametrized: its own function
    (f"{M}.TestNorm::test_rmsnorm[fp32]", f"{M}.TestNorm::test_rmsnorm", "fp32"),  # a method
    ("test_x[a]", "test_x", "a"),                                          # no class name at all
    (f"{M}::test_x[a::b]", f"{M}::test_x", "a::b"),                        # '::' inside the id
    (f"{M}::test_x[[1, 2]-x]", f"{M}::test_x", "[1, 2]-x"),                # brackets inside the id
    (f"{M}::test_x[]", f"{M}::test_x", ""),                                # an empty id
    ("tests.[odd].test_a::test_x[p]", "tests.[odd].test_a::test_x", "p"),  # a bracket in the module path
    (f"{M}::test_x[a", f"{M}::test_x[a", None),                            # unclosed: not a parametrization
    (f"{M}::[a]", f"{M}::[a]", None),                                      # no function before it
    ("", "", None),
])
def test_function_and_parametrization(test_id: str, function: str, params: str | None) -> None:
    assert function_id(test_id) == function
    assert parametrization(test_id) == params


def _ids(function: str, *params: str) -> list[str]:
    return [f"{M}::{function}[{p}]" for p in params]


@pytest.mark.parametrize(("failures", "groups"), [
    ([], []),
    # Eleven parametrizations of one function: one group, in the order they failed, the first one's text.
    ([(t, f"assert {i}") for i, t in enumerate(_ids("test_rmsnorm", *(f"{n}-bf16" for n in range(11))))],
     [(f"{M}::test_rmsnorm", 11, "assert 0")]),
    # Two functions stay two; a plain test is a group of its own, in the order first seen.
    ([(f"{M}::test_b[x]", "b"), (f"{M}::test_plain", "p"), (f"{M}::test_a[y]", "a"), (f"{M}::test_b[z]", "b2")],
     [(f"{M}::test_b", 2, "b"), (f"{M}::test_plain", 1, "p"), (f"{M}::test_a", 1, "a")]),
    # The same id twice (a rerun) is one member.
    ([(f"{M}::test_b[x]", "b"), (f"{M}::test_b[x]", "again")], [(f"{M}::test_b", 1, "b")]),
    # Same function name, other classes: other functions.
    ([(f"{M}.A::test_x[1]", ""), (f"{M}.B::test_x[1]", "")], [(f"{M}.A::test_x", 1, ""), (f"{M}.B::test_x", 1, "")]),
])
def test_group_failures(failures: list[tuple[str, str]], groups: list[tuple[str, int, str]]) -> None:
    found = group_failures(failures)
    assert [(g.function, len(g.tests), g.message) for g in found] == groups


def test_a_group_of_one_is_named_by_its_test_and_a_larger_one_by_its_function() -> None:
    one = FailureGroup(f"{M}::test_x", (f"{M}::test_x[a]",), "")
    many = FailureGroup(f"{M}::test_x", (f"{M}::test_x[a]", f"{M}::test_x[b]"), "")
    assert one.name == f"{M}::test_x[a]" and many.name == f"{M}::test_x"
    assert shown_name(f"{M}::test_plain", [f"{M}::test_plain"]) == f"{M}::test_plain"


@pytest.mark.parametrize(("tests", "text"), [
    ([], ""),
    ([f"{M}::test_x[a]"], ""),  # one test: its name says it all
    (_ids("test_x", "a", "b"), "2 parametrizations: [a], [b]"),
    (_ids("test_x", *"abcdefghijk"), "11 parametrizations: [a], [b], [c], [d], [e], [f], [g], [h] and 3 more"),
])
def test_parametrizations_text(tests: list[str], text: str) -> None:
    assert parametrizations_text(tests) == text


# --- a branch's history: each failing stretch of each parametrization, grouped --------------------

def _outcomes(pattern: str) -> list[Outcome]:
    """``"..FF."``: one commit per character, position 1 on, F failing."""
    return [Outcome(i + 1, f"c{i + 1}", c == "F") for i, c in enumerate(pattern) if c != " "]


def _grouped(histories: dict[str, str]) -> list[tuple[str, tuple[str, ...], int | None, int, int | None]]:
    episodes = {test: failure_episodes(_outcomes(pattern)) for test, pattern in histories.items()}
    return [(g.function, tuple(t.split("[")[-1].rstrip("]") for t in g.tests),
             g.last_good.position if g.last_good else None, g.first_bad.position,
             g.fixed_at.position if g.fixed_at else None) for g in group_episodes(episodes)]


X = f"{M}::test_x"


@pytest.mark.parametrize(("histories", "groups"), [
    # One commit breaks three parametrizations: one group, from the commit after the last good one.
    ({f"{X}[a]": "..FFF", f"{X}[b]": "..FFF", f"{X}[c]": "..FFF", f"{X}[d]": "....."},
     [(X, ("a", "b", "c"), 2, 3, None)]),
    # Fixed together: the group is fixed where they pass again.
    ({f"{X}[a]": ".FF..", f"{X}[b]": ".FF.."}, [(X, ("a", "b"), 1, 2, 4)]),
    # Fixed at different commits: fixed once the last of them passes.
    ({f"{X}[a]": ".F...", f"{X}[b]": ".FFF."}, [(X, ("a", "b"), 1, 2, 5)]),
    # One still failing: the group is not fixed.
    ({f"{X}[a]": ".F...", f"{X}[b]": ".FFFF"}, [(X, ("a", "b"), 1, 2, None)]),
    # Broken by two commits: two groups, two changes.
    ({f"{X}[a]": ".FFFF", f"{X}[b]": "...FF"}, [(X, ("a",), 1, 2, None), (X, ("b",), 3, 4, None)]),
    # Broken, fixed, broken again: each stretch its own group.
    ({f"{X}[a]": ".F.F.", f"{X}[b]": ".F.F."}, [(X, ("a", "b"), 1, 2, 3), (X, ("a", "b"), 3, 4, 5)]),
    # A parametrization added failing in the breaking commit: it never passed, the others say where it broke.
    ({f"{X}[a]": "..FF", f"{X}[new]": "  FF"}, [(X, ("a", "new"), 2, 3, None)]),
    # Failing from the first commit measured: no last good commit.
    ({f"{X}[a]": "FF", f"{X}[b]": "FF"}, [(X, ("a", "b"), None, 1, None)]),
    # Two functions broken by one commit: two groups (ordered by function at the same commit).
    ({f"{M}::test_y[a]": ".F", f"{X}[a]": ".F", f"{X}[b]": ".F"},
     [(X, ("a", "b"), 1, 2, None), (f"{M}::test_y", ("a",), 1, 2, None)]),
    # A plain test beside a parametrized one of another function.
    ({f"{M}::test_plain": ".F"}, [(f"{M}::test_plain", (f"{M}::test_plain",), 1, 2, None)]),
    ({f"{X}[a]": "....."}, []),
])
def test_group_episodes(histories: dict[str, str],
                        groups: list[tuple[str, tuple[str, ...], int | None, int, int | None]]) -> None:
    assert _grouped(histories) == groups


def test_an_episode_group_is_named_like_a_failure_group() -> None:
    bad = Outcome(2, "c2", True)
    assert EpisodeGroup(X, (f"{X}[a]",), None, bad, None).name == f"{X}[a]"
    assert EpisodeGroup(X, (f"{X}[a]", f"{X}[b]"), None, bad, None).name == X
