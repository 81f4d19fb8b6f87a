"""Cross-entropy over a large vocabulary: loss and gradient of ``(tokens, vocab)`` logits.

One program per token row streams the vocabulary in ``VOCAB_BLOCK`` chunks, twice:

1. an online max and normalizer (Milakov & Gimelshein 2018, as in ``kernels.softmax``) give
   the row's log-sum-exp without ever holding the row or its softmax; the row loss follows;
2. the gradient ``(softmax - one_hot) / n`` is written block by block, in the logits dtype.

The gradient is produced in the forward call, as Liger-Kernel's cross-entropy does, so the
backward only rescales it when the incoming gradient is not 1.

Memory. fp32 exists only in registers, one block per program: no ``(tokens, vocab)`` fp32
softmax, log-softmax or gradient is ever allocated, whatever the logits dtype. The gradient
needs one ``(tokens, vocab)`` buffer of the logits dtype, or none with ``inplace_grad=True``,
which writes it over the logits (each element is read before it is overwritten, by the same
program). Liger's fused linear cross-entropy also splits the tokens into chunks, because it
materialises the logits itself, one chunk at a time, from the hidden states; here the logits
are the caller's input, so a token-chunk loop would bound no allocation and there is none.

``ignore_index`` rows give loss 0 and gradient 0 and are left out of the mean; a target
outside ``[0, vocab)`` that is not ``ignore_index`` gives NaN loss and gradient for its row.
"""

from typing import Literal

import torch
import triton
import triton.language as tl

