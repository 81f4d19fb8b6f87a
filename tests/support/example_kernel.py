"""A small Triton kernel with a bug of each class roofwatch.testing's helpers exist for.

``smooth_scale(x, weight, eps)`` computes ``y = (1 - eps) * x * weight + eps / cols`` row by row
(a weight and a uniform term mixed in, as label smoothing mixes one in), in fp32, rounded once to
the storage dtype. ``bug`` selects one planted line:

- ``STRIDE``: x's rows addressed with y's row stride (a copy-paste of the wrong stride); right
  whenever x and y share a layout.
- ``DOUBLE_ROUNDING``: ``(1 - eps) * x`` rounded to the storage dtype before the weight multiply;
  within every per-dtype tolerance.
- ``VANISHING_TERM``: ``eps / (cols - 1)`` for the uniform term; off by ``eps / cols**2``, under
  any tolerance once rows are long.

Without a GPU the kernel runs in the Triton interpreter. ``triton.jit`` decides that when it
decorates a kernel, from ``TRITON_INTERPRET``; the variable is set only around the decoration,
so it reaches neither the other tests of this process nor the processes they start.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

__all__ = ["DOUBLE_ROUNDING", "INTERPRETED", "NO_BUG", "STRIDE", "VANISHING_TERM", "smooth_scale", "smooth_scale_kernel",
           "smooth_scale_reference"]

NO_BUG, STRIDE, DOUBLE_ROUNDING, VANISHING_TERM = range(4)
INTERPRETED = not torch.cuda.is_available()

_saved = os.environ.get("TRITON_INTERPRET")
if INTERPRETED:
    os.environ["TRITON_INTERPRET"] = "1"
try:

    @triton.jit
    def smooth_scale_kernel(
        x_ptr,
        w_ptr,
        y_ptr,
        x_row_stride,
        w_stride,
        y_row_stride,
        n_cols,
        eps,
        BUG: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        if BUG == 1:  # STRIDE
            x_row = x_ptr + row * y_row_stride
        else:
            x_row = x_ptr + row * x_row_stride
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols * w_stride, mask=mask, other=0.0).to(tl.float32)
        kept = (1.0 - eps) * x
        if BUG == 2:  # DOUBLE_ROUNDING
            kept = kept.to(y_ptr.dtype.element_ty).to(tl.float32)
        if BUG == 3:  # VANISHING_TERM
            uniform = eps / (n_cols - 1)
        else:
            uniform = eps / n_cols
        y = kept * w + uniform
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)

finally:
    if _saved is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = _saved


def smooth_scale(
    x: torch.Tensor, weight: torch.Tensor, eps: float, out: torch.Tensor | None = None, bug: int = NO_BUG
) -> torch.Tensor:
    """``(1 - eps) * x * weight + eps / cols`` for a ``(rows, cols)`` fp32/fp16/bf16 ``x``.

    ``x`` and ``weight`` may have any strides (a non-unit column stride of ``x`` is copied
    first); ``out`` must be contiguous along its last dimension, and is refused otherwise.
    """
    rows, cols = x.shape
    if weight.shape != (cols,) or weight.dtype != x.dtype:
        raise ValueError(f"weight must be ({cols},) {x.dtype}, got {tuple(weight.shape)} {weight.dtype}")
    if cols > 1 and x.stride(1) != 1:
        x = x.contiguous()
    if out is None:
        out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    elif out.shape != x.shape or out.dtype != x.dtype:
        raise ValueError(f"out must be {tuple(x.shape)} {x.dtype}, got {tuple(out.shape)} {out.dtype}")
    elif cols > 1 and out.stride(1) != 1:
        raise ValueError(f"out must be contiguous along its last dimension, got strides {out.stride()}")
    if rows and cols:
        smooth_scale_kernel[(rows,)](
            x, weight, out, x.stride(0), weight.stride(0), out.stride(0), cols, eps,
            BUG=bug, BLOCK=triton.next_power_of_2(cols),
        )
    return out


def smooth_scale_reference(x: torch.Tensor, weight: torch.Tensor, eps: float, uniform_over: int | None = None
                           ) -> torch.Tensor:
    """The same in fp64; ``uniform_over`` replaces ``cols`` in ``eps / cols`` (a wrong term)."""
    cols = x.shape[1] if uniform_over is None else uniform_over
    return (1.0 - eps) * x.double() * weight.double() + eps / cols
