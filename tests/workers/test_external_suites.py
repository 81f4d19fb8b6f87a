"""Tracking a repository that never declared [tool.roofwatch]: a stored suites file, and backfill with today's suite.

Real git repositories in temp dirs, the real ``roofwatch`` console script, embedded mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import Session, create_engine, select
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.common.errors import SuiteConfigError
from roofwatch.workers.external_suites import choose_suites, parse_suites_file

SUITES = """\
[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.02 --benchmark-warmup=off"
suite_paths = ["bench/"]
"""
KERNEL = "def scale(xs, a):\n    return [a * x for x in xs]\n"
BENCH = "from kernel import scale\n\nXS = [float(i) for i in range(500)]\n\n\ndef test_scale(benchmark):\n    benchmark(scale, XS, {factor})\n"


def _history(repo: Path, bench_from: int) -> list[str]:
    """Five commits of a kernel; the benchmark exists from commit ``bench_from`` (0-based) on."""
    init(repo)
    shas = []
    for i in range(5):
        files = {"kernel.py": KERNEL + f"# revision {i}\n"}
        if i == bench_from:
            files["bench/test_bench.py"] = BENCH.format(factor=3.0)
        shas.append(commit(repo, f"kernel revision {i}", files, i + 1))
    return shas


def _runs(data_dir: Path) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    from roofwatch.service.core.models import Commit, Run, SuiteExecution

    engine = create_engine(f"sqlite:///{data_dir / 'roofwatch.db'}")
    with Session(engine) as session:
        rows = session.exec(select(Run, Commit).where(Run.commit_id == Commit.id).order_by(Commit.committed_at)).all()
        out = [(commit_.sha, run.state, run.suites_source,
                [(s.name, s.reason) for s in session.exec(select(SuiteExecution).where(SuiteExecution.run_id == run.id))])
               for run, commit_ in rows]
    engine.dispose()
    return out


def test_a_stored_suites_file_tracks_a_repository_that_never_declared_one(tmp_path: Path) -> None:
    repo, data = tmp_path / "legacy", tmp_path / "data"
    shas = _history(repo, bench_from=0)
    suites = tmp_path / "suites.toml"
    suites.write_text(SUITES)
    env = {"ROOFWATCH_DATA_DIR": str(data)}
    added = roofwatch(["repo", "add", "acme/legacy", "--clone-url", str(repo), "--suites", str(suites)], env)
    assert "suites v1 from suites.toml stored" in added.stdout
    roofwatch(["run", "--repo", "acme/legacy", "--last", "5"], env)
    runs = _runs(data)
    assert [r[0] for r in runs] == shas
    assert {(r[1], r[2]) for r in runs} == {("succeeded", "stored suites v1 (suites.toml) (the commit declares no suites)")}
    assert all(names == [("benchmarks", "")] for *_, names in runs)

    suites.write_text(SUITES.replace('name = "benchmarks"', 'name = "bench"'))
    assert "suites v2" in roofwatch(["repo", "set-suites", "acme/legacy", str(suites)], env).stdout
    suites.write_text("[[tool.roofwatch.suites]]\nname = 'x'\n")
    bad = roofwatch(["repo", "set-suites", "acme/legacy", str(suites)], env, check=False)
    assert bad.returncode == 2 and "invalid [[tool.roofwatch.suites]]" in bad.stderr


def test_backfill_runs_todays_suite_over_commits_that_predate_it(tmp_path: Path) -> None:
    repo, data = tmp_path / "legacy", tmp_path / "data"
    shas = _history(repo, bench_from=4)
    suites = tmp_path / "suites.toml"
    suites.write_text(SUITES)
    env = {"ROOFWATCH_DATA_DIR": str(data)}
    roofwatch(["run", "--repo", str(repo), "--last", "5", "--suites", str(suites), "--suites-from", "HEAD"], env)
    runs = _runs(data)
    assert [(r[0], r[1]) for r in runs] == [(sha, "succeeded") for sha in shas]
    names = {name for *_, suites_run in runs for name, _ in suites_run}
    assert len(names) == 1 and next(iter(names)).startswith("benchmarks@")  # one series over the whole history
    assert all(f"from {shas[-1]}, content" in reason for *_, suites_run in runs for _, reason in suites_run)
    assert runs[0][2] == "--suites suites.toml (the commit declares no suites)"

    # The benchmark itself changes: a new series epoch, not a regression of the kernel.
    changed = commit(repo, "bench: other factor", {"bench/test_bench.py": BENCH.format(factor=5.0)}, 9)
    roofwatch(["run", "--repo", str(repo), "--rev", changed, "--suites", str(suites), "--suites-from", "HEAD"], env)
    newest = _runs(data)[-1]
    assert newest[0] == changed and newest[3][0][0].startswith("benchmarks@") and newest[3][0][0] not in names


def test_precedence_between_the_commit_and_the_stored_config(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "pyproject.toml").write_text(SUITES.replace('"benchmarks"', '"own"'))
    bare = tmp_path / "bare"
    bare.mkdir()
    override = "[tool.roofwatch]\noverride = true\n\n" + SUITES
    assert [s.name for s in choose_suites(own, SUITES, "stored v1")[0] or []] == ["own"]
    assert choose_suites(own, SUITES, "stored v1")[1] == "pyproject.toml of the commit (wins over stored v1)"
    assert [s.name for s in choose_suites(own, override, "stored v2")[0] or []] == ["benchmarks"]
    assert choose_suites(own, override, "stored v2")[1] == "stored v2 (override = true)"
    assert choose_suites(bare, "", "")[0] is None
    with pytest.raises(SuiteConfigError, match="no suite_paths"):
        parse_suites_file(SUITES.replace('suite_paths = ["bench/"]', 'suites_from = "main"'))
    with pytest.raises(SuiteConfigError, match="not valid TOML"):
        parse_suites_file("[[tool.roofwatch.suites]\n")
    # `override` at the top of the file is read by nothing: refused, never silently ignored.
    with pytest.raises(SuiteConfigError, match=r"sets override outside \[tool.roofwatch\]"):
        parse_suites_file("override = true\n\n" + SUITES)


def test_a_suite_kept_in_a_repository_of_its_own_measures_every_commit(tmp_path: Path) -> None:
    repo, bench, data = tmp_path / "legacy", tmp_path / "legacy-bench", tmp_path / "data"
    shas = _history(repo, bench_from=99)  # the measured repository never holds the benchmark
    init(bench)
    bench_sha = commit(bench, "bench: time scale", {"bench/test_bench.py": BENCH.format(factor=3.0)}, 1)
    suites = tmp_path / "suites.toml"
    suites.write_text(SUITES + f'suites_repo = "{bench}"\n')
    env = {"ROOFWATCH_DATA_DIR": str(data)}
    roofwatch(["repo", "add", "acme/legacy", "--clone-url", str(repo), "--suites", str(suites)], env)
    roofwatch(["run", "--repo", "acme/legacy", "--last", "3"], env)
    runs = _runs(data)
    assert [(r[0], r[1]) for r in runs] == [(sha, "succeeded") for sha in shas[-3:]]
    names = {name for *_, suites_run in runs for name, _ in suites_run}
    assert len(names) == 1 and next(iter(names)).startswith("benchmarks@")
    assert all(f"from {bench} at HEAD ({bench_sha})" in reason for *_, suites_run in runs for _, reason in suites_run)
    assert not (repo / "bench").exists()


def test_a_commit_cannot_name_a_repository_for_the_worker_to_fetch(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "pyproject.toml").write_text(SUITES + 'suites_repo = "/srv/roofwatch/mirrors/other.git"\n')
    with pytest.raises(SuiteConfigError, match="suites_repo is allowed only in a stored config"):
        choose_suites(own, "", "")
    with pytest.raises(SuiteConfigError, match="sets suites_repo but no suite_paths"):
        parse_suites_file(SUITES.replace('suite_paths = ["bench/"]', 'suites_repo = "/x"'))
