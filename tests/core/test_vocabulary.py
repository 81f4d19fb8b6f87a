"""The named sets of ``roofwatch.common.vocabulary`` hold what their rules say, and nothing is spelled twice."""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from roofwatch.common import vocabulary as v

ROOT = Path(__file__).resolve().parents[2]


def test_the_sets_relate_as_their_rules_say() -> None:
    assert set(v.HEAD_TRIGGERS) == set(v.BRANCH_HISTORY_TRIGGERS) - {"bisect"}  # a bisection is never the head
    assert set(v.BRANCH_HISTORY_TRIGGERS) == set(v.TRIGGERS) - {"pull_request"}  # a PR head is not the branch
    assert set(v.LATEST_EXCLUDED_TRIGGERS) == set(v.TRIGGERS) - set(v.HEAD_TRIGGERS)
    assert set(v.OFF_BRANCH_TRIGGERS) == set(v.TRIGGERS) - set(v.BRANCH_HISTORY_TRIGGERS)  # never drawn on a chart
    assert set(v.MEASURED_STATES) <= v.TERMINAL_STATES and v.TERMINAL_STATES == set(v.RUN_STATES) - {"queued", "running"}
    assert set(v.OPEN_STATES) <= set(v.TRIAGE_STATES) and set(v.CLOSED_STATES) == set(v.TRIAGE_STATES) - set(v.OPEN_STATES)
    assert set(v.ACTIVE_STATES) == set(v.RUN_STATES) - v.TERMINAL_STATES
    assert set(v.PASSING_STATES) <= v.TERMINAL_STATES and set(v.UNDECIDED_STATES) <= v.TERMINAL_STATES - set(v.MEASURED_STATES)
    assert set(v.PERFORMANCE_KINDS) | set(v.CORRECTNESS_KINDS) == set(v.CHANGE_KINDS) - {"compiled-code"}


@pytest.mark.parametrize("named", [v.RUN_STATES, v.TRIGGERS, v.TRIAGE_STATES, v.CHANGE_KINDS, v.OPEN_STATES,
                                   v.HEAD_TRIGGERS, v.BRANCH_HISTORY_TRIGGERS, v.LATEST_EXCLUDED_TRIGGERS,
                                   v.OFF_BRANCH_TRIGGERS, v.ACTIVE_STATES, v.PASSING_STATES, v.UNDECIDED_STATES,
                                   v.GITHUB_TRIGGERS, v.CLOSED_STATES, v.NARROWED_STATES, v.PERFORMANCE_KINDS,
                                   v.CORRECTNESS_KINDS, v.ANALYSIS_STATES, v.UNREAD_ANALYSIS_STATES])
def test_sets_are_plain_strings_a_query_binds_as_they_are(named: tuple[str, ...]) -> None:
    assert all(type(member) is str for member in named)


@pytest.mark.parametrize("spelled", ['("new", "acknowledged")', '("push", "manual"', '("succeeded", "failed")',
                                     '("pull_request", "bisect")', '"errored", "cancelled", "skipped"'])
