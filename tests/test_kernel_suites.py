"""roofwatch's own kernel correctness suite runs in CI through the Triton interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests_support import pytest_env

ROOT = Path(__file__).resolve().parents[1]


def test_correctness_suite_passes_under_the_interpreter(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    env = pytest_env(TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/correctness", "-q", "-p", "no:cacheprovider",
         f"--junitxml={junit}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    text = junit.read_text()
    # The measured error of each case is reported for drift tracking.
    assert text.count('name="max_abs_err"') >= 100
