"""What judges an A/B (the stored config, else the base's table) and what a head would change: table-driven."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofwatch.common.errors import SuiteConfigError
from roofwatch.common.jobs import ABJob
from roofwatch.workers.judging import changes, judging_of, pending_renames, rounds_of

SUITE = '[[tool.roofwatch.suites]]\nname = "benchmarks"\nkind = "benchmark"\ncommand = "pytest bench"\n'


def tree(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    (folder / "pyproject.toml").write_text(text)
    return folder


def judged_changes(tmp_path: Path, base: str, head: str, stored: str = "") -> list[tuple[str, str, str]]:
    judged = judging_of(tree(tmp_path, "base", base), stored, "stored v1")
    theirs = judging_of(tree(tmp_path, "head", head), stored, "stored v1", "the head")
    return [(c.what, c.before, c.after) for c in changes(judged, theirs)]


@pytest.mark.parametrize(("base", "head", "found"), [
    (SUITE, SUITE, []),
    (SUITE, '[tool.roofwatch]\nmin_effect = "60%"\n' + SUITE, [("min_effect", "2 % (default)", "60 %")]),
    ('[tool.roofwatch]\nmin_effect = "5%"\n' + SUITE, SUITE, [("min_effect", "5 %", "2 % (default)")]),
    (SUITE, SUITE.replace("pytest bench", "pytest bench -k 'not rmsnorm'"),
     [("suite benchmarks: command", "pytest bench", "pytest bench -k 'not rmsnorm'")]),
    (SUITE, SUITE + 'min_effects = { "test_rms*" = "100%" }\n',
     [("suite benchmarks: min_effects", "{}", "{'test_rms*': 1.0}")]),
    (SUITE, SUITE + 'suites_from = "abc"\nsuite_paths = ["bench/"]\n',
     [("suite benchmarks: suite_paths", "[]", "['bench/']"), ("suite benchmarks: suites_from", "none", "abc")]),
    (SUITE, SUITE + SUITE.replace('"benchmarks"', '"extra"'), [("suite extra", "not declared", "added")]),
    (SUITE + SUITE.replace('"benchmarks"', '"extra"'), SUITE, [("suite extra", "declared", "removed")]),
    (SUITE, '[tool.roofwatch]\nmissing = "neutral"\nrenamed = { "a" = "b" }\n' + SUITE,
     [("missing", "failure", "neutral"), ("renamed a", "not renamed", "b")]),
    (SUITE, '[tool.roofwatch.device]\nname = "sim"\nbandwidth = 1e9\nflops = { fp32 = 1e9 }\n' + SUITE,
     [("device", "the host's GPU", "sim (modelled)")]),
    (SUITE, '[tool.roofwatch]\nmemory_min_effect = "1%"\n' + SUITE,
     [("memory_min_effect", "5 % (default)", "1 %")]),
    ('[tool.roofwatch]\nab_max_rounds = 20\n' + SUITE, '[tool.roofwatch]\nab_min_rounds = 6\n' + SUITE,
     [("ab_min_rounds", "none", "6"), ("ab_max_rounds", "20", "none")]),
])
def test_what_a_head_would_change(tmp_path: Path, base: str, head: str, found: list[tuple[str, str, str]]) -> None:
    assert judged_changes(tmp_path, base, head) == found


def test_a_stored_config_judges_before_either_commit(tmp_path: Path) -> None:
    stored = '[tool.roofwatch]\noverride = true\nmin_effect = "3%"\n' + SUITE
    base = '[tool.roofwatch]\nmin_effect = "5%"\n' + SUITE.replace("pytest bench", "pytest old")
    judged = judging_of(tree(tmp_path, "base", base), stored, "stored v1")
    assert judged.min_effect == pytest.approx(0.03) and [s.command for s in judged.suites or []] == ["pytest bench"]
    assert judged.source == "stored v1 (override = true)"
    # A head that raises min_effect changes nothing the stored config sets: nothing to list.
    head = '[tool.roofwatch]\nmin_effect = "60%"\n' + SUITE
    assert judged_changes(tmp_path, base, head, stored) == []


def test_the_base_sets_min_effect_when_the_stored_config_does_not(tmp_path: Path) -> None:
    stored = '[tool.roofwatch]\noverride = true\n' + SUITE
    base = '[tool.roofwatch]\nmin_effect = "5%"\n' + SUITE
    assert judging_of(tree(tmp_path, "base", base), stored, "stored v1").min_effect == pytest.approx(0.05)
    assert judged_changes(tmp_path, base, '[tool.roofwatch]\nmin_effect = "60%"\n' + SUITE, stored) == [
        ("min_effect", "5 %", "60 %")]


def test_only_renames_the_judging_side_does_not_declare_wait_for_a_maintainer(tmp_path: Path) -> None:
    base = '[tool.roofwatch]\nrenamed = { "a" = "b" }\n' + SUITE
    head = '[tool.roofwatch]\nrenamed = { "a" = "b", "c" = "d" }\n' + SUITE
    judged = judging_of(tree(tmp_path, "base", base), "", "")
    theirs = judging_of(tree(tmp_path, "head", head), "", "")
    assert judged.renamed == {"a": "b"} and pending_renames(judged, theirs) == {"c": "d"}


def test_the_base_sets_memory_min_effect_never_the_head(tmp_path: Path) -> None:
    base = '[tool.roofwatch]\nmemory_min_effect = "10%"\n' + SUITE
    head = '[tool.roofwatch]\nmemory_min_effect = "100%"\n' + SUITE
    assert judging_of(tree(tmp_path, "base", base), "", "").memory_min_effect == pytest.approx(0.10)
    assert judging_of(tree(tmp_path, "plain", SUITE), "", "").memory_min_effect is None  # the default, 5 %
    stored = '[tool.roofwatch]\noverride = true\nmemory_min_effect = "2%"\n' + SUITE
    assert judging_of(tree(tmp_path, "base", base), stored, "stored v1").memory_min_effect == pytest.approx(0.02)
    assert judged_changes(tmp_path, base, head) == [("memory_min_effect", "10 %", "100 %")]


def job(min_rounds: int = 3, max_rounds: int = 10, **asked: bool) -> ABJob:
    return ABJob(comparison_id=1, idempotency_key="k", repository="o/r", clone_url="u", base_sha="a", head_sha="b",
                 data_dir="d", min_rounds=min_rounds, max_rounds=max_rounds, **asked)


@pytest.mark.parametrize(("table", "before", "after"), [
    # the service's defaults give way to the judging side's declared rounds, which then count as asked for
    ("", job(), job()),
    ("ab_max_rounds = 16\n", job(), job(max_rounds=16, max_rounds_asked=True)),
    ("ab_min_rounds = 6\n", job(), job(min_rounds=6, min_rounds_asked=True)),
    ("ab_min_rounds = 12\n", job(), job(min_rounds=12, max_rounds=12, min_rounds_asked=True)),
    # rounds asked for on the command line win over the repository's
    ("ab_max_rounds = 16\n", job(max_rounds=30, max_rounds_asked=True), job(max_rounds=30, max_rounds_asked=True)),
    ("ab_min_rounds = 6\nab_max_rounds = 16\n", job(min_rounds=4, max_rounds=10, min_rounds_asked=True),
     job(min_rounds=4, max_rounds=16, min_rounds_asked=True, max_rounds_asked=True)),
])
def test_the_judging_sides_rounds_apply_unless_rounds_were_asked_for(tmp_path: Path, table: str, before: ABJob,
                                                                     after: ABJob) -> None:
    judged = judging_of(tree(tmp_path, "base", "[tool.roofwatch]\n" + table + SUITE), "", "")
    assert rounds_of(before, judged) == after


@pytest.mark.parametrize(("table", "message"), [
    ('[tool.roofwatch]\nmemory_min_effect = "0"\n', "memory_min_effect '0' must lie between"),
    ('[tool.roofwatch]\nab_max_rounds = 2\n', "ab_max_rounds must be a whole number of rounds from 3"),
    ('[tool.roofwatch]\nab_min_rounds = "6"\n', "ab_min_rounds must be a whole number of rounds from 3"),
    ('[tool.roofwatch]\nab_max_rounds = 1000\n', "ab_max_rounds must be a whole number of rounds from 3 to 200"),
    ('[tool.roofwatch]\nmissing = "ignore"\n', "missing must be one of failure, neutral"),
    ('[tool.roofwatch]\nrenamed = ["a"]\n', "renamed must be a table"),
    ('[tool.roofwatch]\nrenamed = { "a" = "x", "b" = "x" }\n', "the same new name"),
])
def test_malformed_judging_settings_are_refused_with_the_reason(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(SuiteConfigError, match=message):
        judging_of(tree(tmp_path, "base", table + SUITE), "", "")


def test_a_suite_may_not_take_the_name_of_a_derived_memory_suite(tmp_path: Path) -> None:
    with pytest.raises(SuiteConfigError, match="may not end in ':memory'"):
        judging_of(tree(tmp_path, "base", SUITE.replace('"benchmarks"', '"benchmarks:memory"')), "", "")
