"""The matmul and attention correctness suites catch the bugs they exist for.

Each plant is a small change to one file of a copy of ``kernels/`` in a temp dir: the matmul's
K-loop mask off by one (the last element of a partial K tile dropped), the attention's running
max without the rescale of the accumulator (``acc *= alpha``), and a causal mask that hides the
diagonal (``<`` where ``<=`` belongs). The suite files from the repository run against each copy
in a subprocess under the Triton interpreter and must fail with a message naming the error;
the same cases against an unmodified copy must pass, so a failure is the plant's doing.

How the copy wins the import (as in ``test_planted_bugs_elementwise``): pytest runs from the
temp dir (``python -m`` puts the working directory first on ``sys.path``) with
``--import-mode=append``, so the repository root it adds for the ``suites`` package goes last,
and the editable install's finder comes after ``sys.path``. The real suite's invocation is
untouched. Every copy changes one file only, so each tree gets its own process; they run
side by side, as each spends most of its time importing torch and Triton.
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
        name="matmul-k-mask-off-by-one",
        module="matmul.py",
        find="""            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)""",
        replace="""            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining - 1, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining - 1, other=0.0)""",
        # K = 17 ends inside the first 32-wide K tile; a K that is a multiple of the tile
        # never takes the masked path and would not notice.
        case="suites/correctness/test_matmul.py::test_matmul[17x17x17-fp16-randn-seed0]",
        message="x torch's",
    ),
    Plant(
        name="attention-no-accumulator-rescale",
        module="attention.py",
        find="        acc = acc * alpha[:, None]\n",
        replace="",
        # Seven key blocks: the running max grows after the first, and every un-rescaled
        # contribution is then weighted too heavily.
        case="suites/correctness/test_attention.py::test_attention[1x1x100x128-full-fp16-randn-seed0]",
        message="x torch's",
    ),
    Plant(
        name="attention-causal-mask-hides-diagonal",
        module="attention.py",
        find="visible = visible & (offs_m[:, None] >= cols[None, :])",
        replace="visible = visible & (offs_m[:, None] > cols[None, :])",
        # Query 0 then sees no key at all: its softmax is 0 / 0.
        case="suites/correctness/test_attention.py::test_attention[1x1x1x64-causal-fp16-randn-seed0]",
        message="are NaN/Inf",
    ),
]


def _kernels_copy(dest: Path, plant: Plant | None) -> Path:
    """A copy of ``kernels/`` under ``dest``, with ``plant`` applied when given."""
    package = dest / "kernels"
    shutil.copytree(ROOT / "kernels", package, ignore=shutil.ignore_patterns("__pycache__"))
    if plant is not None:
        path = package / plant.module
        source = path.read_text()
        # A plant that no longer matches the kernel would make the suite pass for the wrong
        # reason; say so instead.
        assert source.count(plant.find) == 1, f"plant {plant.name!r} no longer matches kernels/{plant.module}"
        path.write_text(source.replace(plant.find, plant.replace))
    return dest


def _start(workdir: Path, cases: list[str], junit: Path) -> subprocess.Popen[str]:
    """Start pytest on ``cases`` against the ``kernels`` in ``workdir``."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(workdir)}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *(str(ROOT / case) for case in cases), f"--rootdir={ROOT}",
         "--import-mode=append", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def _finish(process: subprocess.Popen[str], junit: Path, expected: int) -> dict[str, ET.Element]:
    """Wait for ``process``; its junit testcases by name."""
    try:
        output, _ = process.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"pytest did not finish in 600 s:\n{output[-4000:]}") from None
    assert junit.exists(), f"pytest wrote no report (exit {process.returncode}):\n{output[-4000:]}"
    cases = {case.get("name", ""): case for case in ET.parse(junit).iter("testcase")}
    assert len(cases) == expected, f"expected {expected} cases, ran {sorted(cases)}:\n{output[-4000:]}"
    return cases


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, ET.Element]]:
    """Testcases by name for the unmodified copy (``"clean"``) and for each plant's copy."""
    runs: dict[str, tuple[subprocess.Popen[str], Path, int]] = {}
    jobs: list[tuple[str, Plant | None, list[str]]] = [("clean", None, [p.case for p in PLANTS])]
    jobs += [(plant.name, plant, [plant.case]) for plant in PLANTS]
    for name, plant, cases in jobs:
        root = tmp_path_factory.mktemp(name)
        junit = root / "junit.xml"
        runs[name] = (_start(_kernels_copy(root / "tree", plant), cases, junit), junit, len(cases))
    return {name: _finish(*run) for name, run in runs.items()}


def _case_name(plant: Plant) -> str:
    return plant.case.rpartition("::")[2]


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_unmodified_kernel_passes(plant: Plant, results: dict[str, dict[str, ET.Element]]) -> None:
    case = results["clean"][_case_name(plant)]
    problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
    assert not problems, f"{plant.case} does not pass on the unmodified kernels: {problems[0].get('message')}"


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_planted_bug_fails_the_suite(plant: Plant, results: dict[str, dict[str, ET.Element]]) -> None:
    failure = results[plant.name][_case_name(plant)].find("failure")
    assert failure is not None, f"the suite missed the planted bug {plant.name!r}: {plant.case} passed"
    report = f"{failure.get('message', '')}\n{failure.text or ''}"
    assert plant.message in report, f"{plant.case} failed, but not with {plant.message!r}:\n{report[-2000:]}"
