"""``bench.gpu_session``: the plan, the dry run and the deadline, on a CPU."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

from bench.gpu_session import STEPS, commands

ROOT = Path(__file__).resolve().parents[2]


def test_every_step_has_a_command_and_the_steps_fit_two_device_calls(tmp_path: Path) -> None:
    for step in STEPS:
        assert commands(step.name, tmp_path, 150.0), step.name
        assert step.expected_s < step.timeout_s
    # The first call (everything but the worker) and the second (the worker) each fit in 7 minutes.
    first = sum(s.expected_s for s in STEPS if s.name != "worker-e2e")
    assert first <= 420 and sum(s.expected_s for s in STEPS if s.name in ("preflight", "worker-e2e")) <= 420


def test_dry_run_prints_the_plan_and_runs_the_preflight_only(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.gpu_session", "--dry-run", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for step in STEPS[1:]:
        assert f"] {step.name}: planned" in done.stdout
    assert "bench.gpu_ab_check --rounds 8 --budget-s" in done.stdout
    assert "| preflight | 10 |" in (tmp_path / "session.md").read_text()
    with tarfile.open(tmp_path / "logs.tar.gz") as tar:
        log = tar.extractfile("raw/preflight.log")
        assert log is not None and b"import roofwatch.workers.worker: ok" in log.read()


def test_a_step_that_no_longer_fits_the_deadline_is_skipped_and_fails_the_session(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "bench.gpu_session", "--steps", "norms,worker-e2e",
                           "--deadline-s", "20", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    text = (tmp_path / "session.md").read_text()
    assert "| norms | 75 | – | skipped: 20 s left of the deadline |" in text
    assert "| worker-e2e | 130 | – | skipped" in text
