"""The elementwise correctness suites catch the bugs they exist for.

Each plant is a one-line change to a copy of ``kernels/`` in a temp dir: an off-by-one mask in
``copy``, the interleaved (GPT-J) pairing in ``rotary``, sigmoid in place of silu in
``swiglu``. The suite files from the repository run against that copy in a subprocess under
the Triton interpreter, and must fail with a message naming the error; the same cases against
an unmodified copy must pass, so a failure is the plant's doing and not the harness's.

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


@dataclass(frozen=True)
class Plant:
    """A bug: ``find`` replaced by ``replace`` once in ``kernels/<module>``."""

    name: str
    module: str
    find: str
    replace: str
    case: str  # node id, relative to the repository root, of a case that must catch it
    message: str  # what the failure must say


PLANTS = [
    Plant(
        name="copy-mask-off-by-one",
        module="copy.py",
        find="        mask = offsets < n\n        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)",
        replace="        mask = offsets <= n\n        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)",
        case="suites/correctness/test_copy.py::test_copy[7-fp32-randn-seed0]",
        message="wrote past the end of out",
    ),
    Plant(
        name="rotary-interleaved-pairs",
        module="rotary.py",
        # Pair dimension 2i with 2i + 1 (GPT-J) instead of i with i + head_dim / 2 (GPT-NeoX).
        find="""    x1_ptrs = x_ptr + heads[:, None] * x_head_stride + dims[None, :]
    out1_ptrs = out_ptr + heads[:, None] * out_head_stride + dims[None, :]
    x1 = tl.load(x1_ptrs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x1_ptrs + HALF, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    tl.store(out1_ptrs, out1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out1_ptrs + HALF, out2.to(out_ptr.dtype.element_ty), mask=mask)""",
        replace="""    x1_ptrs = x_ptr + heads[:, None] * x_head_stride + 2 * dims[None, :]
    out1_ptrs = out_ptr + heads[:, None] * out_head_stride + 2 * dims[None, :]
    x1 = tl.load(x1_ptrs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x1_ptrs + 1, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    tl.store(out1_ptrs, out1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out1_ptrs + 1, out2.to(out_ptr.dtype.element_ty), mask=mask)""",
        case="suites/correctness/test_rotary.py::test_rotary[b2s3q4k4d64-fp32-randn-seed0]",
        message="elements exceed",
    ),
    Plant(
        name="swiglu-sigmoid-for-silu",
        module="swiglu.py",
        find="    out = gate * tl.sigmoid(gate) * up\n",
        replace="    out = tl.sigmoid(gate) * up\n",
        case="suites/correctness/test_swiglu.py::test_swiglu[2x3x500-fp32-randn-seed0]",
        message="elements exceed",
    ),
]


def _kernels_copy(dest: Path, plants: list[Plant]) -> Path:
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


def _run_cases(workdir: Path, junit: Path) -> dict[str, ET.Element]:
    """Run every plant's case against the ``kernels`` in ``workdir``; testcases by name."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(workdir)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *(str(ROOT / p.case) for p in PLANTS), f"--rootdir={ROOT}",
         "--import-mode=append", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=600,
    )
    assert junit.exists(), f"pytest wrote no report (exit {done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    cases = {case.get("name", ""): case for case in ET.parse(junit).iter("testcase")}
    assert len(cases) == len(PLANTS), f"expected {len(PLANTS)} cases, ran {sorted(cases)}:\n{done.stdout[-4000:]}"
    return cases


@pytest.fixture(scope="module")
def clean_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    root = tmp_path_factory.mktemp("clean")
    return _run_cases(_kernels_copy(root / "tree", []), root / "junit.xml")


@pytest.fixture(scope="module")
def planted_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    # Each plant's case imports only the module its plant changed, so all three can share
    # one tree and one interpreter start-up.
    root = tmp_path_factory.mktemp("planted")
    return _run_cases(_kernels_copy(root / "tree", PLANTS), root / "junit.xml")


def _case_name(plant: Plant) -> str:
    return plant.case.rpartition("::")[2]


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
