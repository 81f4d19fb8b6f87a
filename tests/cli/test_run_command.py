"""`roofwatch run` end to end on a separate repository with plain pytest-benchmark suites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.environment import engine_for
from support.tests_support import roofwatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _outcomes_by_commit(database_url: str) -> dict[str, dict[str, str]]:
    from sqlalchemy import text

    engine = engine_for(database_url)
    with engine.connect() as connection:
        rows = connection.execute(text(
            "SELECT c.sha, o.test_id, o.outcome FROM testoutcome o "
            "JOIN run r ON r.id = o.run_id JOIN \"commit\" c ON c.id = r.commit_id"
        )).all()
    engine.dispose()
    result: dict[str, dict[str, str]] = {}
    for sha, test_id, outcome in rows:
        result.setdefault(sha, {})[test_id] = outcome
    return result


def test_history_records_outcomes_and_timings_per_commit(
    database_url: str, sample_history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, shas = sample_history
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": database_url}
    roofwatch(["db", "upgrade"], env)
    done = roofwatch(["run", "--repo", str(repo), "--range", f"{shas['good']}~0..main", "--rev", shas["good"]],
                     env, check=False)
    assert done.returncode == 1, done.stdout  # the broken commit fails the run
    assert "3/3" in done.stdout or "3 commit(s)" in done.stdout

    outcomes = _outcomes_by_commit(database_url)
    assert set(outcomes) == set(shas.values())
    small = "checks.test_kernel::test_saxpy_small"
    assert outcomes[shas["good"]][small] == "passed"
    assert outcomes[shas["broken"]][small] == "failed"
    assert outcomes[shas["fixed"]][small] == "passed"
    # Only the broken commit has a failing outcome.
    failing = {sha for sha, tests in outcomes.items() if "failed" in tests.values()}
    assert failing == {shas["broken"]}

    runs = json.loads(roofwatch(["regressions", "--format", "json"], env).stdout)
    failures = [r for r in runs if r["kind"] == "correctness-failure"]
    assert [(r["benchmark"], r["commit"], r["state"]) for r in failures] == [
        (small, shas["broken"], "fixed")
    ]

    # History persists: a second run skips what this device already measured...
    again = roofwatch(["run", "--repo", str(repo), "--rev", shas["fixed"]], env)
    assert "already measured" in again.stdout
    # ...unless forced.
    forced = roofwatch(["run", "--repo", str(repo), "--rev", shas["fixed"], "--force"], env)
    assert "1 commit(s)" in forced.stdout


def test_unknown_repository_and_revision_are_clear_errors(
    sample_history: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    repo, _ = sample_history
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    unknown = roofwatch(["run", "--repo", "nobody/nothing"], env, check=False)
    assert unknown.returncode == 2
    assert "not a registered repository" in unknown.stderr + unknown.stdout
    missing = roofwatch(["run", "--repo", str(repo), "--rev", "deadbeef" * 5], env, check=False)
    assert missing.returncode == 2
    assert "unknown revision" in missing.stderr + missing.stdout


def test_repo_add_then_run_by_name(sample_history: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    repo, shas = sample_history
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    roofwatch(["repo", "add", "acme/kernels", "--clone-url", str(repo)], env)
    done = roofwatch(["run", "--repo", "acme/kernels", "--rev", shas["good"]], env)
    assert "acme/kernels" in done.stdout and "succeeded" in done.stdout


# A valid pyproject.toml of 10 MB: parsing it took 25 s and 715 MB before the worker refused it.
HUGE_PYPROJECT = ('[project]\nname = "huge"\nversion = "1"\n[tool.padding]\nwords = [\n'
                  + '  "padding padding padding padding padding padding padding padding padding",\n' * 140_000 + "]\n")


def test_an_oversized_pyproject_is_never_parsed_and_errors_the_run_with_the_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from support.sample_repo import commit, init

    from roofwatch.common.limits import PYPROJECT_LIMIT
    from roofwatch.service.flows import run_selection

    repo = tmp_path / "huge"
    init(repo)
    sha = commit(repo, "A pyproject.toml of 10 MB", {"pyproject.toml": HUGE_PYPROJECT}, 1)
    assert len(HUGE_PYPROJECT) > 10 * PYPROJECT_LIMIT
    parsed: list[int] = []
    real_parse = run_selection.parse_toml

    def counting_parse(text: bytes | str, what: str) -> dict[str, object]:
        parsed.append(len(text))
        return real_parse(text, what)

    monkeypatch.setattr(run_selection, "parse_toml", counting_parse)
    assert run_selection.gpu_suites(repo, sha, "") == []
    assert all(size <= PYPROJECT_LIMIT for size in parsed), parsed

    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    done = roofwatch(["run", "--repo", str(repo), "--format", "json"], env, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    [row] = json.loads(done.stdout)
    assert row["state"] == "errored"
    assert f"is {len(HUGE_PYPROJECT)} bytes, over the 1 MiB limit" in row["reason"]


def test_a_run_by_url_never_changes_a_registered_repository_nor_registers_what_it_cannot_fetch(
        sample_history: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from sqlalchemy import create_engine, text

    repo, _ = sample_history
    data = tmp_path / "data"
    env = {"ROOFWATCH_DATA_DIR": str(data)}
    roofwatch(["repo", "add", "acme/kernels", "--clone-url", str(repo), "--default-branch", "develop",
               "--trust-policy", "everyone"], env)

    def registered() -> list[tuple[str, str, str, str]]:
        engine = create_engine(f"sqlite:///{data / 'roofwatch.db'}")
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT full_name, clone_url, default_branch, trust_policy "
                                           "FROM repository ORDER BY id")).all()
        engine.dispose()
        return [tuple(row) for row in rows]  # type: ignore[misc]

    before = registered()
    # Port 1 on loopback: nothing listens there, the fetch fails at once.
    same_name = roofwatch(["run", "--repo", "https://127.0.0.1:1/acme/kernels.git"], env, check=False)
    assert same_name.returncode == 2 and "Traceback" not in same_name.stdout + same_name.stderr
    assert "acme/kernels is registered with another clone URL" in " ".join((same_name.stdout + same_name.stderr).split())
    unreachable = roofwatch(["run", "--repo", "https://127.0.0.1:1/acme/elsewhere.git"], env, check=False)
    assert unreachable.returncode == 2 and "Traceback" not in unreachable.stdout + unreachable.stderr
    assert registered() == before == [("acme/kernels", str(repo), "develop", "everyone")]
