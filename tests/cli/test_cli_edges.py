"""The first hour on the command line: prerequisites before checkout, one-line errors, `doctor`."""

from __future__ import annotations

import json
import socket
import sqlite3
from pathlib import Path

import pytest
from support.sample_repo import build_history, commit, init
from support.tests_support import roofwatch

from roofwatch.common.vocabulary import AnalysisState
from roofwatch.service.core.db import session_scope
from roofwatch.service.core.models import Run

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_missing_sandbox_stops_run_before_any_commit_is_checked_out(tmp_path: Path) -> None:
    repo = tmp_path / "kernels"
    build_history(repo)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_SANDBOX": "bubblewrap",
           "ROOFWATCH_BWRAP_PATH": "bwrap-not-installed-here"}

    done = roofwatch(["run", "--repo", str(repo), "--last", "3"], env, check=False)

    assert done.returncode == 2
    assert "'bwrap-not-installed-here' is not installed" in done.stdout
    assert "fix: apt-get install bubblewrap" in done.stdout
    assert not (tmp_path / "data" / "worktrees").exists() or not any((tmp_path / "data" / "worktrees").iterdir())
    with sqlite3.connect(tmp_path / "data" / "roofwatch.db") as db:
        assert db.execute("SELECT count(*) FROM run").fetchone() == (0,)


GPU_SUITE = ('[[tool.roofwatch.suites]]\nname = "cuda-benchmarks"\nkind = "benchmark"\n'
             'command = "python -m pytest bench -q"\ngpu = true\n')


def test_a_suite_that_needs_a_gpu_stops_run_on_a_host_without_one_before_any_checkout(tmp_path: Path) -> None:
    from roofwatch.workers import prerequisites

    if prerequisites.gpu().ok:
        pytest.skip("this host has a GPU: the suite could run")
    repo = tmp_path / "kernels"
    init(repo)
    commit(repo, "CUDA kernels", {"pyproject.toml": GPU_SUITE, "bench/test_k.py": "def test_k():\n    pass\n"}, 1)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}

    done = roofwatch(["run", "--repo", str(repo), "--last", "1"], env, check=False)

    assert done.returncode == 2, done.stdout
    assert "GPU for suite(s) cuda-benchmarks (gpu = true)" in done.stdout
    assert "fix: run on a host with an NVIDIA GPU" in done.stdout and "nothing was checked out" in done.stdout
    with sqlite3.connect(tmp_path / "data" / "roofwatch.db") as db:
        assert db.execute("SELECT count(*) FROM run").fetchone() == (0,)


CPU_SUITE = ('[[tool.roofwatch.suites]]\nname = "cpu-benchmarks"\nkind = "benchmark"\n'
             'command = "python -m pytest bench -q"\n')


@pytest.mark.parametrize(("commit_declares", "stored", "needing"), [
    (GPU_SUITE, "", ["cuda-benchmarks"]),
    (GPU_SUITE, CPU_SUITE, ["cuda-benchmarks"]),                   # the commit's own suites win …
    (GPU_SUITE, "override = true\n" + CPU_SUITE, []),              # … unless the stored file overrides them
    ("[project]\nname = 'x'\n", GPU_SUITE, ["cuda-benchmarks"]),   # a commit without suites runs the stored ones
    ("[project]\nname = 'x'\n", "", []),
])
def test_the_gpu_check_reads_the_suites_the_run_will_choose(tmp_path: Path, commit_declares: str, stored: str,
                                                           needing: list[str]) -> None:
    from roofwatch.service.flows.run_selection import gpu_suites

    repo = tmp_path / "kernels"
    init(repo)
    sha = commit(repo, "suites", {"pyproject.toml": commit_declares}, 1)
    assert gpu_suites(repo, sha, stored) == needing


def test_a_gpu_suite_reached_on_a_host_without_a_gpu_errors_with_that_reason(tmp_path: Path) -> None:
    """A worker (or a run whose suites changed after the check) never starts such a suite."""
    from roofwatch.common.envelope import DeviceInfo
    from roofwatch.common.jobs import Job
    from roofwatch.workers import prerequisites
    from roofwatch.workers.runner import run_job

    if prerequisites.gpu().ok:
        pytest.skip("this host has a GPU: the suite could run")
    repo = tmp_path / "kernels"
    init(repo)
    sha = commit(repo, "CUDA kernels", {"pyproject.toml": GPU_SUITE}, 1)
    job = Job(run_id=1, idempotency_key="k", repository="acme/cuda", clone_url=str(repo), sha=sha,
              data_dir=str(tmp_path / "data"))
    envelope = run_job(job, DeviceInfo(device_class="CPU test", fingerprint="t"))
    [suite] = envelope.suites
    assert (envelope.status, suite.status) == ("errored", "errored")
    assert suite.reason.startswith("the suite needs a GPU (gpu = true) and this host has none")


