"""Tracking a repository that never declared [tool.roofwatch]: a stored suites file, and backfill with today's suite.

Real git repositories in temp dirs, the real ``roofwatch`` console script, embedded mode. A suite
whose files come from outside the commit (``suites_from``, ``suites_repo``) keeps one series under
its own name, whatever those files hold; a change of their content is an event on that series.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, create_engine, select
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.common.errors import SuiteConfigError
from roofwatch.suite_config.external import choose_suites, parse_suites_file

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


def _suite_files(data_dir: Path) -> list[tuple[str, str, dict[str, Any]]]:
    """(commit SHA, suite name, its suite_files record) of every suite execution, in run order."""
    from roofwatch.service.core.models import Commit, Run, SuiteExecution

    engine = create_engine(f"sqlite:///{data_dir / 'roofwatch.db'}")
    with Session(engine) as session:
        rows = session.exec(select(Commit.sha, SuiteExecution.name, SuiteExecution.suite_files)
                            .where(SuiteExecution.run_id == Run.id, Run.commit_id == Commit.id)
                            .order_by(Run.id)).all()  # type: ignore[arg-type]
    engine.dispose()
    return [(sha, name, dict(files)) for sha, name, files in rows]


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
    assert names == {"benchmarks"}  # one series over the whole history, under the suite's own name
    assert all(f"from {shas[-1]}, content" in reason for *_, suites_run in runs for _, reason in suites_run)
    assert runs[0][2] == "--suites suites.toml (the commit declares no suites)"
    [digest] = {files["digest"] for _, _, files in _suite_files(data)}
    assert {(files["commit"], tuple(files["paths"])) for _, _, files in _suite_files(data)} == {(shas[-1], ("bench/",))}

    # The benchmark itself changes: the same series goes on, its files' new content recorded with the run.
    changed = commit(repo, "bench: other factor", {"bench/test_bench.py": BENCH.format(factor=5.0)}, 9)
    roofwatch(["run", "--repo", str(repo), "--rev", changed, "--suites", str(suites), "--suites-from", "HEAD"], env)
    newest = _runs(data)[-1]
    assert newest[0] == changed and newest[3][0][0] == "benchmarks"
    assert _suite_files(data)[-1][2]["digest"] not in ("", digest)


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
    assert names == {"benchmarks"}
    assert all(f"from {bench} at HEAD ({bench_sha})" in reason for *_, suites_run in runs for _, reason in suites_run)
    assert not (repo / "bench").exists()


# Twenty times the work of BENCH: a benchmark rewritten in the suites repository, not a slower kernel.
HEAVY_BENCH = BENCH.replace("range(500)", "range(10000)")


def test_a_changed_suites_repo_is_an_event_on_the_series_never_a_new_series_nor_a_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmarks live in a repository of their own; between two runs they are rewritten to do 20× the work.

    Before 0016 the second half of the history went to a new series ``benchmarks@<digest>``; now the
    series is one, and the step where the files changed is an event on it (stored with each run, in the
    series API, marked on the chart) that change detection never reads as a change of the kernel.
    """
    from roofwatch.service.analysis.lifecycle import CONFIRMED
    from roofwatch.service.core.models import Benchmark, Change

    repo, bench, data = tmp_path / "legacy", tmp_path / "legacy-bench", tmp_path / "data"
    shas = _history(repo, bench_from=99)
    init(bench)
    light = commit(bench, "bench: time scale", {"bench/test_bench.py": BENCH.format(factor=3.0)}, 1)
    suites = tmp_path / "suites.toml"
    suites.write_text(SUITES + f'suites_repo = "{bench}"\n')
    env = {"ROOFWATCH_DATA_DIR": str(data)}
    roofwatch(["repo", "add", "acme/legacy", "--clone-url", str(repo), "--suites", str(suites)], env)
    roofwatch(["run", "--repo", "acme/legacy", *(arg for sha in shas[:3] for arg in ("--rev", sha))], env)
    heavy = commit(bench, "bench: a larger input", {"bench/test_bench.py": HEAVY_BENCH.format(factor=3.0)}, 2)
    roofwatch(["run", "--repo", "acme/legacy", *(arg for sha in shas[3:] for arg in ("--rev", sha))], env)

    recorded = _suite_files(data)
    assert [(sha, name) for sha, name, _ in recorded] == [(sha, "benchmarks") for sha in shas]
    assert [files["commit"] for *_, files in recorded] == [light] * 3 + [heavy] * 2
    assert all(files["repository"] == str(bench) and files["paths"] == ["bench/"] and files["ref"] == "HEAD"
               for *_, files in recorded)
    before, after = recorded[0][2]["digest"], recorded[-1][2]["digest"]
    assert [files["digest"] for *_, files in recorded] == [before] * 3 + [after] * 2 and before != after

    engine = create_engine(f"sqlite:///{data / 'roofwatch.db'}")
    with Session(engine) as session:
        series = session.exec(select(Benchmark)).all()
        changes = session.exec(select(Change)).all()
    engine.dispose()
    assert [(b.suite, b.name) for b in series] == [("benchmarks", "test_scale")]
    # Not even a candidate at the files' change (position 4): a 20× step there is no step of the kernel. The
    # same code elsewhere, a 20 µs benchmark on a loaded host, may raise a candidate of noise; its A/B must
    # not confirm it.
    assert [c for c in changes if (c.range_start_position or 0) < 4 <= (c.range_end_position or 0)] == []
    assert [c for c in changes if c.phase == CONFIRMED] == []

    for name, value in {**env, "ROOFWATCH_DATABASE_URL": f"sqlite:///{data / 'roofwatch.db'}"}.items():
        monkeypatch.setenv(name, value)
    from support.environment import _reset_caches

    _reset_caches()
    from roofwatch.service.api.app import create_app

    with TestClient(create_app()) as client:
        page = client.get(f"/api/benchmarks/{series[0].id}/series").json()
        assert [p["sha"] for p in page["points"]] == shas
        [event] = page["events"]
        assert (event["kind"], event["sha"], event["position"]) == ("benchmark-files", shas[3], 4)
        assert (event["before"]["digest"], event["after"]["digest"], event["after"]["commit"]) == (before, after, heavy)
        # A page that starts at the event still names it (its first point is compared with the one before).
        assert client.get(f"/api/benchmarks/{series[0].id}/series?limit=2").json()["events"] == [event]
        assert client.get(f"/api/benchmarks/{series[0].id}/series?limit=2&before=4").json()["events"] == []

        html = client.get(f"/benchmarks/{series[0].id}").text
        assert "Benchmark files changed (1)" in html and after in html and heavy[:12] in html
        figure = json.loads(html.split('<script type="application/json" id="figure">', 1)[1].split("</script>", 1)[0])
        assert [a["text"] for a in figure["layout"]["annotations"]] == [f"benchmark files {before} → {after}"]
    _reset_caches()