__all__ = [
    "SUPPORTED_DTYPES",
    "VOCAB_BLOCK",
    "cross_entropy",
    "cross_entropy_bytes",
    "cross_entropy_flops",
    "cross_entropy_loss_and_grad",
    "cross_entropy_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# 4096 fp32 values at 8 warps is 16 per thread: loads stay 16-byte vectors and nothing spills,
# and several rows fit on an SM at once to keep enough bytes in flight. Longer blocks gain
# nothing on a row that is streamed anyway.
VOCAB_BLOCK = 4096
# The rescaling pass of the backward is a plain elementwise multiply over a 2-D grid.
_SCALE_BLOCK = 4096

Reduction = Literal["mean", "sum", "none"]
_REDUCTIONS = ("mean", "sum", "none")


@triton.jit
def _cross_entropy_kernel(
    logits_ptr,
    logits_row_stride,
    target_ptr,
    loss_ptr,
    loss_stride,
    grad_ptr,
    grad_row_stride,
    n_valid_ptr,
    n_cols,
    ignore_index,
    label_smoothing,
    HAS_GRAD: tl.constexpr,
    MEAN: tl.constexpr,
    SMOOTHING: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # int64 row offsets: tokens * vocab passes 2**31 elements at 16k tokens x 128k vocab.
    row = tl.program_id(0).to(tl.int64)
    x_row = logits_ptr + row * logits_row_stride
    grad_row = grad_ptr + row * grad_row_stride
    offsets = tl.arange(0, BLOCK)
    target = tl.load(target_ptr + row)

    if target == ignore_index:
        tl.store(loss_ptr + row * loss_stride, 0.0)
        if HAS_GRAD:
            zeros = tl.zeros([BLOCK], dtype=grad_ptr.dtype.element_ty)
            for start in range(0, n_cols, BLOCK):
                cols = start + offsets
                tl.store(grad_row + cols, zeros, mask=cols < n_cols)
        return

    # Pass 1: running max m and normalizer d = sum(exp(x - m)), rescaled whenever m grows.
    # d (and the sum of x for label smoothing) stay per lane and are reduced once after the
    # loop, so each block costs one cross-warp reduction (the max), not two or three.
    m = tl.full([], -float("inf"), tl.float32)
    d = tl.zeros([BLOCK], dtype=tl.float32)
    x_sum = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # A -inf-masked vocabulary can fill whole blocks before the first finite logit;
        # -inf - (-inf) would be NaN, and any finite shift gives the correct zeros.
        shift = tl.where(m_new == -float("inf"), 0.0, m_new)
        d = d * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
        if SMOOTHING:
            x_sum += tl.where(mask, x, 0.0)

    # Keep log(d) apart from m: log(d) <= log(vocab) is small, so (x - m) - log(d) loses
    # nothing to the magnitude of m, whereas x - (m + log(d)) would round at ulp(m) and put
    # an absolute error of ~3e-5 on a probability near 1 once logits reach 1e3.
    log_d = tl.log(tl.sum(d, axis=0))
    target_ok = (target >= 0) & (target < n_cols)
    # A bad target must not become an out-of-bounds read; NaN marks its row instead.
    x_target = tl.load(x_row + target, mask=target_ok, other=float("nan")).to(tl.float32)
    # loss = lse - (1 - eps) * x_target - eps * mean(x), with lse = m + log(d); eps = 0 is
    # plain cross-entropy (torch's label-smoothing definition).
    loss = (m - x_target) + log_d
    if SMOOTHING:
        loss = (m + log_d) - (1.0 - label_smoothing) * x_target - label_smoothing * (tl.sum(x_sum, axis=0) / n_cols)
    tl.store(loss_ptr + row * loss_stride, loss)

    # Pass 2: d loss_row / d x_j = softmax_j - (1 - eps) [j == target] - eps / vocab, scaled
    # by 1 / n for the mean. When grad aliases logits, every element is read before it is
    # written, by this program only.
    if HAS_GRAD:
        if MEAN:
            scale = 1.0 / tl.load(n_valid_ptr).to(tl.float32)
        else:
            scale = 1.0
        on_target = 1.0 - label_smoothing
        uniform = label_smoothing / n_cols
        poison = tl.where(target_ok, 0.0, float("nan"))
        for start in range(0, n_cols, BLOCK):
            cols = start + offsets
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
            p = tl.exp((x - m) - log_d)
            grad = p - tl.where(cols == target, on_target, 0.0) - uniform + poison
            tl.store(grad_row + cols, (grad * scale).to(grad_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _scale_rows_kernel(
    grad_ptr,
    grad_row_stride,
    factor_ptr,
    factor_stride,
    n_cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    # factor_stride is 0 for a scalar incoming gradient (mean/sum) or an expanded one.
    factor = tl.load(factor_ptr + row * factor_stride).to(tl.float32)
    ptrs = grad_ptr + row * grad_row_stride + cols
    g = tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    tl.store(ptrs, (g * factor).to(grad_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    # Enough threads that each holds at most ~16 fp32 values of the block.
    if block >= 4096:
        return 8
    if block >= 1024:
        return 4
    return 2


def _check_inputs(logits: torch.Tensor, target: torch.Tensor, reduction: str, label_smoothing: float) -> None:
    if logits.ndim != 2:
        raise ValueError(f"cross_entropy expects (tokens, vocab) logits, got {logits.ndim}-D")
    if logits.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"cross_entropy supports {SUPPORTED_DTYPES}, got {logits.dtype}")
    if logits.shape[1] == 0:
        raise ValueError("cross_entropy needs a vocabulary of at least one class")
    if target.shape != logits.shape[:1]:
        raise ValueError(f"target must have shape ({logits.shape[0]},), got {tuple(target.shape)}")
    if target.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"target must be int64 or int32 class indices, got {target.dtype}")
    if target.device != logits.device:
        raise ValueError(f"target is on {target.device}, logits on {logits.device}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")


def cross_entropy_loss_and_grad(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: Reduction = "mean",
    label_smoothing: float = 0.0,
    grad: torch.Tensor | None = None,
    loss_rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row losses and, when ``grad`` is given, the gradient of the reduced loss.

    The launch wrapper under ``cross_entropy``; it does no autograd bookkeeping.

    Args:
        logits: ``(tokens, vocab)`` fp32, fp16 or bf16; any row stride.
        target: ``(tokens,)`` int64 or int32 class indices.
        ignore_index: target value whose row is skipped (loss 0, gradient 0, not counted).
        reduction: the reduction the gradient is for: ``"mean"`` divides it by the number of
            rows not ignored, ``"sum"`` and ``"none"`` do not.
        label_smoothing: weight ``eps`` of the uniform distribution mixed into the target.
        grad: ``(tokens, vocab)`` tensor of ``logits.dtype``, contiguous along the vocabulary,
            that receives d(loss)/d(logits) with an incoming gradient of 1 (every element is
            written); it may be ``logits`` itself. ``None`` skips the gradient pass.
        loss_rows: optional ``(tokens,)`` fp32 tensor, any stride, that receives the row losses.

    Returns:
        ``(loss_rows, n_valid)``: fp32 ``(tokens,)`` row losses (0 on ignored rows) and a 0-d
        int64 tensor counting the rows not ignored, both on ``logits.device``.
    """
    _check_inputs(logits, target, reduction, label_smoothing)
    tokens, vocab = logits.shape
    if logits.stride(1) != 1 and vocab > 1:
        logits = logits.contiguous()
    target = target.contiguous()
    if grad is not None and (grad.shape != logits.shape or grad.dtype != logits.dtype or grad.device != logits.device
                             or (vocab > 1 and grad.stride(1) != 1)):
        raise ValueError(f"grad must be a {tuple(logits.shape)} {logits.dtype} tensor on {logits.device}, "
                         "contiguous along the vocabulary")
    if loss_rows is None:
        loss_rows = torch.empty(tokens, dtype=torch.float32, device=logits.device)
    elif loss_rows.shape != (tokens,) or loss_rows.dtype != torch.float32 or loss_rows.device != logits.device:
        raise ValueError(f"loss_rows must be a ({tokens},) fp32 tensor on {logits.device}")
    # Counted on the device: the mean needs n before any gradient is written, and a host
    # read here would stall the stream on every call.
    n_valid = (target != ignore_index).sum()
    if tokens == 0:
        return loss_rows, n_valid

    block = min(triton.next_power_of_2(vocab), VOCAB_BLOCK)
    _cross_entropy_kernel[(tokens,)](
        logits,
        logits.stride(0),
        target,
        loss_rows,
        loss_rows.stride(0),
        logits if grad is None else grad,
        logits.stride(0) if grad is None else grad.stride(0),
        n_valid,
        vocab,
        ignore_index,
        float(label_smoothing),
        HAS_GRAD=grad is not None,
        MEAN=reduction == "mean",
        SMOOTHING=label_smoothing > 0.0,
        BLOCK=block,
        num_warps=_num_warps(block),
    )
    return loss_rows, n_valid


def _reduce(loss_rows: torch.Tensor, n_valid: torch.Tensor, reduction: str, dtype: torch.dtype) -> torch.Tensor:
    # torch.sum has no atomics, so the loss is bit-identical from run to run; an all-ignored
    # batch gives 0 / 0 = NaN for the mean, as torch.nn.functional.cross_entropy does.
    if reduction == "none":
        return loss_rows.to(dtype)
    total = loss_rows.sum()
    if reduction == "mean":
        total = total / n_valid
    return total.to(dtype)


def _scale_rows_(grad: torch.Tensor, factor: torch.Tensor, factor_stride: int) -> None:
    tokens, vocab = grad.shape
    if grad.numel() == 0:
        return
    grid = (tokens, triton.cdiv(vocab, _SCALE_BLOCK))
    _scale_rows_kernel[grid](grad, grad.stride(0), factor, factor_stride, vocab, BLOCK=_SCALE_BLOCK, num_warps=8)


class CrossEntropyFunction(torch.autograd.Function):
    """Autograd wrapper: the gradient is computed in ``forward`` and rescaled in ``backward``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        logits: torch.Tensor,
        target: torch.Tensor,
        ignore_index: int,
        reduction: Reduction,
        label_smoothing: float,
        inplace_grad: bool,
    ) -> torch.Tensor:
        needs_grad = ctx.needs_input_grad[0]
        source = logits if logits.stride(1) == 1 or logits.shape[1] <= 1 else logits.contiguous()
        grad = None
        if needs_grad:
            grad = source if inplace_grad else torch.empty(source.shape, dtype=source.dtype, device=source.device)
        loss_rows, n_valid = cross_entropy_loss_and_grad(
            source, target, ignore_index, reduction, label_smoothing, grad=grad
        )
        if needs_grad:
            if grad is logits:
                # The caller's logits now hold the gradient. Bumping the version counter makes
                # any other autograd node that saved them fail loudly in its backward instead
                # of reading a gradient as if it were logits.
                torch.autograd.graph.increment_version(logits)
            ctx.save_for_backward(grad)
        ctx.reduction = reduction
        ctx.consumed = False
        return _reduce(loss_rows, n_valid, reduction, logits.dtype)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_output: torch.Tensor):  # type: ignore[override]
        if ctx.consumed:
            raise RuntimeError("cross_entropy rescales its saved gradient in place; backward can run only once")
        ctx.consumed = True
        (grad,) = ctx.saved_tensors
        if ctx.reduction == "none":
            _scale_rows_(grad, grad_output, grad_output.stride(0))
        # The common loss.backward() passes exactly 1; one scalar read to skip a full
        # read-modify-write of (tokens, vocab) is the better trade.
        elif not torch.equal(grad_output, torch.ones_like(grad_output)):
            _scale_rows_(grad, grad_output.to(torch.float32), 0)
        return grad, None, None, None, None, None


def cross_entropy(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: Reduction = "mean",
    label_smoothing: float = 0.0,
    inplace_grad: bool = False,
) -> torch.Tensor:
    """Cross-entropy of ``logits`` against class indices, differentiable in ``logits``.

    A drop-in for ``torch.nn.functional.cross_entropy`` on 2-D logits without class weights.

    Args:
        logits: ``(tokens, vocab)`` fp32, fp16 or bf16, any row stride; ``vocab`` may be
            256k and more. Logits masked with ``-inf`` are allowed wherever the target is not
            (without label smoothing; with it the loss is infinite, as torch's is).
        target: ``(tokens,)`` int64 or int32 class indices.
        ignore_index: target value whose row contributes loss 0 and gradient 0 and is not
            counted in the mean.
        reduction: ``"mean"`` over rows not ignored, ``"sum"``, or ``"none"``.
        label_smoothing: ``eps`` in ``[0, 1]``: the target is ``(1 - eps) one_hot + eps / vocab``.
        inplace_grad: write the gradient over ``logits`` (no second ``(tokens, vocab)``
            buffer). Only for logits nobody reads afterwards, such as the output of the LM
            head; their version counter is bumped, so another op that saved them raises in
            backward. Not allowed on a leaf tensor, whose storage is its value. The default
            leaves ``logits`` unmodified.

    Returns:
        The loss in ``logits.dtype``: 0-d for ``"mean"``/``"sum"``, ``(tokens,)`` for ``"none"``.
        Its backward can run once.
    """
    _check_inputs(logits, target, reduction, label_smoothing)
    if inplace_grad and logits.requires_grad and logits.is_leaf:
        raise ValueError("inplace_grad would overwrite a leaf tensor's value with its gradient")
    return CrossEntropyFunction.apply(logits, target, ignore_index, reduction, label_smoothing, inplace_grad)


def cross_entropy_reference(
    logits: torch.Tensor,
    target: torch.Tensor,
    ignore_index: int = -100,
    reduction: Reduction = "mean",
    label_smoothing: float = 0.0,
    grad_output: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loss and its gradient in ``logits`` computed in fp64 by torch.

    Args:
        grad_output: the incoming gradient, shaped like the loss; ``None`` means ones.

    Returns:
        ``(loss, grad)`` in fp64: ``loss`` shaped as ``cross_entropy`` returns it for
        ``reduction``, ``grad`` of shape ``(tokens, vocab)``.
    """
    x = logits.detach().to(torch.float64).requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(
        x, target.long(), ignore_index=ignore_index, reduction=reduction, label_smoothing=label_smoothing
    )
    weight = torch.ones_like(loss) if grad_output is None else grad_output.to(torch.float64)
    (grad,) = torch.autograd.grad(loss, x, weight)
    return loss.detach(), grad


# Work per element, counting an exp as one FLOP: pass 1 compares for the max, subtracts the
# shift, exponentiates and adds into the normalizer (4); pass 2 subtracts the log-sum-exp,
# exponentiates, subtracts the target/smoothing term and scales by 1/n (4) -> 8 FLOP.
# Bytes are the compulsory traffic of forward + backward: logits read once, gradient written
# once (2 * tokens * vocab * itemsize), plus int64 targets and fp32 row losses. The kernel
# reads each row twice; the second read is mostly served from L2, so the achieved fraction of
# the bandwidth roof shows how much of it is.
_FLOPS_PER_ELEMENT = 8


def cross_entropy_flops(tokens: int, vocab: int) -> int:
    """FLOP of one forward + backward of ``cross_entropy`` on ``(tokens, vocab)`` logits."""
    return _FLOPS_PER_ELEMENT * tokens * vocab


def cross_entropy_bytes(tokens: int, vocab: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one forward + backward, in bytes."""
    return 2 * tokens * vocab * dtype.itemsize + tokens * (torch.int64.itemsize + torch.float32.itemsize)
