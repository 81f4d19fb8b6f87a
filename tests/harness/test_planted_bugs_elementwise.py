"""The elementwise correctness suites catch the bugs they exist for.

Each plant is a one-line change to a copy of ``kernels/`` in a temp dir: an off-by-one mask in
``copy``, the interleaved (GPT-J) pairing in ``rotary``, sigmoid in place of silu in
``swiglu``. The suite files from the repository run against that copy in a subprocess under
the Triton interpreter, and must fail with a message naming the error; the same cases against
an unmodified copy must pass, so a failure is the plant's doing and not the harness's.

The machinery is in ``planted_kernels``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from support.planted_kernels import Plant, assert_caught, assert_passes, planted_tree, run_cases

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



@pytest.fixture(scope="module")
def clean_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    root = tmp_path_factory.mktemp("clean")
    return run_cases(planted_tree(root / "tree", []), root / "junit.xml", PLANTS)


@pytest.fixture(scope="module")
def planted_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ET.Element]:
    # Each plant's case imports only the module its plant changed, so all three can share
    # one tree and one interpreter start-up.
    root = tmp_path_factory.mktemp("planted")
    return run_cases(planted_tree(root / "tree", PLANTS), root / "junit.xml", PLANTS)


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_unmodified_kernel_passes(plant: Plant, clean_results: dict[str, ET.Element]) -> None:
    assert_passes(plant, clean_results)


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_planted_bug_fails_the_suite(plant: Plant, planted_results: dict[str, ET.Element]) -> None:
    assert_caught(plant, planted_results)
