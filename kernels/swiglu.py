"""Fused SwiGLU, ``silu(gate) * up``, the activation of the Llama / Mistral MLP.

Unfused, torch reads ``gate`` for silu, writes the activation, reads it back with ``up`` and
writes the product: five tensor passes. Fused: one read of each input, one write, with the
math in fp32 whatever the storage dtype. The backward (``SwiGLUFunction``) recomputes silu
from the saved inputs instead of saving the activation, as Liger-Kernel does: one tensor
less held for backward for a few FLOPs more.

``gate`` and ``up`` are often the two halves of one fused ``gate_up`` projection, so a view
whose last dimension is contiguous and whose leading dimensions collapse to one row stride
is read in place; any other layout is copied to contiguous first.
"""

import torch
import triton
import triton.language as tl

__all__ = [
    "BLOCK",
    "SUPPORTED_DTYPES",
    "SwiGLUFunction",
    "swiglu",
    "swiglu_backward",
    "swiglu_backward_reference",
    "swiglu_bytes",
    "swiglu_flops",
    "swiglu_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# 1024 elements over 4 warps: 8 per thread, one or two 128-bit accesses per stream.
BLOCK = 1024
_NUM_WARPS = 4


@triton.jit
def _swiglu_forward_kernel(
    gate_ptr,
    up_ptr,
    out_ptr,
    gate_row_stride,
    up_row_stride,
    out_row_stride,
    n_cols,
    n_col_blocks,
    BLOCK: tl.constexpr,
):
    # One flat grid over (row, column block): a 2-D grid would cap rows or column blocks at
    # 65535. int64 because a contiguous input runs as a single row of every element.
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_col_blocks
    cols = (pid % n_col_blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(gate_ptr + row * gate_row_stride + cols, mask=mask).to(tl.float32)
    up = tl.load(up_ptr + row * up_row_stride + cols, mask=mask).to(tl.float32)
    # sigmoid saturates to exactly 0 or 1 for large |gate|, so silu is -0.0 where it
    # underflows and gate where it saturates: no inf/inf or inf * 0 can appear.
    out = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + row * out_row_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_backward_kernel(
    gate_ptr,
    up_ptr,
    grad_out_ptr,
    grad_gate_ptr,
    grad_up_ptr,
    gate_row_stride,
    up_row_stride,
    grad_out_row_stride,
    grad_gate_row_stride,
    grad_up_row_stride,
    n_cols,
    n_col_blocks,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0).to(tl.int64)
    row = pid // n_col_blocks
    cols = (pid % n_col_blocks) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    gate = tl.load(gate_ptr + row * gate_row_stride + cols, mask=mask).to(tl.float32)
    up = tl.load(up_ptr + row * up_row_stride + cols, mask=mask).to(tl.float32)
    grad_out = tl.load(grad_out_ptr + row * grad_out_row_stride + cols, mask=mask).to(tl.float32)
    sig = tl.sigmoid(gate)
    silu = gate * sig
    # d silu / d gate = sig + gate * sig * (1 - sig) = sig * (1 + gate * (1 - sig)).
    grad_gate = grad_out * up * sig * (1.0 + gate * (1.0 - sig))
    grad_up = grad_out * silu
    tl.store(grad_gate_ptr + row * grad_gate_row_stride + cols,
             grad_gate.to(grad_gate_ptr.dtype.element_ty), mask=mask)
    tl.store(grad_up_ptr + row * grad_up_row_stride + cols,
             grad_up.to(grad_up_ptr.dtype.element_ty), mask=mask)


def _as_rows(t: torch.Tensor, cols: int) -> torch.Tensor | None:
    """``t`` as a ``(rows, cols)`` view with unit column stride, or None when none exists."""
    try:
        rows = t.view(-1, cols)
    except RuntimeError:
        return None
    return rows if cols == 1 or rows.stride(1) == 1 else None


def _check_inputs(op: str, first: torch.Tensor, **others: torch.Tensor) -> None:
    if first.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{op} supports {SUPPORTED_DTYPES}, got {first.dtype}")
    if first.ndim == 0:
        raise ValueError(f"{op} expects at least one dimension, got a 0-d tensor")
    for name, t in others.items():
        if t.shape != first.shape or t.dtype != first.dtype or t.device != first.device:
            raise ValueError(
                f"{name} must match gate: got {tuple(t.shape)} {t.dtype} on {t.device}, "
                f"expected {tuple(first.shape)} {first.dtype} on {first.device}"
            )


def _check_outputs(first: torch.Tensor, **outputs: torch.Tensor) -> None:
    _check_inputs("swiglu", first, **outputs)
    for name, t in outputs.items():
        if t.numel() and _as_rows(t, t.shape[-1]) is None:
            raise ValueError(
                f"{name} must be contiguous along its last dimension with leading dimensions "
                f"that collapse to one row stride; got strides {t.stride()}"
            )


def _launch(kernel: triton.JITFunction, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
    """Run an elementwise kernel over same-shaped ``inputs`` and ``outputs`` (non-empty)."""
    tensors = inputs + outputs
    if all(t.is_contiguous() for t in tensors):
        views = [t.view(1, -1) for t in tensors]
    else:
        cols = tensors[0].shape[-1]
        views = [_as_rows(t, cols) for t in inputs] + [_as_rows(t, cols) for t in outputs]
        # Inputs with no row-strided view (a transpose, a stride along the last dimension)
        # are copied; outputs were checked to have one.
        views[: len(inputs)] = [
            v if v is not None else _as_rows(t.contiguous(), cols) for v, t in zip(views[: len(inputs)], inputs)
        ]
    rows, cols = views[0].shape
    n_col_blocks = triton.cdiv(cols, BLOCK)
    kernel[(rows * n_col_blocks,)](
        *views, *(v.stride(0) for v in views), cols, n_col_blocks, BLOCK=BLOCK, num_warps=_NUM_WARPS
    )


def swiglu(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``silu(gate) * up`` element-wise, computed in fp32 and rounded once.

    Args:
        gate: fp32, fp16 or bf16 tensor of any shape, e.g. ``(tokens, intermediate)``.
        up: tensor of the same shape, dtype and device.
        out: optional tensor of the same shape, dtype and device, contiguous along its last
            dimension with leading dimensions that collapse to one row stride.

    Returns:
        ``out`` when given, else a new contiguous tensor. No autograd; see ``SwiGLUFunction``.
    """
    _check_inputs("swiglu", gate, up=up)
    if out is None:
        out = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device)
    else:
        _check_outputs(gate, out=out)
    if gate.numel():
        _launch(_swiglu_forward_kernel, [gate, up], [out])
    return out


def swiglu_backward(
    gate: torch.Tensor,
    up: torch.Tensor,
    grad_out: torch.Tensor,
    grad_gate: torch.Tensor | None = None,
    grad_up: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Gradients of ``silu(gate) * up`` with respect to ``gate`` and ``up``.

    Args:
        gate, up: the forward inputs.
        grad_out: gradient of the loss with respect to the forward output, same shape.
        grad_gate, grad_up: optional outputs, laid out as ``swiglu``'s ``out``.

    Returns:
        ``(grad_gate, grad_up)`` in the inputs' dtype.
    """
    _check_inputs("swiglu_backward", gate, up=up, grad_out=grad_out)
    outputs = {}
    for name, given in (("grad_gate", grad_gate), ("grad_up", grad_up)):
        outputs[name] = torch.empty(gate.shape, dtype=gate.dtype, device=gate.device) if given is None else given
    _check_outputs(gate, **outputs)
    if gate.numel():
        _launch(_swiglu_backward_kernel, [gate, up, grad_out], list(outputs.values()))
    return outputs["grad_gate"], outputs["grad_up"]


class SwiGLUFunction(torch.autograd.Function):
    """``SwiGLUFunction.apply(gate, up)``: the fused SwiGLU with autograd support."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate, up)
        return swiglu(gate, up)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        gate, up = ctx.saved_tensors
        return swiglu_backward(gate, up, grad_out)


def swiglu_reference(gate: torch.Tensor, up: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``silu(gate) * up`` computed in fp64 by torch.

    Args:
        gate, up: tensors of the same shape, any floating dtype.
        out_dtype: dtype of the result; ``None`` casts back to ``gate.dtype``. Pass
            ``torch.float64`` to measure a kernel's error against the unrounded values.
    """
    result = torch.nn.functional.silu(gate.to(torch.float64)) * up.to(torch.float64)
    return result.to(gate.dtype if out_dtype is None else out_dtype)


def swiglu_backward_reference(
    gate: torch.Tensor, up: torch.Tensor, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(grad_gate, grad_up)`` of ``silu(gate) * up`` by fp64 torch autograd, in fp64."""
    gate64 = gate.detach().to(torch.float64).requires_grad_()
    up64 = up.detach().to(torch.float64).requires_grad_()
    out = torch.nn.functional.silu(gate64) * up64
    grad_gate, grad_up = torch.autograd.grad(out, (gate64, up64), grad_out.to(torch.float64))
    return grad_gate, grad_up


# Forward, per element: sigmoid = 1 / (1 + exp(-g)) is an exp, an add and a divide (the
# negation folds into the exp's argument scaling), then g * sigmoid and * up -> 5 FLOP.
# Bytes are the compulsory traffic: gate and up read once, the output written once
# -> 3 * n * itemsize.
_FLOPS_PER_ELEMENT = 5


def swiglu_flops(n: int) -> int:
    """Floating-point operations of one ``swiglu`` forward over ``n`` elements, in FLOP."""
    return _FLOPS_PER_ELEMENT * n


def swiglu_bytes(n: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``swiglu`` forward over ``n`` elements, in bytes."""
    return 3 * n * dtype.itemsize
