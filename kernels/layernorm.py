"""LayerNorm over the last dimension with weight and bias, forward and backward, with autograd.

``y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias`` for each row (Ba, Kiros & Hinton
2016), ``var`` being the biased variance. The forward stores each row's ``mean`` and
``rstd = 1 / sqrt(var + eps)`` in fp32 for the backward.

The variance is always the mean of squared deviations from the already computed mean (two
passes over the row), never ``E[x**2] - E[x]**2``: activations whose mean is large next to
their spread (a row near 1e3 +- 1) would lose every significant digit to cancellation.

As in the softmax, a row that fits in ``MAX_FUSED_COLS`` is held in one block (one read of
``x``); a longer row is streamed in ``LOOPED_BLOCK`` chunks (three reads, as in the Triton
layer-norm tutorial; the second and third come from L2). Accumulation is always fp32.

The backward runs one program per group of rows (as Liger-Kernel does): each program writes
``dx`` for its rows and fp32 partial sums of ``dweight`` and ``dbias`` over them, and the host
adds the partials. No atomics are used, so for a given device and shape the result is
bit-for-bit reproducible from run to run. As in the RMSNorm backward (``kernels/rmsnorm.py``,
whose docstring says why), the row loop is software-pipelined so that the next rows' loads are
in flight while one row is reduced, with as many programs per SM as their registers allow.
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
    "layernorm",
    "layernorm_backward",
    "layernorm_backward_bytes",
    "layernorm_backward_flops",
    "layernorm_bytes",
    "layernorm_flops",
    "layernorm_forward",
    "layernorm_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# The backward keeps x, grad_out, weight and the dweight and dbias accumulators of a row live
# at once; past 8192 fp32 values each, one block spills registers even at 16 warps, and the
# streamed kernels (whose later passes hit L2: a 32k bf16 row is 64 KiB) are faster.
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
def _layernorm_forward_fused_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
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
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    # An IEEE division (tl.div_rn): for a row of equal values the mean is then exactly that
    # value, and the deviations exactly zero. Compiled for a GPU, `/` on fp32 is div.full.f32,
    # off by up to 2 ulp, and rstd (~316 at eps 1e-5) turned that into errors of 1e-2 on an H100.
    mean = tl.div_rn(tl.sum(x, axis=0), n_cols * 1.0)
    # Padding lanes must not add (0 - mean)**2 to the variance.
    xc = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w + b
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layernorm_forward_looped_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
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
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        total += tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.div_rn(tl.sum(total, axis=0), n_cols * 1.0)  # IEEE: see the fused kernel

    sum_sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        xc = tl.where(mask, x - mean, 0.0)
        sum_sq += xc * xc
    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)

    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


# With xhat = (x - mean) * rstd and wg = weight * grad_out (per row, n = n_cols):
#   dx      = rstd * (wg - mean(wg) - xhat * mean(wg * xhat))
#   dweight = sum over rows of grad_out * xhat
#   dbias   = sum over rows of grad_out


@triton.jit
def _layernorm_backward_fused_kernel(
    g_ptr,
    x_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    dx_ptr,
    dw_partial_ptr,
    db_partial_ptr,
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
    # This program's shares of dweight and dbias stay in registers across all of its rows.
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    # Pipelined: the next rows' g and x are loading while this one is reduced.
    for row in tl.range(row_start, row_end, num_stages=STAGES):
        g = tl.load(g_ptr + row * g_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        # Padding lanes have g = w = 0, so they add nothing to either mean below.
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wg = w * g
        c_xhat = tl.sum(wg * xhat, axis=0) / n_cols
        c_one = tl.sum(wg, axis=0) / n_cols
        dx = rstd * (wg - c_one - xhat * c_xhat)
        tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += g * xhat
        db += g
    tl.store(dw_partial_ptr + pid * n_cols + cols, dw, mask=mask)
    tl.store(db_partial_ptr + pid * n_cols + cols, db, mask=mask)


@triton.jit
def _layernorm_backward_looped_kernel(
    g_ptr,
    x_ptr,
    w_ptr,
    mean_ptr,
    rstd_ptr,
    dx_ptr,
    dw_partial_ptr,
    db_partial_ptr,
    g_row_stride,
    x_row_stride,
    dx_row_stride,
    n_rows,
    n_cols,
    rows_per_program,
    BLOCK: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    offsets = tl.arange(0, BLOCK)
    # A whole row of dweight does not fit in registers: this program accumulates into its
    # own fp32 rows of the partial buffers, which no other program touches. Its first row
    # stores without reading (``summed`` columns hold a sum), so no zeroing pass is needed.
    dw_row = dw_partial_ptr + pid * n_cols
    db_row = db_partial_ptr + pid * n_cols
    for row in range(row_start, row_end):
        summed = tl.where(row > row_start, n_cols, 0)
        g_row = g_ptr + row * g_row_stride
        x_row = x_ptr + row * x_row_stride
        dx_row = dx_ptr + row * dx_row_stride
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)

        # Pass 1: both means need the whole row before any dx is known. Both passes are
        # pipelined over the row's chunks; the second pass finds the row in L2.
        acc_xhat = tl.zeros([BLOCK], dtype=tl.float32)
        acc_one = tl.zeros([BLOCK], dtype=tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + offsets
            mask = cols < n_cols
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            wg = w * g
            acc_xhat += wg * tl.where(mask, (x - mean) * rstd, 0.0)
            acc_one += wg
        c_xhat = tl.sum(acc_xhat, axis=0) / n_cols
        c_one = tl.sum(acc_one, axis=0) / n_cols

        # Pass 2: dx and this row's dweight and dbias contributions.
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + offsets
            mask = cols < n_cols
            g = tl.load(g_row + cols, mask=mask, other=0.0).to(tl.float32)
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            xhat = (x - mean) * rstd
            dx = rstd * (w * g - c_one - xhat * c_xhat)
            tl.store(dx_row + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            dw = tl.load(dw_row + cols, mask=cols < summed, other=0.0)
            tl.store(dw_row + cols, dw + g * xhat, mask=mask)
            db = tl.load(db_row + cols, mask=cols < summed, other=0.0)
            tl.store(db_row + cols, db + g, mask=mask)


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
    ``dweight`` and of ``dbias``), fewer when there are fewer rows.
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
    # A chunk of grad_out, x and weight, and of the two fp32 partial rows.
    in_flight = LOOPED_BLOCK * (3 * dtype.itemsize + 8)
    # Each program's partial rows stay in L2 while it walks its rows; two per SM keep the SM
    # busy while one waits, and their partial rows (2 x 2 x SMs x cols x 4 bytes) stay a
    # small share of L2.
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


def _check_inputs(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    if x.ndim < 1:
        raise ValueError("layernorm expects at least a 1-D tensor")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"layernorm supports {SUPPORTED_DTYPES}, got {x.dtype}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is None:
            continue
        if param.shape != x.shape[-1:] or param.dtype != x.dtype or param.device != x.device:
            raise ValueError(
                f"{name} must be ({x.shape[-1]},) {x.dtype} on {x.device}, "
                f"got {tuple(param.shape)} {param.dtype} on {param.device}"
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


def layernorm_forward(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = 1e-5,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """LayerNorm of each row of ``x`` (over its last dimension), without autograd.

    Args:
        x: ``(..., cols)`` fp32, fp16 or bf16 tensor; any row stride, any ``cols``.
        weight, bias: ``(cols,)`` tensors of ``x``'s dtype and device.
        eps: added to the variance before the square root.
        out: optional tensor shaped like ``x`` (same dtype and device, viewable as
            ``(rows, cols)``, contiguous along the last dimension) that receives ``y``.

    Returns:
        ``(y, mean, rstd)``: ``y`` shaped like ``x`` (``out`` when given), and the fp32
        ``(rows,)`` mean and reciprocal standard deviation of each row, which
        ``layernorm_backward`` takes.
    """
    _check_inputs(x, weight, bias)
    x2, weight, bias = _rows(x), weight.contiguous(), bias.contiguous()
    y2 = _output_rows(x, out, "out")
    rows, cols = x2.shape
    mean = torch.empty(rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
    if rows and cols:
        if cols <= MAX_FUSED_COLS:
            kernel, block = _layernorm_forward_fused_kernel, triton.next_power_of_2(cols)
        else:
            kernel, block = _layernorm_forward_looped_kernel, LOOPED_BLOCK
        kernel[(rows,)](
            x2, weight, bias, y2, mean, rstd, x2.stride(0), y2.stride(0), cols, eps,
            BLOCK=block, num_warps=_num_warps(block),
        )
    return (out if out is not None else y2.view(x.shape)), mean, rstd


def layernorm_backward(
    grad_out: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    dx: torch.Tensor | None = None,
    *,
    launch: BackwardLaunch | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of ``layernorm`` with respect to ``x``, ``weight`` and ``bias``.

    Args:
        grad_out: gradient of the loss with respect to ``y``, shaped like ``x``, same dtype.
        x, weight: the forward's inputs (the bias does not enter any gradient).
        mean, rstd: the ``(rows,)`` fp32 tensors ``layernorm_forward`` returned for ``x``.
        dx: optional tensor shaped like ``x`` that receives the input gradient.
        launch: how to run it; ``backward_launch`` for the row length when omitted. Any
            launch gives the same ``dx``; ``dweight`` and ``dbias`` are summed in another
            order when the number of programs differs.

    Returns:
        ``(dx, dweight, dbias)`` in the dtypes of ``x`` and ``weight``; ``grad_out`` is not
        modified.
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
    _check_row_stats(rows, x.device, mean=mean, rstd=rstd)
    if rows == 0 or cols == 0:
        return (dx if dx is not None else dx2.view(x.shape)), torch.zeros_like(weight), torch.zeros_like(weight)

    launch = launch or backward_launch(cols, x.dtype)
    if launch.fused and launch.block < cols:
        raise ValueError(f"a fused backward needs a block of at least {cols} columns, got {launch.block}")
    programs, rows_per_program = _backward_programs(rows, x.device, launch)
    kernel = _layernorm_backward_fused_kernel if launch.fused else _layernorm_backward_looped_kernel
    # Every program writes its whole partial rows, so no initialization is needed.
    partials = torch.empty((2, programs, cols), dtype=torch.float32, device=x.device)
    kernel[(programs,)](
        g2, x2, weight, mean, rstd, dx2, partials[0], partials[1],
        g2.stride(0), x2.stride(0), dx2.stride(0), rows, cols, rows_per_program,
        BLOCK=launch.block, STAGES=launch.stages, num_warps=launch.num_warps,
    )
    dweight, dbias = partials.sum(dim=1).to(weight.dtype)
    return (dx if dx is not None else dx2.view(x.shape)), dweight, dbias


class _LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        y, mean, rstd = layernorm_forward(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dweight, dbias = layernorm_backward(grad_out, x, weight, mean, rstd)
        return dx, dweight, dbias, None


def layernorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = 1e-5,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """LayerNorm of each row of ``x`` over its last dimension, differentiable.

    Args:
        x: ``(..., cols)`` fp32, fp16 or bf16 tensor.
        weight, bias: ``(cols,)`` scale and shift of ``x``'s dtype and device.
        eps: added to the variance before the square root.
        out: optional tensor shaped like ``x`` that receives the result. As with torch's
            ``out=`` arguments, this form is not differentiable.

    Returns:
        Tensor shaped like ``x``, of its dtype; ``layernorm(x, w, b).backward(g)`` fills
        ``x.grad``, ``w.grad`` and ``b.grad`` through the Triton backward kernel.
    """
    if out is not None:
        if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
            raise ValueError("layernorm with out= does not support autograd; an input requires grad")
        return layernorm_forward(x, weight, bias, eps, out=out)[0]
    return _LayerNormFunction.apply(x, weight, bias, eps)


def layernorm_reference(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float = 1e-5,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """LayerNorm computed by plain torch ops in ``dtype`` (fp64 by default), differentiable.

    Returns a tensor of ``dtype`` shaped like ``x``; gradients flow back to ``x``, ``weight``
    and ``bias`` through the upcast, so ``backward`` on it gives the reference gradients.
    """
    x, weight, bias = x.to(dtype), weight.to(dtype), bias.to(dtype)
    centered = x - x.mean(dim=-1, keepdim=True)
    variance = centered.pow(2).mean(dim=-1, keepdim=True)
    return centered * torch.rsqrt(variance + eps) * weight + bias


# FLOPs count each add, subtract, multiply and the rsqrt as one; per-row terms (the rsqrt,
# the divides by n) are ignored next to the per-element ones.
#   forward:  add into the mean (1), subtract it (1), square and add into the variance (2),
#             multiply by rstd (1), by weight and add bias (2)                            -> 7
#   backward: xhat = (x - mean) * rstd (2), wg = w * g (1), wg added into one mean and
#             wg * xhat into the other (3), dx = rstd * (wg - c1 - xhat * c2) (4),
#             g * xhat added into dweight (2), g into dbias (1)                           -> 13
# Bytes are the compulsory traffic, each tensor touched once:
#   forward:  read x, write y (rows * cols each), read weight and bias (cols each),
#             write mean and rstd (rows each, fp32)
#   backward: read x, grad_out, write dx (rows * cols each), read weight, write dweight and
#             dbias (cols each), read mean and rstd (rows each, fp32).
# The fp32 partial sums (2 * programs * cols) are not compulsory: on LLM shapes they are a
# few % of the traffic. The looped kernels read each row two or three times; the later reads
# come from L2, so their fraction of the bandwidth roof is honestly a little lower.
_FORWARD_FLOPS_PER_ELEMENT = 7
_BACKWARD_FLOPS_PER_ELEMENT = 13
_STATS_BYTES_PER_ROW = 8


def layernorm_flops(rows: int, cols: int) -> int:
    """Floating-point operations of one ``layernorm`` forward on ``(rows, cols)``, in FLOP."""
    return _FORWARD_FLOPS_PER_ELEMENT * rows * cols


def layernorm_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``layernorm`` forward, in bytes."""
    return (2 * rows * cols + 2 * cols) * dtype.itemsize + rows * _STATS_BYTES_PER_ROW


def layernorm_backward_flops(rows: int, cols: int) -> int:
    """Floating-point operations of one ``layernorm`` backward on ``(rows, cols)``, in FLOP."""
    return _BACKWARD_FLOPS_PER_ELEMENT * rows * cols


def layernorm_backward_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``layernorm`` backward, in bytes."""
    return (3 * rows * cols + 3 * cols) * dtype.itemsize + rows * _STATS_BYTES_PER_ROW