def test_a_commit_cannot_name_a_repository_for_the_worker_to_fetch(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "pyproject.toml").write_text(SUITES + 'suites_repo = "/srv/roofwatch/mirrors/other.git"\n')
    with pytest.raises(SuiteConfigError, match="suites_repo is allowed only in a stored config"):
        choose_suites(own, "", "")
    with pytest.raises(SuiteConfigError, match="sets suites_repo but no suite_paths"):
        parse_suites_file(SUITES.replace('suite_paths = ["bench/"]', 'suites_repo = "/x"'))


def test_a_suites_repo_without_a_commit_of_the_files_says_to_commit_them(tmp_path: Path) -> None:
    """The first-hour mistake: a benchmark folder made a git repository, but nothing committed yet."""
    from roofwatch.git import checkout
    from roofwatch.workers.backfill import lay_over

    repo, bench, tree = tmp_path / "legacy", tmp_path / "legacy-bench", tmp_path / "tree"
    _history(repo, bench_from=99)
    mirror = checkout.ensure_mirror(tmp_path / "data" / "mirrors", str(repo))
    tree.mkdir()
    init(bench)
    [spec] = parse_suites_file(SUITES + f'suites_repo = "{bench}"\n').suites
    with pytest.raises(SuiteConfigError, match=r"has no commit at HEAD: commit the benchmark files there "
                                               r"\(git add bench/ && git commit\)"):
        lay_over(mirror, tree, spec)
    commit(bench, "a readme only", {"README.md": "benchmarks to come\n"}, 1)
    with pytest.raises(SuiteConfigError, match=r"'bench/' does not exist at HEAD \(\w{12}\) \(only committed files"):
        lay_over(mirror, tree, spec)
    sha = commit(bench, "bench: time scale", {"bench/test_bench.py": BENCH.format(factor=3.0)}, 2)
    laid, files = lay_over(mirror, tree, spec)
    assert laid.name == "benchmarks" and (tree / "bench" / "test_bench.py").exists()
    assert files is not None and (files.commit, files.ref, files.repository, files.paths) == (sha, "HEAD", str(bench),
                                                                                             ("bench/",))
    assert files.note() == f"suite files bench/ from {bench} at HEAD ({sha}), content {files.digest}"
