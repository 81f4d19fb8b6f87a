"""roofwatch's own kernel correctness suite runs in CI through the Triton interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.tests_support import pytest_env

ROOT = Path(__file__).resolve().parents[2]


# Three parts of about the same interpreted run time (20 s each on an idle core), so the
# test workers share the suite's minute.
PARTS = {
    "attention-copy-swiglu": ["test_attention.py", "test_copy.py", "test_swiglu.py", "test_large_index.py"],
    "layernorm-quant-cross_entropy": ["test_layernorm.py", "test_quant.py", "test_cross_entropy.py"],
    "rmsnorm-rotary-softmax-matmul": ["test_rmsnorm.py", "test_rotary.py", "test_softmax.py", "test_matmul.py"],
}


def test_the_parts_cover_the_whole_suite() -> None:
    files = sorted(path.name for path in (ROOT / "suites" / "correctness").glob("test_*.py"))
    assert sorted(name for part in PARTS.values() for name in part) == files


@pytest.mark.parametrize("part", PARTS)
def test_correctness_suite_passes_under_the_interpreter(tmp_path: Path, part: str) -> None:
    junit = tmp_path / "junit.xml"
    env = pytest_env(TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *(f"suites/correctness/{name}" for name in PARTS[part]), "-q",
         "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    text = junit.read_text()
    # The measured error of each case is reported for drift tracking.
    assert text.count('name="max_abs_err"') >= 100
