"""RMSNorm over the last dimension, forward and backward, with autograd.

``y = x / sqrt(mean(x**2) + eps) * weight`` for each row (Zhang & Sennrich 2019, "Root Mean
Square Layer Normalization"). The forward stores ``rstd = 1 / sqrt(mean(x**2) + eps)`` per row
in fp32 so the backward does not reduce the row a second time.

As in the softmax, a row that fits in ``MAX_FUSED_COLS`` is held in one block (one read of
``x``); a longer row is streamed in ``LOOPED_BLOCK`` chunks, so hidden sizes of 16k-32k and
beyond never bound register use. Accumulation is always fp32, whatever the storage dtype.

The backward runs one program per group of rows (as Liger-Kernel does): each program writes
``dx`` for its rows and one fp32 partial sum of ``dweight`` over them, and the host adds the
partials. No atomics are used, so for a given device and shape the result is bit-for-bit
reproducible from run to run.

What makes the backward fast is bytes in flight, not arithmetic. A program walks its rows one
after another, and each row's dx needs a reduction over the whole row before anything is
stored, so a loop that loads a row, waits, reduces and stores leaves the memory system idle
for most of every iteration: one such program per SM reached a quarter of the copy bandwidth
on an H100. Here the row loop is software-pipelined (``tl.range(..., num_stages=STAGES)``):
the loads of the next ``STAGES - 1`` rows are issued into shared memory (``cp.async`` on
sm_80 and later) while the current row is reduced and stored, and as many programs run per
SM as their registers allow (``backward_launch``), so the SM always has rows arriving.
"""

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

__all__ = [
    "CPU_BACKWARD_PROGRAMS",
    "BackwardLaunch",
    "backward_launch",
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
# The backward's row loop keeps STAGES - 1 rows of grad_out and x in flight in shared memory;
# at most this many bytes per program, so two programs still share an SM of 100 KiB (sm_86).
BACKWARD_PREFETCH_BYTES = 64 * 1024
MAX_BACKWARD_STAGES = 3
# A program of the fused backward holds ~16 fp32 values of each live row per thread (~128
# registers): 16 warps fill an SM's 64 Ki registers once, 8 warps twice, 4 warps four times.
MAX_PROGRAMS_PER_SM = 4


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
    STAGES: tl.constexpr,
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
    # Pipelined: the next rows' g and x are loading while this one is reduced (module docstring).
    for row in tl.range(row_start, row_end, num_stages=STAGES):
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
    STAGES: tl.constexpr,
):
    # int64 so that the row loop's offsets (row * stride) cannot overflow.
    pid = tl.program_id(0).to(tl.int64)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    offsets = tl.arange(0, BLOCK)
    # A whole row of dweight does not fit in registers: this program accumulates into its
    # own fp32 row of the partial buffer, which no other program touches. Its first row
    # stores without reading (``summed`` columns hold a sum), so no zeroing pass is needed.
    dw_row = dw_partial_ptr + pid * n_cols
    for row in range(row_start, row_end):
        summed = tl.where(row > row_start, n_cols, 0)
        g_row = g_ptr + row * g_row_stride
        x_row = x_ptr + row * x_row_stride
        dx_row = dx_ptr + row * dx_row_stride
        rstd = tl.load(rstd_ptr + row)

        # Pass 1: c = mean(wg * xhat) needs the whole row before any dx is known. Both passes
        # are pipelined over the row's chunks; the second pass finds the row in L2.
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + offsets
            mask = cols < n_cols
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            acc += w * g * x
        c = tl.sum(acc, axis=0) * rstd / n_cols

        # Pass 2: dx and this row's dweight contribution.
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + offsets
            mask = cols < n_cols
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = x * rstd
            dx = rstd * (w * g - xhat * c)
            tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + cols, mask=cols < summed, other=0.0)
            tl.store(dw_row + cols, dw + g * xhat, mask=mask)


def _num_warps(block: int) -> int:
    # Enough threads that each holds at most ~16 fp32 values of each live row.
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


