"""The correctness suites catch the bugs that used to pass them: strides, double rounding, vanishing terms.

Each plant is a one-line change to a copy of ``kernels/`` in a temp dir, of one of three kinds
kernel engineers really make:

- **a copy-paste stride**: one tensor addressed with another's stride (x's rows with the
  output's, K with Q's batch and head strides, sin with cos's row stride, b with a's, up with
  gate's). Caught by a ``*_layouts`` case, where every tensor has a layout of its own.
- **double rounding**: the output cast to fp16/bf16 before its last scale (the weight, the 1/n
  of a mean, silu before the multiply by up, the per-channel scale, or the scale itself rounded).
  Caught by ``assert_correctly_rounded`` in the ordinary cases: the failure message says "not the
  correctly rounded", which that check only reaches after the dtype bound has passed.
- **a term that vanishes at large sizes**: label smoothing's eps / (V - 1) for eps / V, in the
  gradient and in the loss. Caught by the small vocabulary of ``*_exposes_every_term``.

Where a plant has ``MISSED_BY`` cases, those still pass with it applied: the cases the suite had
before, whose tensors shared one layout or whose vocabularies were large. The same cases pass
on an unmodified copy, so each failure is the plant's doing. Plants in one batch change
different modules and share a tree; the trees run side by side (see ``planted_kernels``).
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.planted_kernels import Plant, assert_caught, finish_cases, planted_tree, start_cases

SUITES = "suites/correctness"
STRIDES, ROUNDING, ROUNDING_2, TERMS = range(4)

PLANTS = [
    # -- copy-paste strides --------------------------------------------------------------------
    Plant(
        name="rmsnorm-x-read-with-the-output-row-stride",
        module="rmsnorm.py",
        find="    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)\n    w = ",
        replace="    x = tl.load(x_ptr + row * y_row_stride + cols, mask=mask, other=0.0).to(tl.float32)\n    w = ",
        case=f"{SUITES}/test_rmsnorm.py::test_rmsnorm_layouts"
             "[x=contiguous,weight=padded,grad_out=transposed,out=padded,dx=contiguous-300]",
        message="elements exceed",
        batch=STRIDES,
    ),
    Plant(
        name="layernorm-dx-written-with-the-x-row-stride",
        module="layernorm.py",
        find="        tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)",
        replace="        tl.store(dx_ptr + row * x_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)",
        case=f"{SUITES}/test_layernorm.py::test_layernorm_layouts"
             "[x=contiguous,weight=padded,bias=strided,grad_out=strided,out=contiguous,dx=padded-300]",
        message="dx",
        batch=STRIDES,
    ),
    Plant(
        name="attention-k-with-q-batch-and-head-strides",
        module="attention.py",
        find="    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh\n",
        replace="    k_base = k_ptr + off_z * stride_qz + off_h * stride_qh\n",
        case=f"{SUITES}/test_attention.py::test_attention_layouts[q=contiguous,k=padded,v=permuted,out=contiguous]",
        message="x torch's",
        batch=STRIDES,
    ),
    Plant(
        name="rotary-sin-with-the-cos-row-stride",
        module="rotary.py",
        find="    sin = tl.load(sin_ptr + pos * sin_seq_stride + dims",
        replace="    sin = tl.load(sin_ptr + pos * cos_seq_stride + dims",
        case=f"{SUITES}/test_rotary.py::test_rotary_layouts"
             "[q=padded,k=permuted,cos=contiguous,sin=padded,q_out=permuted,k_out=contiguous]",
        message="elements exceed",
        batch=STRIDES,
    ),
    Plant(
        name="swiglu-up-with-the-gate-row-stride",
        module="swiglu.py",
        find="    up = tl.load(up_ptr + row * up_row_stride + cols, mask=mask).to(tl.float32)\n    # sigmoid",
        replace="    up = tl.load(up_ptr + row * gate_row_stride + cols, mask=mask).to(tl.float32)\n    # sigmoid",
        case=f"{SUITES}/test_swiglu.py::test_swiglu_layouts"
             "[gate=contiguous,up=padded,out=contiguous,grad_out=strided,grad_gate=contiguous,grad_up=padded]",
        message="out: ",
        batch=STRIDES,
    ),
    Plant(
        name="softmax-out-written-with-the-x-row-stride",
        module="softmax.py",
        find="    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)",
        replace="    tl.store(out_ptr + row * x_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)",
        case=f"{SUITES}/test_softmax.py::test_softmax_layouts[x=contiguous,out=padded-7x300]",
        message="wrote outside out",
        batch=STRIDES,
    ),
    Plant(
        name="matmul-b-with-the-a-row-stride",
        module="matmul.py",
        find="    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn",
        replace="    b_ptrs = b_ptr + offs_k[:, None] * stride_am + offs_bn[None, :] * stride_bn",
        case=f"{SUITES}/test_matmul.py::test_matmul_layouts[a=contiguous,b=padded,out=transposed]",
        message="x torch's",
        batch=STRIDES,
    ),
    Plant(
        name="cross-entropy-grad-written-with-the-logits-row-stride",
        module="cross_entropy.py",
        find="    grad_row = grad_ptr + row * grad_row_stride\n",
        replace="    grad_row = grad_ptr + row * logits_row_stride\n",
        case=f"{SUITES}/test_cross_entropy.py::test_cross_entropy_layouts"
             "[logits=padded,target=strided,grad=padded,loss_rows=padded-37]",
        message="wrote outside grad",
        batch=STRIDES,
    ),
    Plant(
        name="quantize-q-written-with-the-x-row-stride",
        module="quant.py",
        find="    q_row = q_ptr + row * q_row_stride\n",
        replace="    q_row = q_ptr + row * x_row_stride\n",
        case=f"{SUITES}/test_quant.py::test_quantize_layouts[x=contiguous,q=padded,scale=contiguous-1000]",
        message="wrote outside q",
        batch=STRIDES,
    ),
    # -- double rounding -----------------------------------------------------------------------
    Plant(
        # As model files write it: weight * hidden_states.to(input_dtype).
        name="rmsnorm-rounded-before-the-weight",
        module="rmsnorm.py",
        find="    y = x * rstd * w\n",
        replace="    y = (x * rstd).to(y_ptr.dtype.element_ty).to(tl.float32) * w\n",
        case=f"{SUITES}/test_rmsnorm.py::test_rmsnorm[7x1000-fp16-randn-seed0]",
        message="not the correctly rounded fp16 value",
        batch=ROUNDING,
    ),
    Plant(
        # The unfused F.silu(gate) * up.
        name="swiglu-silu-rounded-before-the-multiply-by-up",
        module="swiglu.py",
        find="    out = gate * tl.sigmoid(gate) * up\n",
        replace="    out = (gate * tl.sigmoid(gate)).to(out_ptr.dtype.element_ty).to(tl.float32) * up\n",
        case=f"{SUITES}/test_swiglu.py::test_swiglu[2x3x500-fp16-randn-seed0]",
        message="not the correctly rounded fp16 value",
        batch=ROUNDING,
    ),
    Plant(
        name="cross-entropy-grad-rounded-before-the-mean",
        module="cross_entropy.py",
        find="(grad * scale).to(grad_ptr.dtype.element_ty)",
        replace="(grad.to(grad_ptr.dtype.element_ty).to(tl.float32) * scale).to(grad_ptr.dtype.element_ty)",
        case=f"{SUITES}/test_cross_entropy.py::test_cross_entropy[4x1000-fp16-randn-seed0]",
        message="not the correctly rounded fp16 value",
        batch=ROUNDING,
    ),
    Plant(
        name="softmax-numerator-rounded-before-the-normalization",
        module="softmax.py",
        find="    y = numerator / tl.sum(numerator, axis=0)\n",
        replace="    y = numerator.to(out_ptr.dtype.element_ty).to(tl.float32) / tl.sum(numerator, axis=0)\n",
        case=f"{SUITES}/test_softmax.py::test_softmax[3x1000-fp16-randn-seed0]",
        message="not the correctly rounded fp16 value",
        batch=ROUNDING,
    ),
    Plant(
        name="w8a16-scale-rounded-to-the-activation-dtype",
        module="quant.py",
        find="    scale = tl.load(scale_ptr + offs_wn)\n",
        replace="    scale = tl.load(scale_ptr + offs_wn).to(a_ptr.dtype.element_ty).to(tl.float32)\n",
        case=f"{SUITES}/test_quant.py::test_w8a16_matmul[20x40x100-fp16-randn-seed0]",
        message="not the correctly rounded fp16 value",
        batch=ROUNDING,
    ),
    Plant(
        # bf16, where the interpreter's store truncates: the check holds it to that bound.
        name="w8a16-rounded-before-the-scale",
        module="quant.py",
        find="    out = (acc * scale[None, :]).to(out_ptr.dtype.element_ty)",
        replace="    out = (acc.to(out_ptr.dtype.element_ty).to(tl.float32) * scale[None, :]).to(out_ptr.dtype.element_ty)",
        case=f"{SUITES}/test_quant.py::test_w8a16_matmul[20x40x100-bf16-randn-seed0]",
        message="not the correctly rounded bf16 value",
        batch=ROUNDING_2,
    ),
    # -- terms that vanish at large sizes ------------------------------------------------------
    Plant(
        name="cross-entropy-uniform-weight-eps-over-v-minus-1",
        module="cross_entropy.py",
        find="        uniform = label_smoothing / n_cols\n",
        replace="        uniform = label_smoothing / (n_cols - 1)\n",
        case=f"{SUITES}/test_cross_entropy.py::test_cross_entropy_exposes_every_term[bf16]",
        message="grad",
        batch=ROUNDING_2,
    ),
    Plant(
        name="cross-entropy-smoothing-mean-over-v-minus-1",
        module="cross_entropy.py",
        find="label_smoothing * (tl.sum(x_sum, axis=0) / n_cols)",
        replace="label_smoothing * (tl.sum(x_sum, axis=0) / (n_cols - 1))",
        case=f"{SUITES}/test_cross_entropy.py::test_cross_entropy_exposes_every_term[fp16]",
        message="elements exceed",
        batch=TERMS,
    ),
]

# Cases the suite had before, which still pass with the plant applied.
MISSED_BY: dict[str, str] = {
    "rmsnorm-x-read-with-the-output-row-stride": f"{SUITES}/test_rmsnorm.py::test_rmsnorm[7x1000-fp16-randn-seed0]",
    "layernorm-dx-written-with-the-x-row-stride":
        f"{SUITES}/test_layernorm.py::test_layernorm_strided_rows_stay_in_bounds[1000]",
    "attention-k-with-q-batch-and-head-strides":
        f"{SUITES}/test_attention.py::test_attention_strided_inputs_and_scale",
    "rotary-sin-with-the-cos-row-stride": f"{SUITES}/test_rotary.py::test_rotary_reads_views_of_a_fused_qkv_projection",
    "swiglu-up-with-the-gate-row-stride":
        f"{SUITES}/test_swiglu.py::test_swiglu_reads_halves_of_a_fused_projection_in_place",
    "softmax-out-written-with-the-x-row-stride":
        f"{SUITES}/test_softmax.py::test_softmax_strided_rows_stay_in_bounds[1000]",
    "matmul-b-with-the-a-row-stride": f"{SUITES}/test_matmul.py::test_matmul[17x17x17-fp16-randn-seed0]",
    "cross-entropy-grad-written-with-the-logits-row-stride":
        f"{SUITES}/test_cross_entropy.py::test_cross_entropy[4x1000-fp16-randn-seed0]",
    "quantize-q-written-with-the-x-row-stride":
        f"{SUITES}/test_quant.py::test_quantize_int8_rowwise[5x1000-fp16-randn-seed0]",
    "cross-entropy-uniform-weight-eps-over-v-minus-1":
        f"{SUITES}/test_cross_entropy.py::test_cross_entropy_autograd[fp32-mean-eps0.1]",
    "cross-entropy-smoothing-mean-over-v-minus-1":
        f"{SUITES}/test_cross_entropy.py::test_cross_entropy_autograd[fp32-sum-eps0.1]",
}
BATCHES = sorted({plant.batch for plant in PLANTS})


def _cases(plants: list[Plant]) -> list[str]:
    """Node ids of the plants' cases and of the cases that miss them, each once."""
    cases = [plant.case for plant in plants] + [MISSED_BY[p.name] for p in plants if p.name in MISSED_BY]
    return list(dict.fromkeys(cases))


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, ET.Element]]:
    """Testcases by name for the unmodified copy (``"clean"``) and for each batch's copy."""
    runs: dict[str, tuple[subprocess.Popen[str], Path, int]] = {}
    jobs: list[tuple[str, list[Plant]]] = [("clean", [])]
    jobs += [(f"batch{batch}", [plant for plant in PLANTS if plant.batch == batch]) for batch in BATCHES]
    for name, plants in jobs:
        cases = _cases(PLANTS if name == "clean" else plants)
        root = tmp_path_factory.mktemp(name)
        junit = root / "junit.xml"
        runs[name] = (start_cases(planted_tree(root / "tree", plants), cases, junit), junit, len(cases))
    return {name: finish_cases(*run) for name, run in runs.items()}


