"""The cross-entropy and int8 correctness suites catch bugs planted in their kernels.

Each plant changes one line of one file in a temporary copy of ``kernels/`` (with a copy of
``suites/`` beside it, so the copy is what the suite imports) and runs a few selected cases
there in a subprocess under the Triton interpreter. The same cases must pass on an unmodified
copy, so the failure is the plant's doing and not the harness's. The real tree is never
touched, and the real suite runs exactly as before.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Plant:
    """``old`` -> ``new`` in ``file``; ``select`` (a ``-k`` expression) must then fail with ``expect``.

    With ``fails_only`` set, every failing case's id contains it: the bug shows exactly where
    the suite's inputs were designed to expose it.
    """

    file: str
    old: str
    new: str
    suite: str
    select: str
    expect: str
    fails_only: str | None = None


PLANTS = {
    # The running max pinned at 0, so exp(x) is taken unshifted: still exact on randn, equal
    # and masked logits, Inf once logits reach ~1e3.
    "cross_entropy_without_max_subtraction": Plant(
        file="kernels/cross_entropy.py",
        old="m_new = tl.maximum(m, tl.max(x, axis=0))",
        new="m_new = tl.zeros([], tl.float32)",
        suite="suites/correctness/test_cross_entropy.py",
        select="test_cross_entropy and 4x1000 and fp32 and seed0",
        expect="are NaN/Inf",
        fails_only="-large-",
    ),
    # int8 conversion truncates toward zero: 2.7 -> 2 instead of 3.
    "quantize_truncates_instead_of_rounding": Plant(
        file="kernels/quant.py",
        old="q = _round_half_even(tl.div_rn(x, divisor))",
        new="q = tl.div_rn(x, divisor)",
        suite="suites/correctness/test_quant.py",
        select="test_quantize_int8_rowwise and 5x1000 and fp32 and seed0",
        expect="differ from torch's half-to-even rounding",
    ),
}


def _copy_tree(destination: Path, plant: Plant | None) -> None:
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "kernels", destination / "kernels", ignore=ignore)
    shutil.copytree(ROOT / "suites", destination / "suites", ignore=ignore)
    if plant is not None:
        path = destination / plant.file
        source = path.read_text()
        # A plant that no longer matches the kernel must say so, not quietly test nothing.
        assert source.count(plant.old) == 1, f"{plant.file} no longer contains {plant.old!r} exactly once"
        path.write_text(source.replace(plant.old, plant.new))


def _run_cases(tree: Path, suites: list[str], select: str) -> subprocess.CompletedProcess[str]:
    # cwd first on sys.path (python -m) and PYTHONPATH: the copy's kernels shadow the real ones.
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", *suites, "-q", "-rf", "-p", "no:cacheprovider", "-k", select],
        cwd=tree, env=env, capture_output=True, text=True, timeout=600,
    )


def test_unmodified_copy_passes_the_selected_cases(tmp_path: Path) -> None:
    _copy_tree(tmp_path, None)
    done = _run_cases(
        tmp_path,
        sorted({plant.suite for plant in PLANTS.values()}),
        " or ".join(f"({plant.select})" for plant in PLANTS.values()),
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " deselected" in done.stdout


@pytest.mark.parametrize("name", list(PLANTS))
def test_planted_bug_is_caught(tmp_path: Path, name: str) -> None:
    plant = PLANTS[name]
    _copy_tree(tmp_path, plant)
    done = _run_cases(tmp_path, [plant.suite], plant.select)
    assert done.returncode == 1, f"the suite did not fail on {name}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    failures = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert failures, done.stdout[-4000:]
    assert plant.expect in done.stdout, done.stdout[-4000:]
    if plant.fails_only is not None:
        assert all(plant.fails_only in line for line in failures), failures
