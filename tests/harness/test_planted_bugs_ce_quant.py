"""The cross-entropy and int8 correctness suites catch bugs planted in their kernels.

Each plant changes one line of one file in a temporary copy of ``kernels/`` (with a copy of
``suites/`` beside it, so the copy is what the suite imports) and runs a few selected cases
there in a subprocess under the Triton interpreter. The same cases must pass on an unmodified
copy, so the failure is the plant's doing and not the harness's. The real tree is never
touched, and the real suite runs exactly as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.planted_kernels import SelectedPlant, planted_tree, run_selected

PLANTS: dict[str, SelectedPlant] = {
    # The running max pinned at 0, so exp(x) is taken unshifted: still exact on randn, equal
    # and masked logits, Inf once logits reach ~1e3.
    "cross_entropy_without_max_subtraction": SelectedPlant(
        module="cross_entropy.py",
        find="m_new = tl.maximum(m, tl.max(x, axis=0))",
        replace="m_new = tl.zeros([], tl.float32)",
        suite="suites/correctness/test_cross_entropy.py",
        select="test_cross_entropy and 4x1000 and fp32 and seed0",
        message="are NaN/Inf",
        fails_only="-large-",
    ),
    # int8 conversion truncates toward zero: 2.7 -> 2 instead of 3.
    "quantize_truncates_instead_of_rounding": SelectedPlant(
        module="quant.py",
        find="q = _round_half_even(tl.div_rn(x, divisor))",
        replace="q = tl.div_rn(x, divisor)",
        suite="suites/correctness/test_quant.py",
        select="test_quantize_int8_rowwise and 5x1000 and fp32 and seed0",
        message="differ from torch's half-to-even rounding",
    ),
}


def test_unmodified_copy_passes_the_selected_cases(tmp_path: Path) -> None:
    planted_tree(tmp_path, [], with_suites=True)
    done = run_selected(
        tmp_path,
        sorted({plant.suite for plant in PLANTS.values()}),
        " or ".join(f"({plant.select})" for plant in PLANTS.values()),
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " deselected" in done.stdout


@pytest.mark.parametrize("name", list(PLANTS))
def test_planted_bug_is_caught(tmp_path: Path, name: str) -> None:
    plant = PLANTS[name]
    planted_tree(tmp_path, [plant], with_suites=True)
    done = run_selected(tmp_path, [plant.suite], plant.select)
    assert done.returncode == 1, f"the suite did not fail on {name}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    failures = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert failures, done.stdout[-4000:]
    assert plant.message in done.stdout, done.stdout[-4000:]
    if plant.fails_only is not None:
        assert all(plant.fails_only in line for line in failures), failures
