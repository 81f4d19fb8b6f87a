"""Row-wise softmax over the last dimension of a 2-D tensor.

Two kernels share one wrapper: a row that fits in ``MAX_FUSED_COLS`` is loaded into one block
and reduced in registers (one read, one write); a longer row is streamed in ``LOOPED_BLOCK``
chunks with an online max/normalizer (two reads, one write), so row length never bounds
register use. Accumulation is always fp32, whatever the storage dtype.
"""

import torch
import triton
import triton.language as tl

__all__ = [
    "LOOPED_BLOCK",
    "MAX_FUSED_COLS",
    "SUPPORTED_DTYPES",
    "softmax",
    "softmax_bytes",
    "softmax_flops",
    "softmax_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# Past 8192 fp32 values per row a single block spills registers even at 16 warps; the
# streamed kernel is then faster and its cost does not grow with the row.
MAX_FUSED_COLS = 8192
LOOPED_BLOCK = 2048


@triton.jit
def _softmax_fused_kernel(
    x_ptr,
    out_ptr,
    x_row_stride,
    out_row_stride,
    n_cols,
    BLOCK: tl.constexpr,
):
    # int64 row offsets: rows * stride passes 2**31 elements on large activations.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # -inf padding contributes exp(-inf) = 0 to the sum and never wins the max.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    # Subtracting the row max keeps exp() in range; without it fp32 overflows past x = 88.
    numerator = tl.exp(x - tl.max(x, axis=0))
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_looped_kernel(
    x_ptr,
    out_ptr,
    x_row_stride,
    out_row_stride,
    n_cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK)

    # Pass 1: running max m and normalizer d = sum(exp(x - m)), rescaled whenever m grows
    # (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax").
    m = tl.full([], -float("inf"), tl.float32)
    d = tl.full([], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value seen is -inf (masked attention rows start this way), m_new is
        # -inf and -inf - (-inf) would be NaN; any finite shift gives the correct zeros.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        d = d * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new

    # Pass 2: normalize. Multiplying by 1/d costs one divide per row instead of per element.
    inv_d = 1.0 / d
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) * inv_d
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    # Enough threads that each holds at most ~16 fp32 values of the row.
    if block >= 4096:
        return 16
    if block >= 2048:
        return 8
    return 4


def _check_out(x: torch.Tensor, out: torch.Tensor) -> None:
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"out must match x: got {tuple(out.shape)} {out.dtype} on {out.device}, "
            f"expected {tuple(x.shape)} {x.dtype} on {x.device}"
        )
    if out.shape[1] > 1 and out.stride(1) != 1:
        raise ValueError("out must be contiguous along its last dimension")


def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax of each row of ``x``.

    Args:
        x: ``(rows, cols)`` fp32, fp16 or bf16 tensor; any row stride, any ``cols``.
        out: optional ``(rows, cols)`` tensor of the same dtype and device, contiguous along
            the last dimension, that receives the result (every element is written).

    Returns:
        ``(rows, cols)`` tensor of ``x.dtype``: ``out`` when given, else a new tensor.
        A row that is entirely ``-inf`` gives NaN, as ``torch.softmax`` does.
    """
    if x.ndim != 2:
        raise ValueError(f"softmax expects a 2-D tensor, got {x.ndim}-D")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"softmax supports {SUPPORTED_DTYPES}, got {x.dtype}")
    rows, cols = x.shape
    if cols > 1 and x.stride(1) != 1:
        x = x.contiguous()
    if out is None:
        out = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    else:
        _check_out(x, out)
    if rows == 0 or cols == 0:
        return out

    if cols <= MAX_FUSED_COLS:
        block = triton.next_power_of_2(cols)
        _softmax_fused_kernel[(rows,)](
            x, out, x.stride(0), out.stride(0), cols, BLOCK=block, num_warps=_num_warps(block)
        )
    else:
        _softmax_looped_kernel[(rows,)](
            x,
            out,
            x.stride(0),
            out.stride(0),
            cols,
            BLOCK=LOOPED_BLOCK,
            num_warps=_num_warps(LOOPED_BLOCK),
        )
    return out


def softmax_reference(x: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Softmax of each row of ``x`` computed in fp64 by torch.

    Args:
        x: ``(rows, cols)`` tensor of any floating dtype.
        out_dtype: dtype of the result; ``None`` casts back to ``x.dtype``. Pass
            ``torch.float64`` to measure a kernel's error against the unrounded values.

    Returns:
        ``(rows, cols)`` tensor of ``out_dtype``.
    """
    result = torch.softmax(x.to(torch.float64), dim=-1)
    return result.to(x.dtype if out_dtype is None else out_dtype)


# Work per element, counting each as one FLOP: a compare for the max, a subtract, an exp,
# an add into the normalizer and a multiply/divide to normalize -> 5 FLOP per element.
# Bytes are the compulsory traffic: each input element read once and each output element
# written once -> 2 * rows * cols * itemsize. The looped kernel reads the input twice, so
# its achieved fraction of the bandwidth roof is honestly lower on long rows.
_FLOPS_PER_ELEMENT = 5


def softmax_flops(rows: int, cols: int) -> int:
    """Floating-point operations of one ``softmax`` call on a ``(rows, cols)`` input, in FLOP."""
    return _FLOPS_PER_ELEMENT * rows * cols


def softmax_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``softmax`` call, in bytes (read once, write once)."""
    return 2 * rows * cols * dtype.itemsize
