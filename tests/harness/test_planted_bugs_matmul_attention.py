"""The matmul and attention correctness suites catch the bugs they exist for.

Each plant is a small change to one file of a copy of ``kernels/`` in a temp dir: the matmul's
K-loop mask off by one (the last element of a partial K tile dropped), the attention's running
max without the rescale of the accumulator (``acc *= alpha``), and a causal mask that hides the
diagonal (``<`` where ``<=`` belongs). The suite files from the repository run against each copy
in a subprocess under the Triton interpreter and must fail with a message naming the error;
the same cases against an unmodified copy must pass, so a failure is the plant's doing.

The machinery (and how the copy wins the import) is in ``planted_kernels``. Every copy changes one file only, so each tree gets its own process; they run
side by side, as each spends most of its time importing torch and Triton.
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.planted_kernels import Plant, assert_caught, assert_passes, finish_cases, planted_tree, start_cases

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



@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, ET.Element]]:
    """Testcases by name for the unmodified copy (``"clean"``) and for each plant's copy."""
    runs: dict[str, tuple[subprocess.Popen[str], Path, int]] = {}
    jobs: list[tuple[str, list[Plant], list[str]]] = [("clean", [], [p.case for p in PLANTS])]
    jobs += [(plant.name, [plant], [plant.case]) for plant in PLANTS]
    for name, plants, cases in jobs:
        root = tmp_path_factory.mktemp(name)
        junit = root / "junit.xml"
        runs[name] = (start_cases(planted_tree(root / "tree", plants), cases, junit), junit, len(cases))
    return {name: finish_cases(*run) for name, run in runs.items()}


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_unmodified_kernel_passes(plant: Plant, results: dict[str, dict[str, ET.Element]]) -> None:
    assert_passes(plant, results["clean"])


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_planted_bug_fails_the_suite(plant: Plant, results: dict[str, dict[str, ET.Element]]) -> None:
    assert_caught(plant, results[plant.name])
