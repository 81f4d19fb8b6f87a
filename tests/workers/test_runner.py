"""``run_job`` end to end: real repositories, real suites in the sandbox, envelopes as data."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sample_repo import BENCH, CHECKS, GOOD_KERNEL, build_history, commit, init

from roofwatch.common.envelope import DeviceInfo, Envelope, SuiteResult
from roofwatch.common.jobs import Job
from roofwatch.workers.runner import run_job

DEVICE = DeviceInfo(device_class="CPU test", fingerprint="test")

CORRECTNESS = """\
[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
timeout = 120
"""

WRITE_GARBAGE = """\
import sys

[target] = [arg.split("=", 1)[1] for arg in sys.argv if arg.startswith("--benchmark-json=")]
with open(target, "w") as handle:
    handle.write("not json")
"""


def suite_table(name: str, kind: str, command: str, extra: str = "") -> str:
    return f"[[tool.roofwatch.suites]]\nname = \"{name}\"\nkind = \"{kind}\"\ncommand = '{command}'\n{extra}"


def single_commit_repo(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str]:
    repo = tmp_path / "source"
    init(repo)
    return repo, commit(repo, "Add kernel", {"kernel.py": GOOD_KERNEL, "checks/test_kernel.py": CHECKS, **files}, 1)


def run(tmp_path: Path, repo: Path, sha: str, progress: list[tuple[str, str]] | None = None) -> Envelope:
    job = Job(run_id=7, idempotency_key="run-7", repository="acme/kernels", clone_url=str(repo), sha=sha,
              data_dir=str(tmp_path / "data"))
    report = (lambda name, event: progress.append((name, event))) if progress is not None else None
    return run_job(job, DEVICE, report)


def suites_by_name(envelope: Envelope) -> dict[str, SuiteResult]:
    return {suite.name: suite for suite in envelope.suites}


def test_good_commit_succeeds_with_outcomes_and_measurements(tmp_path: Path) -> None:
    repo = tmp_path / "source"
    shas = build_history(repo)
    envelope = run(tmp_path, repo, shas["good"])

    assert (envelope.status, envelope.reason) == ("succeeded", "")
    assert (envelope.run_id, envelope.idempotency_key, envelope.repository, envelope.sha) == (
        7, "run-7", "acme/kernels", shas["good"])
    assert envelope.device == DEVICE
    assert envelope.commit is not None and envelope.commit.message == "Add saxpy kernel"
    assert envelope.started_at <= envelope.finished_at
    correctness, benchmarks = envelope.suites
    assert (correctness.name, correctness.status, correctness.exit_code) == ("correctness", "passed", 0)
    assert {o.test_id: o.outcome for o in correctness.outcomes} == {
        "checks.test_kernel::test_saxpy_small": "passed", "checks.test_kernel::test_saxpy_empty": "passed"}
    assert correctness.outcomes[0].max_abs_err == 0.0

    assert (benchmarks.name, benchmarks.status) == ("benchmarks", "passed")
    measured = {m.name: m for m in benchmarks.measurements}
    assert sorted(measured) == ["test_busy", "test_saxpy"]
    assert (measured["test_busy"].flops, measured["test_busy"].bytes) == (40_000, 160_000)
    assert (measured["test_saxpy"].flops, measured["test_saxpy"].bytes) == (4_000, 48_000)
    for m in measured.values():
        assert m.n > 1
        assert len(m.samples) == m.n
        assert 0 < m.min <= m.median
        assert m.dtype == "fp64"
    # The envelope is what travels to the service: it must survive JSON.
    assert Envelope.model_validate_json(envelope.model_dump_json()) == envelope
    assert not list((tmp_path / "data" / "worktrees").iterdir())


def test_broken_kernel_fails_its_correctness_suite(tmp_path: Path) -> None:
    repo, sha = single_commit_repo(tmp_path, {
        "pyproject.toml": CORRECTNESS, "kernel.py": GOOD_KERNEL.replace("a * x + y", "a * x - y")})
    envelope = run(tmp_path, repo, sha)

    assert (envelope.status, envelope.reason) == ("failed", "suites not passed: correctness")
    [suite] = envelope.suites
    assert (suite.status, suite.reason, suite.exit_code) == ("failed", "1 test(s) failed", 1)
    outcomes = {o.test_id.rsplit("::", 1)[1]: o for o in suite.outcomes}
    assert outcomes["test_saxpy_small"].outcome == "failed"
    assert outcomes["test_saxpy_small"].max_abs_err == 8.0  # |(2*2 - 4) - 8|
    assert outcomes["test_saxpy_empty"].outcome == "passed"
    assert "1 failed, 1 passed" in suite.output_tail


def test_commit_without_pyproject_is_skipped(tmp_path: Path) -> None:
    repo, sha = single_commit_repo(tmp_path, {})
    envelope = run(tmp_path, repo, sha)

    assert envelope.status == "skipped"
    assert "no [[tool.roofwatch.suites]]" in envelope.reason
    assert envelope.suites == []
    assert envelope.commit is not None and envelope.commit.sha == sha


def test_timed_out_suite_does_not_stop_the_others(tmp_path: Path) -> None:
    slow = suite_table("slow", "correctness", 'python -c "import time; time.sleep(60)"', "timeout = 2\n")
    repo, sha = single_commit_repo(tmp_path, {"pyproject.toml": slow + CORRECTNESS})
    events: list[tuple[str, str]] = []
    envelope = run(tmp_path, repo, sha, events)

    suites = suites_by_name(envelope)
    assert (suites["slow"].status, suites["slow"].reason) == ("timeout", "timed out after 2 s and was killed")
    assert 2 <= suites["slow"].duration_s < 10
    assert suites["correctness"].status == "passed"
    assert len(suites["correctness"].outcomes) == 2
    assert (envelope.status, envelope.reason) == ("failed", "suites not passed: slow")
    assert events == [("slow", "start"), ("slow", "timeout"), ("correctness", "start"), ("correctness", "passed")]


def test_crashing_suite_is_errored(tmp_path: Path) -> None:
    crash = suite_table("crash", "correctness", 'python -c "import os,signal; os.kill(os.getpid(), signal.SIGSEGV)"')
    repo, sha = single_commit_repo(tmp_path, {"pyproject.toml": crash})
    envelope = run(tmp_path, repo, sha)

    [suite] = envelope.suites
    assert suite.status == "errored"
    assert suite.exit_code == -11
    assert suite.reason.startswith("crashed (SIGSEGV)")
    assert "no JUnit XML written" in suite.reason
    assert envelope.status == "errored"


def test_garbage_benchmark_file_is_errored(tmp_path: Path) -> None:
    garbage = suite_table("bench", "benchmark", "python write_garbage.py")
    repo, sha = single_commit_repo(tmp_path, {"pyproject.toml": garbage, "write_garbage.py": WRITE_GARBAGE})
    envelope = run(tmp_path, repo, sha)

    [suite] = envelope.suites
    assert (suite.status, suite.exit_code) == ("errored", 0)
    assert "not JSON" in suite.reason
    assert suite.measurements == []
    assert envelope.status == "errored"


def test_a_benchmark_suite_whose_benchmarks_all_skip_passes_with_nothing_measured(tmp_path: Path) -> None:
    # pytest-benchmark writes no JSON when no benchmark ran: a GPU-only benchmark on a CPU host, or one of
    # the kernel_benchmark stubs `roofwatch init` writes before their call is written.
    skipped = suite_table("bench", "benchmark", "python -m pytest bench -q -p no:cacheprovider --benchmark-only")
    repo, sha = single_commit_repo(tmp_path, {"pyproject.toml": skipped, "bench/test_later.py": (
        "import pytest\n\ndef test_later(benchmark):\n    pytest.skip('not written yet')\n")})
    envelope = run(tmp_path, repo, sha)

    [suite] = envelope.suites
    assert (suite.status, suite.exit_code, suite.measurements) == ("passed", 0, [])
    assert suite.reason.startswith("no benchmark ran (each one skipped)")
    assert envelope.status == "succeeded"


def test_failed_setup_skips_the_suite_command(tmp_path: Path) -> None:
    table = suite_table("bench", "benchmark", "python -m pytest bench -q --benchmark-only",
                        'setup = "echo preparing; exit 3"\n')
    repo, sha = single_commit_repo(tmp_path, {"pyproject.toml": table, "bench/test_bench.py": BENCH})
    envelope = run(tmp_path, repo, sha)

    [suite] = envelope.suites
    assert suite.status == "errored"
    assert suite.reason.startswith("setup `echo preparing; exit 3` failed (exit 3)")
    assert "preparing" in suite.reason
    assert suite.measurements == []


def test_unknown_sha_is_errored(tmp_path: Path) -> None:
    repo, _ = single_commit_repo(tmp_path, {"pyproject.toml": CORRECTNESS})
    envelope = run(tmp_path, repo, "f" * 40)

    assert envelope.status == "errored"
    assert envelope.reason == f"commit {'f' * 40} is not in the repository (was it pushed?)"
    assert envelope.commit is None
    assert envelope.suites == []


def test_unreachable_repository_is_errored(tmp_path: Path) -> None:
    envelope = run(tmp_path, tmp_path / "missing", "f" * 40)
    assert envelope.status == "errored"
    assert envelope.reason.startswith("cannot fetch")


@pytest.mark.parametrize(("pyproject", "reason"), [
    pytest.param(suite_table("x", "perf", "python -m pytest"), "invalid [[tool.roofwatch.suites]]", id="wrong-kind"),
    pytest.param("[tool.roofwatch]\nsuites = [\n", "not valid TOML", id="invalid-toml"),
    pytest.param(CORRECTNESS + CORRECTNESS, "suite names must be unique", id="duplicate-names"),
])
def test_malformed_suites_table_is_errored(tmp_path: Path, pyproject: str, reason: str) -> None:
    repo, sha = single_commit_repo(tmp_path, {"pyproject.toml": pyproject})
    envelope = run(tmp_path, repo, sha)

    assert envelope.status == "errored"
    assert reason in envelope.reason
    assert envelope.suites == []
    assert envelope.commit is not None and envelope.commit.sha == sha


PLUGIN_REPORT = """\
import os

import pytest


def test_report(pytestconfig):
    loaded = pytestconfig.pluginmanager.has_plugin("schemathesis")
    pytest.fail(f"PYTEST_ADDOPTS={os.environ.get('PYTEST_ADDOPTS')!r} schemathesis={loaded}")
"""


@pytest.mark.parametrize(("host", "own", "addopts", "loaded"), [
    ("-p no:schemathesis", "", "'-p no:schemathesis'", False),
    ("-p no:schemathesis", "-p no:anyio", "'-p no:schemathesis -p no:anyio'", False),
    ("", "-p no:anyio", "'-p no:anyio'", True),
    ("", "", "None", True),
])
def test_the_hosts_pytest_options_reach_every_suite_before_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, own: str, addopts: str, loaded: bool) -> None:
    """schemathesis is installed beside roofwatch here, so it loads in a suite unless the host keeps it out."""
    monkeypatch.setenv("ROOFWATCH_SUITE_PYTEST_ADDOPTS", host)
    env = f'env = {{ PYTEST_ADDOPTS = "{own}" }}\n' if own else ""
    repo, sha = single_commit_repo(tmp_path, {
        "pyproject.toml": suite_table("correctness", "correctness", "python -m pytest checks -q -p no:cacheprovider", env),
        "checks/test_kernel.py": PLUGIN_REPORT,
    })
    [outcome] = suites_by_name(run(tmp_path, repo, sha))["correctness"].outcomes
    assert f"PYTEST_ADDOPTS={addopts} schemathesis={loaded}" in outcome.message, outcome.message
