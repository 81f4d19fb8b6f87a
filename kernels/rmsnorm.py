"""RMSNorm over the last dimension, forward and backward, with autograd.

``y = x / sqrt(mean(x**2) + eps) * weight`` for each row (Zhang & Sennrich 2019, "Root Mean
Square Layer Normalization"). The forward stores ``rstd = 1 / sqrt(mean(x**2) + eps)`` per row
in fp32 so the backward does not reduce the row a second time.

As in the softmax, a row that fits in ``MAX_FUSED_COLS`` is held in one block (one read of
``x``); a longer row is streamed in ``LOOPED_BLOCK`` chunks, so hidden sizes of 16k-32k and
beyond never bound register use. Accumulation is always fp32, whatever the storage dtype.

The backward runs one program per group of rows (one per SM on a GPU, as Liger-Kernel does):
each program writes ``dx`` for its rows and one fp32 partial sum of ``dweight`` over them, and
the host adds the partials. No atomics are used, so for a given device and shape the result
is bit-for-bit reproducible from run to run.
"""

import math

import torch
import triton
import triton.language as tl

__all__ = [
    "CPU_BACKWARD_PROGRAMS",
    "LOOPED_BLOCK",
    "MAX_FUSED_COLS",
    "SUPPORTED_DTYPES",
    "backward_slots",
    "rmsnorm",
    "rmsnorm_backward",
    "rmsnorm_backward_bytes",
    "rmsnorm_backward_flops",
    "rmsnorm_bytes",
    "rmsnorm_flops",
    "rmsnorm_forward",
    "rmsnorm_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# The backward keeps x, grad_out, weight and the dweight accumulator of a row live at once;
# past 8192 fp32 values each, one block spills registers even at 16 warps, and the streamed
# kernels (whose second pass hits L2: a 32k bf16 row is 64 KiB) are faster.
MAX_FUSED_COLS = 8192
LOOPED_BLOCK = 2048
# Under the interpreter there are no SMs to fill; a few programs over an uneven number of
# rows still exercise the row-range logic (a last program with fewer rows).
CPU_BACKWARD_PROGRAMS = 4


@triton.jit
def _rmsnorm_forward_fused_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    rstd_ptr,
    x_row_stride,
    y_row_stride,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
):
    # int64 row offsets: rows * stride passes 2**31 elements on large activations.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # Zero padding adds nothing to the sum of squares.
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)
    y = x * rstd * w
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rmsnorm_forward_looped_kernel(
    x_ptr,
    w_ptr,
    y_ptr,
    rstd_ptr,
    x_row_stride,
    y_row_stride,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    offsets = tl.arange(0, BLOCK)

    # One fp32 partial sum per lane, reduced once at the end: each lane adds only
    # n_cols / BLOCK terms, so the rounding error grows far slower than a running scalar's.
    sum_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        sum_sq += x * x
    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    tl.store(rstd_ptr + row, rstd)

    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


# With xhat = x * rstd and wg = weight * grad_out (per row, n = n_cols):
#   dx      = rstd * (wg - xhat * mean(wg * xhat))
#   dweight = sum over rows of grad_out * xhat


@triton.jit
def _rmsnorm_backward_fused_kernel(
    g_ptr,
    x_ptr,
    w_ptr,
    rstd_ptr,
    dx_ptr,
    dw_partial_ptr,
    g_row_stride,
    x_row_stride,
    dx_row_stride,
    n_rows,
    n_cols,
    rows_per_program,
    BLOCK: tl.constexpr,
):
    # int64 so that the row loop's offsets (row * stride) cannot overflow.
    pid = tl.program_id(0).to(tl.int64)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    # This program's share of dweight stays in registers across all of its rows.
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(row_start, row_end):
        g = tl.load(g_ptr + row * g_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        wg = w * g
        c = tl.sum(wg * xhat, axis=0) / n_cols
        dx = rstd * (wg - xhat * c)
        tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += g * xhat
    tl.store(dw_partial_ptr + pid * n_cols + cols, dw, mask=mask)


@triton.jit
def _rmsnorm_backward_looped_kernel(
    g_ptr,
    x_ptr,
    w_ptr,
    rstd_ptr,
    dx_ptr,
    dw_partial_ptr,
    g_row_stride,
    x_row_stride,
    dx_row_stride,
    n_rows,
    n_cols,
    rows_per_program,
    BLOCK: tl.constexpr,
):
    # int64 so that the row loop's offsets (row * stride) cannot overflow.
    pid = tl.program_id(0).to(tl.int64)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    offsets = tl.arange(0, BLOCK)
    # A whole row of dweight does not fit in registers: this program accumulates into its
    # own fp32 row of the (zero-initialized) partial buffer, which no other program touches.
    dw_row = dw_partial_ptr + pid * n_cols
    for row in range(row_start, row_end):
        g_row = g_ptr + row * g_row_stride
        x_row = x_ptr + row * x_row_stride
        dx_row = dx_ptr + row * dx_row_stride
        rstd = tl.load(rstd_ptr + row)

        # Pass 1: c = mean(wg * xhat) needs the whole row before any dx is known.
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + offsets
            mask = cols < n_cols
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            acc += w * g * x
        c = tl.sum(acc, axis=0) * rstd / n_cols

        # Pass 2: dx and this row's dweight contribution.
        for start in range(0, n_cols, BLOCK):
            cols = start + offsets
            mask = cols < n_cols
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = x * rstd
            dx = rstd * (w * g - xhat * c)
            tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + cols, mask=mask, other=0.0)
            tl.store(dw_row + cols, dw + g * xhat, mask=mask)


def _num_warps(block: int) -> int:
    # Enough threads that each holds at most ~16 fp32 values of each live row.
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def backward_slots(device: torch.device) -> int:
    """The most programs the backward launches on ``device`` (each writes one partial row)."""
    if device.type == "cuda":
        # One program per SM: enough to fill the GPU, few enough that the host-side sum
        # over the partials stays small next to the row traffic.
        return torch.cuda.get_device_properties(device).multi_processor_count
    return CPU_BACKWARD_PROGRAMS


def _backward_programs(rows: int, device: torch.device) -> tuple[int, int]:
    """``(programs, rows_per_program)`` for the backward; no program is left without rows."""
    rows_per_program = triton.cdiv(rows, min(rows, backward_slots(device)))
    return triton.cdiv(rows, rows_per_program), rows_per_program


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as ``(rows, cols)`` over its last dimension, contiguous along it."""
    # Explicit row count: -1 is ambiguous when the rows have no columns.
    x2 = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
    if x2.shape[1] > 1 and x2.stride(1) != 1:
        x2 = x2.contiguous()
    return x2


def _check_inputs(x: torch.Tensor, weight: torch.Tensor) -> None:
    if x.ndim < 1:
        raise ValueError("rmsnorm expects at least a 1-D tensor")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"rmsnorm supports {SUPPORTED_DTYPES}, got {x.dtype}")
    if weight.shape != x.shape[-1:] or weight.dtype != x.dtype or weight.device != x.device:
        raise ValueError(
            f"weight must be ({x.shape[-1]},) {x.dtype} on {x.device}, "
            f"got {tuple(weight.shape)} {weight.dtype} on {weight.device}"
        )


def _check_row_stats(rows: int, device: torch.device, **stats: torch.Tensor) -> None:
    for name, stat in stats.items():
        if stat.shape != (rows,) or stat.dtype != torch.float32 or stat.device != device or not stat.is_contiguous():
            raise ValueError(
                f"{name} must be the forward's contiguous ({rows},) fp32 tensor on {device}, "
                f"got {tuple(stat.shape)} {stat.dtype} on {stat.device}"
            )


def _output_rows(like: torch.Tensor, out: torch.Tensor | None, name: str) -> torch.Tensor:
    """A ``(rows, cols)`` view of ``out`` (checked against ``like``) or a new tensor."""
    if out is None:
        return torch.empty((math.prod(like.shape[:-1]), like.shape[-1]), dtype=like.dtype, device=like.device)
    if out.shape != like.shape or out.dtype != like.dtype or out.device != like.device:
        raise ValueError(
            f"{name} must match its input: got {tuple(out.shape)} {out.dtype} on {out.device}, "
            f"expected {tuple(like.shape)} {like.dtype} on {like.device}"
        )
    try:
        out2 = out.view(math.prod(out.shape[:-1]), out.shape[-1])
    except RuntimeError:
        raise ValueError(f"{name} must be viewable as (rows, cols)") from None
    if out2.shape[1] > 1 and out2.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous along its last dimension")
    return out2


def rmsnorm_forward(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm of each row of ``x`` (over its last dimension), without autograd.

    Args:
        x: ``(..., cols)`` fp32, fp16 or bf16 tensor; any row stride, any ``cols``.
        weight: ``(cols,)`` tensor of ``x``'s dtype and device.
        eps: added to the mean square before the square root.
        out: optional tensor shaped like ``x`` (same dtype and device, viewable as
            ``(rows, cols)``, contiguous along the last dimension) that receives ``y``.

    Returns:
        ``(y, rstd)``: ``y`` shaped like ``x`` (``out`` when given) and ``rstd``, the fp32
        ``(rows,)`` reciprocal root mean square of each row, which ``rmsnorm_backward`` takes.
    """
    _check_inputs(x, weight)
    x2, weight = _rows(x), weight.contiguous()
    y2 = _output_rows(x, out, "out")
    rows, cols = x2.shape
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    if rows and cols:
        if cols <= MAX_FUSED_COLS:
            kernel, block = _rmsnorm_forward_fused_kernel, triton.next_power_of_2(cols)
        else:
            kernel, block = _rmsnorm_forward_looped_kernel, LOOPED_BLOCK
        kernel[(rows,)](
            x2, weight, y2, rstd, x2.stride(0), y2.stride(0), cols, eps,
            BLOCK=block, num_warps=_num_warps(block),
        )
    return (out if out is not None else y2.view(x.shape)), rstd


def rmsnorm_backward(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    rstd: torch.Tensor,
    dx: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of ``rmsnorm`` with respect to ``x`` and ``weight``.

    Args:
        grad_out: gradient of the loss with respect to ``y``, shaped like ``x``, same dtype.
        x, weight: the forward's inputs.
        rstd: the ``(rows,)`` fp32 tensor ``rmsnorm_forward`` returned for ``x``.
        dx: optional tensor shaped like ``x`` that receives the input gradient.

    Returns:
        ``(dx, dweight)`` in the dtypes of ``x`` and ``weight``; ``grad_out`` is not modified.
    """
    _check_inputs(x, weight)
    if grad_out.shape != x.shape or grad_out.dtype != x.dtype or grad_out.device != x.device:
        raise ValueError(
            f"grad_out must match x: got {tuple(grad_out.shape)} {grad_out.dtype}, "
            f"expected {tuple(x.shape)} {x.dtype}"
        )
    x2, g2, weight = _rows(x), _rows(grad_out), weight.contiguous()
    dx2 = _output_rows(x, dx, "dx")
    rows, cols = x2.shape
    _check_row_stats(rows, x.device, rstd=rstd)
    if rows == 0 or cols == 0:
        return (dx if dx is not None else dx2.view(x.shape)), torch.zeros_like(weight)

    programs, rows_per_program = _backward_programs(rows, x.device)
    if cols <= MAX_FUSED_COLS:
        kernel, block = _rmsnorm_backward_fused_kernel, triton.next_power_of_2(cols)
        # Every program stores its whole partial row, so no initialization is needed.
        dw_partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    else:
        kernel, block = _rmsnorm_backward_looped_kernel, LOOPED_BLOCK
        dw_partial = torch.zeros((programs, cols), dtype=torch.float32, device=x.device)
    kernel[(programs,)](
        g2, x2, weight, rstd, dx2, dw_partial,
        g2.stride(0), x2.stride(0), dx2.stride(0), rows, cols, rows_per_program,
        BLOCK=block, num_warps=_num_warps(block),
    )
    dweight = dw_partial.sum(dim=0).to(weight.dtype)
    return (dx if dx is not None else dx2.view(x.shape)), dweight


class _RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        y, rstd = rmsnorm_forward(x, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, rstd = ctx.saved_tensors
        dx, dweight = rmsnorm_backward(grad_out, x, weight, rstd)
        return dx, dweight, None


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    """RMSNorm of each row of ``x`` over its last dimension, differentiable.

    Args:
        x: ``(..., cols)`` fp32, fp16 or bf16 tensor.
        weight: ``(cols,)`` scale of ``x``'s dtype and device.
        eps: added to the mean square before the square root.
        out: optional tensor shaped like ``x`` that receives the result. As with torch's
            ``out=`` arguments, this form is not differentiable.

    Returns:
        Tensor shaped like ``x``, of its dtype; ``rmsnorm(x, w).backward(g)`` fills
        ``x.grad`` and ``w.grad`` through the Triton backward kernel.
    """
    if out is not None:
        if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
            raise ValueError("rmsnorm with out= does not support autograd; an input requires grad")
        return rmsnorm_forward(x, weight, eps, out=out)[0]
    return _RMSNormFunction.apply(x, weight, eps)


def rmsnorm_reference(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """RMSNorm computed by plain torch ops in ``dtype`` (fp64 by default), differentiable.

    Returns a tensor of ``dtype`` shaped like ``x``; gradients flow back to ``x`` and
    ``weight`` through the upcast, so ``backward`` on it gives the reference gradients.
    """
    x, weight = x.to(dtype), weight.to(dtype)
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


# FLOPs count each add, multiply and the rsqrt as one; per-row terms (the rsqrt, the divide
# by n) are ignored next to the per-element ones.
#   forward:  square and add into the sum (2), multiply by rstd (1), by weight (1) -> 4
#   backward: xhat = x * rstd (1), wg = w * g (1), wg * xhat added into c (2),
#             dx = rstd * (wg - xhat * c) (3), g * xhat added into dweight (2)      -> 9
# Bytes are the compulsory traffic, each tensor touched once:
#   forward:  read x, write y (rows * cols each), read weight (cols), write rstd (rows, fp32)
#   backward: read x, grad_out, write dx (rows * cols each), read weight, write dweight
#             (cols each), read rstd (rows, fp32).
# The fp32 dweight partials (programs * cols) are not compulsory: on LLM shapes they are
# under 3 % of the traffic. The looped kernels read each row twice; the second read comes
# from L2, so their fraction of the bandwidth roof is honestly a little lower.
_FORWARD_FLOPS_PER_ELEMENT = 4
_BACKWARD_FLOPS_PER_ELEMENT = 9
_RSTD_BYTES = 4


def rmsnorm_flops(rows: int, cols: int) -> int:
    """Floating-point operations of one ``rmsnorm`` forward on ``(rows, cols)``, in FLOP."""
    return _FORWARD_FLOPS_PER_ELEMENT * rows * cols


def rmsnorm_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``rmsnorm`` forward, in bytes."""
    return (2 * rows * cols + cols) * dtype.itemsize + rows * _RSTD_BYTES


def rmsnorm_backward_flops(rows: int, cols: int) -> int:
    """Floating-point operations of one ``rmsnorm`` backward on ``(rows, cols)``, in FLOP."""
    return _BACKWARD_FLOPS_PER_ELEMENT * rows * cols


def rmsnorm_backward_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``rmsnorm`` backward, in bytes."""
    return (3 * rows * cols + 2 * cols) * dtype.itemsize + rows * _RSTD_BYTES