@dataclass(frozen=True)
class BackwardLaunch:
    """How the backward runs: which kernel, its block and warps, pipeline depth, programs per SM.

    ``fused`` holds a whole row in one block of ``block`` columns; otherwise the row is streamed
    in ``block``-column chunks. ``stages`` is the row loop's (or, streamed, the chunk loop's)
    ``num_stages``: 1 loads in the loop body, ``s`` keeps ``s - 1`` iterations' loads in flight.
    At most ``programs_per_sm`` programs per SM are launched (each writes one partial row of
    ``dweight``), fewer when there are fewer rows.
    """

    fused: bool
    block: int
    num_warps: int
    stages: int
    programs_per_sm: int


def backward_launch(cols: int, dtype: torch.dtype) -> BackwardLaunch:
    """The backward's launch for rows of ``cols`` elements of ``dtype``."""
    if cols <= MAX_FUSED_COLS:
        block = triton.next_power_of_2(cols)
        num_warps = _num_warps(block)
        in_flight = 2 * block * dtype.itemsize  # one row of grad_out and of x
        programs_per_sm = max(1, min(MAX_PROGRAMS_PER_SM, 16 // num_warps))
        return BackwardLaunch(True, block, num_warps, _stages(in_flight), programs_per_sm)
    # A chunk of grad_out, x and weight, and of the fp32 partial row.
    in_flight = LOOPED_BLOCK * (3 * dtype.itemsize + 4)
    # Each program's partial row stays in L2 while it walks its rows; two per SM keep the SM
    # busy while one waits, and their partial rows (2 x SMs x cols x 4 bytes) stay a small
    # share of L2.
    return BackwardLaunch(False, LOOPED_BLOCK, _num_warps(LOOPED_BLOCK), _stages(in_flight), 2)


def _stages(in_flight_per_stage: int) -> int:
    return max(1, min(MAX_BACKWARD_STAGES, 1 + BACKWARD_PREFETCH_BYTES // in_flight_per_stage))


def backward_slots(device: torch.device, launch: BackwardLaunch | None = None) -> int:
    """The most programs the backward launches on ``device`` (each writes one partial row):
    with ``launch``, for it; without, for any launch."""
    if device.type == "cuda":
        per_sm = MAX_PROGRAMS_PER_SM if launch is None else launch.programs_per_sm
        return per_sm * torch.cuda.get_device_properties(device).multi_processor_count
    return CPU_BACKWARD_PROGRAMS


def _backward_programs(rows: int, device: torch.device, launch: BackwardLaunch) -> tuple[int, int]:
    """``(programs, rows_per_program)`` for the backward; no program is left without rows."""
    rows_per_program = triton.cdiv(rows, min(rows, backward_slots(device, launch)))
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
    *,
    launch: BackwardLaunch | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of ``rmsnorm`` with respect to ``x`` and ``weight``.

    Args:
        grad_out: gradient of the loss with respect to ``y``, shaped like ``x``, same dtype.
        x, weight: the forward's inputs.
        rstd: the ``(rows,)`` fp32 tensor ``rmsnorm_forward`` returned for ``x``.
        dx: optional tensor shaped like ``x`` that receives the input gradient.
        launch: how to run it; ``backward_launch`` for the row length when omitted. Any
            launch gives the same ``dx``; ``dweight`` is summed in another order when the
            number of programs differs.

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

    launch = launch or backward_launch(cols, x.dtype)
    if launch.fused and launch.block < cols:
        raise ValueError(f"a fused backward needs a block of at least {cols} columns, got {launch.block}")
    programs, rows_per_program = _backward_programs(rows, x.device, launch)
    kernel = _rmsnorm_backward_fused_kernel if launch.fused else _rmsnorm_backward_looped_kernel
    # Every program writes its whole partial row, so no initialization is needed.
    dw_partial = torch.empty((programs, cols), dtype=torch.float32, device=x.device)
    kernel[(programs,)](
        g2, x2, weight, rstd, dx2, dw_partial,
        g2.stride(0), x2.stride(0), dx2.stride(0), rows, cols, rows_per_program,
        BLOCK=launch.block, STAGES=launch.stages, num_warps=launch.num_warps,
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
