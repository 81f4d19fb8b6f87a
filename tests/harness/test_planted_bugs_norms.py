"""The RMSNorm and LayerNorm correctness suites catch the bugs they exist for.

Each plant is a small change to a copy of ``kernels/`` in a temp dir: RMSNorm's mean square
not divided by n, eps dropped, an off-by-one mask; LayerNorm's variance as E[x**2] - E[x]**2,
the mean(w * g) term missing from dx, dweight not accumulated across a program's rows. The
suite files from the repository run against that copy in a subprocess under the Triton
interpreter, and must fail with a message naming the error; the same cases against an
unmodified copy must pass, so a failure is the plant's doing and not the harness's.

A norm's suite exercises a fused kernel pair (forward and backward) on short rows and a
streamed pair on long rows, so plants sharing a tree sit in different pairs, and each plant's
case runs only the pair its plant changed. Plants that would meet in one case go into a
second tree (``batch``), each tree one interpreter start-up.

How the copy wins the import: pytest runs from the temp dir (``python -m`` puts the working
directory first on ``sys.path``) with ``--import-mode=append``, so the repository root it adds
for the ``suites`` package goes last instead of first, and the editable install's finder
comes after ``sys.path``. The real suite's invocation is untouched.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from support.planted_kernels import Plant, assert_caught, assert_passes, case_name, planted_tree, run_cases

RMSNORM_CASES = "suites/correctness/test_rmsnorm.py"
LAYERNORM_CASES = "suites/correctness/test_layernorm.py"


PLANTS = [
    Plant(
        name="rmsnorm-mean-square-not-divided-by-n",
        module="rmsnorm.py",
        find="    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)\n",
        replace="    rstd = tl.rsqrt(tl.sum(x * x, axis=0) + eps)\n",
        case=f"{RMSNORM_CASES}::test_rmsnorm[7x1000-fp32-randn-seed0]",
        message="elements exceed",
        batch=0,
    ),
    Plant(
        # All-zero rows then divide 0 by sqrt(0).
        name="rmsnorm-eps-dropped",
        module="rmsnorm.py",
        find="    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)\n",
        replace="    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols)\n",
        case=f"{RMSNORM_CASES}::test_rmsnorm_long_row[fp32-special]",
        message="output elements are NaN/Inf",
        batch=0,
    ),
    Plant(
        # Each row's sum of squares takes in the next row's first element; only rows that are
        # not a power of two long (and views inside wider buffers) show it.
        name="rmsnorm-mask-off-by-one",
        module="rmsnorm.py",
        find="    mask = cols < n_cols\n    # Zero padding adds nothing to the sum of squares.\n",
        replace="    mask = cols <= n_cols\n    # Zero padding adds nothing to the sum of squares.\n",
        case=f"{RMSNORM_CASES}::test_rmsnorm_strided_rows_stay_in_bounds[1000]",
        message="elements exceed",
        batch=1,
    ),
    Plant(
        # Rows near 1e3 +- 1: E[x**2] and E[x]**2 agree in their first 6 digits.
        name="layernorm-one-pass-variance",
        module="layernorm.py",
        find="        sum_sq += xc * xc\n    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)\n",
        replace="        sum_sq += x * x\n    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols - mean * mean + eps)\n",
        case=f"{LAYERNORM_CASES}::test_layernorm_long_row[fp32-offset]",
        message="y: max abs err",
        batch=0,
    ),
    Plant(
        name="layernorm-dx-without-mean-term",
        module="layernorm.py",
        find="        dx = rstd * (wg - c_one - xhat * c_xhat)\n",
        replace="        dx = rstd * (wg - xhat * c_xhat)\n",
        case=f"{LAYERNORM_CASES}::test_layernorm[7x1000-fp32-randn-seed0]",
        message="dx: max abs err",
        batch=0,
    ),
    Plant(
        # Each program's partial keeps only its last row.
        name="layernorm-dweight-not-accumulated",
        module="layernorm.py",
        find="            tl.store(dw_row + cols, dw + g * xhat, mask=mask)\n",
        replace="            tl.store(dw_row + cols, g * xhat, mask=mask)\n",
        # 9000: the suite's long row, past the single-block cap.
        case=f"{LAYERNORM_CASES}::test_layernorm_strided_rows_stay_in_bounds[9000]",
        message="dw: max abs err",
        batch=1,
    ),
]
BATCHES = sorted({plant.batch for plant in PLANTS})



@pytest.fixture(scope="module")
def clean_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    root = tmp_path_factory.mktemp("clean")
    return run_cases(planted_tree(root / "tree", []), root / "junit.xml", PLANTS)


@pytest.fixture(scope="module")
def planted_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    results: dict[str, ET.Element] = {}
    for batch in BATCHES:
        plants = [plant for plant in PLANTS if plant.batch == batch]
        root = tmp_path_factory.mktemp(f"planted{batch}")
        results.update(run_cases(planted_tree(root / "tree", plants), root / "junit.xml", plants))
    return results


def test_plants_in_a_batch_have_cases_of_their_own() -> None:
    for batch in BATCHES:
        names = [case_name(plant) for plant in PLANTS if plant.batch == batch]
        assert len(names) == len(set(names)), f"batch {batch} runs one case for two plants"


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_unmodified_kernel_passes(plant: Plant, clean_results: dict[str, ET.Element]) -> None:
    assert_passes(plant, clean_results)


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_planted_bug_fails_the_suite(plant: Plant, planted_results: dict[str, ET.Element]) -> None:
    assert_caught(plant, planted_results)