def test_doctor_lists_what_the_machine_has_and_the_fix_for_what_it_lacks(tmp_path: Path) -> None:
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_SANDBOX": "bubblewrap",
           "ROOFWATCH_BWRAP_PATH": "bwrap-not-installed-here"}
    done = roofwatch(["doctor"], env, check=False)
    assert done.returncode == 1  # nothing can be measured here without the sandbox
    assert "git version" in done.stdout
    assert "apt-get install bubblewrap" in done.stdout
    assert "roofwatch upload / serve / regressions" in done.stdout

    unconfined = roofwatch(["doctor"], {**env, "ROOFWATCH_SANDBOX": "unconfined"}, check=False)
    assert unconfined.returncode == 0 and "suites run unconfined" in unconfined.stdout


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_serve_refuses_a_port_that_does_not_exist_in_one_line(tmp_path: Path, port: str) -> None:
    done = roofwatch(["serve", "--port", port], {"ROOFWATCH_DATA_DIR": str(tmp_path)}, check=False)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --port must be between 1 and 65535, not {port}"
    assert "Traceback" not in done.stdout + done.stderr


def test_serve_on_a_busy_port_says_so_before_it_says_anything_else(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        done = roofwatch(["serve", "--port", str(port)], {"ROOFWATCH_DATA_DIR": str(tmp_path)}, check=False)
    assert done.returncode == 2
    assert f"error: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "dashboard on" not in done.stdout and "startup complete" not in done.stderr


def test_regressions_refuses_an_unknown_format_and_lists_the_change_id(tmp_path: Path) -> None:
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    bad = roofwatch(["regressions", "--format", "yaml"], env, check=False)
    assert bad.returncode == 2 and "--format must be table or json, not 'yaml'" in bad.stderr

    repo = tmp_path / "kernels"
    shas = build_history(repo)
    roofwatch(["run", "--repo", str(repo), "--last", "3"], env, check=False)
    [change] = json.loads(roofwatch(["regressions", "--format", "json"], env).stdout)
    table = roofwatch(["regressions"], env).stdout
    header = next(line for line in table.splitlines() if "kind" in line)
    assert header.split()[1] == "id"  # the column `triage ID` needs
    cells = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if "│" in line]
    assert [str(change["id"]), change["benchmark"]] in [row[:2] for row in cells]
    assert change["commit"] == shas["broken"]


def test_upload_refuses_an_unknown_output_format(tmp_path: Path) -> None:
    done = roofwatch(["upload", str(tmp_path / "x.json"), "--repo", "a/b", "--commit", "abc", "--output", "yaml"],
                     {"ROOFWATCH_DATA_DIR": str(tmp_path)}, check=False)
    assert done.returncode == 2 and "--output must be table or json, not 'yaml'" in done.stderr


def test_an_analysis_that_fails_is_shown_on_the_run_not_as_no_change(
        roofwatch_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure injected into the history read: the run says 'failed' and why, in the CLI and the pages."""
    from fastapi.testclient import TestClient
    from rich.console import Console

    from roofwatch.service.api.app import create_app
    from roofwatch.service.cli.run import RunRequest, execute
    from roofwatch.service.core.db import migrate
    from roofwatch.service.flows import detection

    repo = tmp_path / "kernels"
    shas = build_history(repo)
    migrate()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the history did not fit")

    monkeypatch.setattr(detection, "_performance", broken)
    rows: list[dict[str, object]] = []
    code = execute(RunRequest(repo=str(repo), revs=[shas["good"]]), Console(width=200), report=rows.extend)

    assert code == 1
    [row] = rows
    assert (row["state"], row["analysis"]) == ("succeeded", "failed")
    assert row["analysis_error"] == "RuntimeError: the history did not fit"
    with session_scope() as session:
        run = session.get(Run, row["run"])
        assert run is not None and run.analysis_state == "failed"
    client = TestClient(create_app())
    assert "analysis failed: RuntimeError: the history did not fit" in client.get(f"/runs/{row['run']}").text
    overview = client.get("/").text
    assert "analysis failed" in overview and "no open change at this commit" not in overview

    # A run stored but not yet read into its history says so on both pages, never "no open change".
    with session_scope() as session:
        run = session.get(Run, row["run"])
        assert run is not None
        run.analysis_state = AnalysisState.PENDING
        session.add(run)
    assert "analysis pending: its changes are not known yet" in client.get(f"/runs/{row['run']}").text
    overview = client.get("/").text
    assert "analysis pending: changes not known yet" in overview and "no open change at this commit" not in overview
