"""roofwatch.layouts: the same tensors in layouts of their own, and the stride bugs that shows.

The helper's own properties first (values kept, strides unlike a row-major tensor's and unlike
each other's, writes outside a view detected, every tensor through every layout), then the
example kernel (``example_kernel.smooth_scale``): right in every layout it takes, refusing the
output layouts it cannot write, and its planted stride bug passing the one case in which all
tensors are row-major and failing the others.
"""

from __future__ import annotations

import math

import pytest
import torch
from support.example_kernel import INTERPRETED, STRIDE, smooth_scale, smooth_scale_reference

from roofwatch.layouts import LAYOUTS, layout_cases, place
from roofwatch.tolerances import assert_close, tolerance_for


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return torch.empty(shape).stride()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4, 6)], ids=lambda s: "x".join(map(str, s)))
def test_place_keeps_the_values_in_the_layout(layout: str, shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    placed = place(x, layout, slot=1, fill=3.0)

    assert torch.equal(placed.tensor, x)
    strides = placed.tensor.stride()
    if layout == "contiguous":
        assert strides == _contiguous_strides(shape) and placed.tensor.storage_offset() == 0
        return
    # A view never starts at its buffer's first element, so a read before it meets the canary.
    assert placed.tensor.storage_offset() > 0
    if layout in ("transposed", "strided"):
        assert strides[-1] != 1, "the last dimension must not be unit-stride"
    else:
        assert strides[-1] == 1
        # Every stride but the unit one of the last dimension differs from a row-major tensor's.
        assert all(a != b for a, b in zip(strides[:-1], _contiguous_strides(shape)[:-1]))
    if layout == "permuted" and len(shape) >= 3:
        # Leading dimensions stored in reverse: the first is the innermost of them.
        assert strides[0] < strides[1] < strides[2] and strides[-1] == 1
    placed.assert_outside_intact("x")


def test_tensors_at_different_slots_get_different_strides() -> None:
    x = torch.randn((4, 6))
    for layout in LAYOUTS[1:]:
        strides = {place(x, layout, slot=slot).tensor.stride() for slot in range(4)}
        assert len(strides) == 4, f"{layout}: slots share strides {strides}"


def test_a_write_outside_the_view_is_reported() -> None:
    out = place(torch.full((3, 5), float("nan")), "padded", slot=0)
    out.assert_outside_intact("out")
    out.buffer[out.tensor.storage_offset() + 5] = 1.0  # the first padding element after row 0

    with pytest.raises(AssertionError, match=r"wrote outside out \(padded, strides \(6, 1\)\): 1 of the"):
        out.assert_outside_intact("out")


@pytest.mark.parametrize("shape", [(0, 5), (4, 0)], ids=lambda s: "x".join(map(str, s)))
def test_empty_tensors_are_placed(shape: tuple[int, int]) -> None:
    for layout in LAYOUTS:
        assert place(torch.empty(shape), layout).tensor.shape == shape


LAYOUT_TABLES: list[dict[str, list[str]]] = [
    {"x": ["contiguous", "padded", "transposed", "strided"], "weight": ["contiguous", "padded", "strided"],
     "out": ["contiguous", "padded"]},
    {"q": list(LAYOUTS), "k": list(LAYOUTS), "v": list(LAYOUTS), "out": ["contiguous", "padded", "permuted"]},
    {"only": ["padded"]},
]


@pytest.mark.parametrize("table", LAYOUT_TABLES, ids=lambda t: "-".join(t))
def test_layout_cases_take_every_layout_of_every_tensor(table: dict[str, list[str]]) -> None:
    cases = layout_cases(table)

    assert len(cases) == max(len(options) for options in table.values())
    for name, options in table.items():
        assert {case.layout(name) for case in cases} == set(options), name
    assert len({str(case) for case in cases}) == len(cases), "test ids must be unique"


def test_tensors_with_the_same_choices_never_share_a_layout() -> None:
    # q, k and v may each take any layout: in every case each takes a different one, so a
    # kernel reading k with q's strides meets a k laid out unlike q every time.
    for case in layout_cases({"q": list(LAYOUTS), "k": list(LAYOUTS), "v": list(LAYOUTS)}):
        assert len({case.layout(name) for name in ("q", "k", "v")}) == 3, str(case)


def test_layout_cases_refuse_unknown_layouts() -> None:
    with pytest.raises(ValueError, match="unknown layouts"):
        layout_cases({"x": ["contiguous", "sideways"]})
    with pytest.raises(ValueError, match="at least one layout"):
        layout_cases({"x": []})


# The example kernel takes any x and weight, and refuses an output whose last dimension is not
# unit-stride (it would write it as if it were).
EXAMPLE_LAYOUTS = {
    "x": ["contiguous", "padded", "transposed", "strided"],
    "weight": ["contiguous", "padded", "strided"],
    "out": ["contiguous", "padded"],
}
EXAMPLE_REFUSED_OUT = ["transposed", "strided"]
EPS = 0.1


def _run_example(case_layouts: dict[str, str], bug: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    [case] = [c for c in layout_cases({name: [layout] for name, layout in case_layouts.items()})]
    gen = torch.Generator().manual_seed(0)
    device = "cpu" if INTERPRETED else "cuda"
    x, weight = torch.randn((5, 37), generator=gen).to(device), torch.randn(37, generator=gen).to(device)
    x_in, w_in = case.input("x", x), case.input("weight", weight)
    out = case.output("out", x)
    smooth_scale(x_in.tensor, w_in.tensor, EPS, out=out.tensor, bug=bug)
    out.assert_outside_intact("out")
    return out.tensor, smooth_scale_reference(x, weight, EPS)


@pytest.mark.parametrize("case", layout_cases(EXAMPLE_LAYOUTS), ids=str)
def test_the_example_kernel_is_right_in_every_layout(case) -> None:  # type: ignore[no-untyped-def]
    out, expected = _run_example(dict(case.layouts))
    assert_close(out, expected, tolerance_for(torch.float32))


@pytest.mark.parametrize("layout", EXAMPLE_REFUSED_OUT)
def test_the_example_kernel_refuses_outputs_it_cannot_write(layout: str) -> None:
    out = place(torch.full((5, 37), math.nan), layout)
    with pytest.raises(ValueError, match="out must be contiguous along its last dimension"):
        smooth_scale(torch.randn((5, 37)), torch.randn(37), EPS, out=out.tensor)
    out.assert_outside_intact("out")


def test_layout_cases_catch_a_stride_bug_that_row_major_tensors_hide() -> None:
    # x addressed with the output's row stride: right when both are row-major, as in a suite
    # whose tensors all share one layout; wrong (or reading outside x) once they differ.
    all_row_major = {"x": "contiguous", "weight": "contiguous", "out": "contiguous"}
    out, expected = _run_example(all_row_major, bug=STRIDE)
    assert_close(out, expected, tolerance_for(torch.float32))

    caught = []
    for case in layout_cases(EXAMPLE_LAYOUTS):
        try:
            out, expected = _run_example(dict(case.layouts), bug=STRIDE)
            assert_close(out, expected, tolerance_for(torch.float32))
        except AssertionError:
            caught.append(str(case))
    # Every case in which x's row stride, as the kernel sees it, differs from the output's. A
    # transposed x is copied to row-major first, where the output is row-major too: that
    # case cannot tell, the other two can.
    assert caught == ["x=padded,weight=strided,out=padded", "x=strided,weight=padded,out=padded"], caught