def test_plants_in_a_batch_change_different_modules_and_run_different_cases() -> None:
    for batch in BATCHES:
        plants = [plant for plant in PLANTS if plant.batch == batch]
        assert len({plant.module for plant in plants}) == len(plants), f"batch {batch} plants one module twice"
        cases = [plant.case for plant in plants] + [MISSED_BY[p.name] for p in plants if p.name in MISSED_BY]
        assert len(cases) == len(set(cases)), f"batch {batch} runs one case for two purposes"


@pytest.mark.parametrize("case", sorted(set(_cases(PLANTS))), ids=lambda c: c.rpartition("::")[2])
def test_the_cases_pass_on_the_unmodified_kernels(case: str, results: dict[str, dict[str, ET.Element]]) -> None:
    testcase = results["clean"][case.rpartition("::")[2]]
    problems = [child for child in testcase if child.tag in ("failure", "error", "skipped")]
    assert not problems, f"{case} does not pass on the unmodified kernels: {problems[0].get('message')}"


@pytest.mark.parametrize("plant", PLANTS, ids=lambda p: p.name)
def test_the_planted_bug_fails_its_case(plant: Plant, results: dict[str, dict[str, ET.Element]]) -> None:
    assert_caught(plant, results[f"batch{plant.batch}"])


@pytest.mark.parametrize("name", list(MISSED_BY))
def test_the_cases_the_suite_had_before_miss_it(name: str, results: dict[str, dict[str, ET.Element]]) -> None:
    [plant] = [p for p in PLANTS if p.name == name]
    testcase = results[f"batch{plant.batch}"][MISSED_BY[name].rpartition("::")[2]]
    failure = testcase.find("failure")
    assert failure is None, f"{MISSED_BY[name]} now catches {name}; it was the example of a case that cannot"