def test_no_named_set_is_spelled_out_again(spelled: str) -> None:
    """The sets were once written out where they were used, three different ways; now they are named."""
    found = subprocess.run(["git", "grep", "-l", "-F", spelled, "--", "service", "dashboard", "workers"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split()
    assert found == [], found


WORDS = {"run states": set(v.RUN_STATES), "triggers": set(v.TRIGGERS), "triage states": set(v.TRIAGE_STATES),
         "change kinds": set(v.CHANGE_KINDS)}
# The fields a record keeps its words in, and the words each may hold.
FIELDS = {"state": set(v.RUN_STATES) | set(v.TRIAGE_STATES), "trigger": set(v.TRIGGERS), "kind": set(v.CHANGE_KINDS),
          "analysis_state": set(v.ANALYSIS_STATES) - {""}}
CHECKED = ("service", "dashboard", "workers", "roofwatch/common", "roofwatch/ab", "roofwatch/git", "roofwatch/suite_config",
           "roofwatch/result_files")


def _modules() -> Iterator[tuple[Path, ast.AST]]:
    for folder in CHECKED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name != "vocabulary.py" and "migrations" not in path.parts:
                yield path, ast.parse(path.read_text(encoding="utf-8"))


def _spelled_sets(tree: ast.AST) -> Iterator[tuple[int, str, list[str]]]:
    """Tuples, lists and sets of two or more distinct words of one kind, outside a ``Literal[...]`` type."""
    in_types = {id(node.slice) for node in ast.walk(tree)
                if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal"}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Tuple | ast.List | ast.Set) or id(node) in in_types:
            continue
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            continue
        words = {str(e.value) for e in node.elts if isinstance(e, ast.Constant)}
        for kind, known in WORDS.items():
            if len(words) >= 2 and words <= known:
                yield node.lineno, kind, sorted(words)


def test_no_set_of_states_triggers_or_kinds_is_written_out_outside_the_vocabulary() -> None:
    """A set a rule reads by is named once, in the vocabulary: ``("queued", "running")`` anywhere else is
    a second definition waiting to drift from the first."""
    found = [f"{path.relative_to(ROOT)}:{line}: {kind} {words}"
             for path, tree in _modules() for line, kind, words in _spelled_sets(tree)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(("source", "caught"), [
    ('ACTIVE = ("queued", "running")', True),
    ('if kind in ["perf-regression", "perf-improvement"]: pass', True),
    ('state, verdict = "errored", "errored"', False),  # one word twice is no set
    ('Status = Literal["succeeded", "failed", "errored"]', False),  # a type, which cannot read a constant
    ('NAMES = ("queued", "tile")', False),
])
def test_the_literal_check_catches_a_set_and_only_a_set(source: str, caught: bool) -> None:
    assert bool(list(_spelled_sets(ast.parse(source)))) == caught


def _spelled_words(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """A record's state, trigger or kind compared with, assigned or passed as a bare string."""
    def spelled(field: ast.expr, value: ast.expr) -> bool:
        return (isinstance(field, ast.Attribute) and field.attr in FIELDS and isinstance(value, ast.Constant)
                and value.value in FIELDS[field.attr])
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            pairs = [(a, b) for a in sides for b in sides]
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple):
            pairs = list(zip(node.targets[0].elts, node.value.elts, strict=False))
        elif isinstance(node, ast.Assign):
            pairs = [(node.targets[0], node.value)]
        elif isinstance(node, ast.keyword) and node.arg in FIELDS and isinstance(node.value, ast.Constant):
            if node.value.value in FIELDS[node.arg]:
                yield node.value.lineno, f"{node.arg}={node.value.value!r}"
            continue
        else:
            continue
        for field, value in pairs:
            if spelled(field, value):
                assert isinstance(field, ast.Attribute) and isinstance(value, ast.Constant)
                yield node.lineno, f".{field.attr} and {value.value!r}"


def test_a_records_state_trigger_or_kind_is_read_and_written_as_a_vocabulary_member() -> None:
    """``run.state == "queued"`` is a word the vocabulary can no longer rename or the type checker see:
    ``RunState.QUEUED`` is."""
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for path, tree in _modules() for line, what in _spelled_words(tree)]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(("source", "caught"), [
    ('if run.state == "queued": pass', True),
    ('run.state, run.error = "errored", why', True),
    ('select(Run).where(Run.trigger != "pull_request")', True),
    ('Change(kind="perf-regression")', True),
    ('run.analysis_state, run.analysis_error = "failed", why', True),
    ('if run.state == RunState.QUEUED: pass', False),
    ('if suite.kind == "benchmark": pass', False),  # a suite's kind, not a change's
    ('status = "failed"', False),  # not a record's state field
])
def test_the_word_check_catches_a_bare_word_and_only_that(source: str, caught: bool) -> None:
    assert bool(list(_spelled_words(ast.parse(source)))) == caught
