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

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RMSNORM_CASES = "suites/correctness/test_rmsnorm.py"
LAYERNORM_CASES = "suites/correctness/test_layernorm.py"


@dataclass(frozen=True)
class Plant:
    """A bug: ``find`` replaced by ``replace`` once in ``kernels/<module>``."""

    name: str
    module: str
    find: str
    replace: str
    case: str  # node id, relative to the repository root, of a case that must catch it
    message: str  # what the failure must say
    batch: int  # plants of one batch share a tree and a subprocess


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


def _tree(dest: Path, plants: list[Plant]) -> Path:
    """A copy of ``kernels/`` under ``dest`` with every plant in ``plants`` applied."""
    package = dest / "kernels"
    shutil.copytree(ROOT / "kernels", package, ignore=shutil.ignore_patterns("__pycache__"))
    for plant in plants:
        path = package / plant.module
        source = path.read_text()
        # A plant that no longer matches the kernel would make the suite pass for the wrong
        # reason; say so instead.
        assert source.count(plant.find) == 1, f"plant {plant.name!r} no longer matches kernels/{plant.module}"
        path.write_text(source.replace(plant.find, plant.replace))
    return dest


def _run_cases(workdir: Path, junit: Path, plants: list[Plant]) -> dict[str, ET.Element]:
    """Run ``plants``' cases against the ``kernels`` in ``workdir``; testcases by name."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(workdir)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *(str(ROOT / p.case) for p in plants), f"--rootdir={ROOT}",
         "--import-mode=append", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    assert junit.exists(), f"pytest wrote no report (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    cases = {case.get("name", ""): case for case in ET.parse(junit).iter("testcase")}
    assert len(cases) == len(plants), f"expected {len(plants)} cases, ran {sorted(cases)}:\n{done.stdout[-4000:]}"
    return cases


@pytest.fixture(scope="module")
def clean_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    root = tmp_path_factory.mktemp("clean")
    return _run_cases(_tree(root / "tree", []), root / "junit.xml", PLANTS)


@pytest.fixture(scope="module")
def planted_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    results: dict[str, ET.Element] = {}
    for batch in BATCHES:
        plants = [plant for plant in PLANTS if plant.batch == batch]
        root = tmp_path_factory.mktemp(f"planted{batch}")
        results.update(_run_cases(_tree(root / "tree", plants), root / "junit.xml", plants))
    return results


def _case_name(plant: Plant) -> str:
    return plant.case.rpartition("::")[2]


def test_plants_in_a_batch_have_cases_of_their_own() -> None:
    for batch in BATCHES:
        names = [_case_name(plant) for plant in PLANTS if plant.batch == batch]
        assert len(names) == len(set(names)), f"batch {batch} runs one case for two plants"


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_unmodified_kernel_passes(plant: Plant, clean_results: dict[str, ET.Element]) -> None:
    case = clean_results[_case_name(plant)]
    problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
    assert not problems, f"{plant.case} does not pass on the unmodified kernels: {problems[0].get('message')}"


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_planted_bug_fails_the_suite(plant: Plant, planted_results: dict[str, ET.Element]) -> None:
    failure = planted_results[_case_name(plant)].find("failure")
    assert failure is not None, f"the suite missed the planted bug {plant.name!r}: {plant.case} passed"
    report = f"{failure.get('message', '')}\n{failure.text or ''}"
    assert plant.message in report, f"{plant.case} failed, but not with {plant.message!r}:\n{report[-2000:]}"
