"""The bandwidth probes: ``copy`` (y = x) and ``add`` (z = x + y) over contiguous tensors.

They do as little arithmetic as a kernel can, so their throughput is the memory roof a real
elementwise kernel is judged against, and a drop in them points at the toolchain or the
device rather than at a kernel's math. Each program moves one block of ``BLOCK_BYTES`` per
stream. Every block but the last takes an unmasked path: a mask is only as regular as ``n``
is divisible, and for an ``n`` that is not a multiple of 16 it would break every access of
the kernel into scalar loads; unmasked, each thread issues 128-bit loads and stores.
"""

import torch
import triton
import triton.language as tl

__all__ = [
    "BLOCK_BYTES",
    "SUPPORTED_DTYPES",
    "add",
    "add_bytes",
    "add_flops",
    "add_reference",
    "block_elements",
    "copy",
    "copy_bytes",
    "copy_flops",
    "copy_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# 16 KiB per stream per program: with 8 warps each thread moves 64 bytes, four 128-bit
# accesses in flight, whatever the dtype. Enough to cover HBM latency with a few resident
# programs per SM; a starting point for tuning on each device, not a measured optimum.
BLOCK_BYTES = 16384
_NUM_WARPS = 8


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # int64 offsets: the probes run on 2**28+ elements, and pid * BLOCK passes 2**31 bytes.
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))
    else:
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offsets = start + tl.arange(0, BLOCK)
    # fp32 then one rounding to the storage dtype: fp32 keeps more than 2p + 2 bits of an
    # fp16/bf16 p-bit significand, so the double rounding still gives the correctly rounded
    # sum, bit-identical to torch.add.
    if start + BLOCK <= n:
        x = tl.load(x_ptr + offsets).to(tl.float32)
        y = tl.load(y_ptr + offsets).to(tl.float32)
        tl.store(out_ptr + offsets, (x + y).to(out_ptr.dtype.element_ty))
    else:
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
        y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
        tl.store(out_ptr + offsets, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


def block_elements(dtype: torch.dtype) -> int:
    """Elements one program moves per stream for ``dtype``: ``BLOCK_BYTES / itemsize``."""
    return BLOCK_BYTES // dtype.itemsize


def _check_contiguous(name: str, t: torch.Tensor) -> None:
    if not t.is_contiguous():
        # A silent .contiguous() would be a copy of its own, doubling the traffic the probe
        # reports; the caller decides whether that copy is what they meant.
        raise ValueError(
            f"{name} must be contiguous (got strides {t.stride()} for shape {tuple(t.shape)}); "
            "the bandwidth probes stream flat memory, call .contiguous() first"
        )


def _check_operand(name: str, t: torch.Tensor, x: torch.Tensor) -> None:
    if t.shape != x.shape or t.dtype != x.dtype or t.device != x.device:
        raise ValueError(
            f"{name} must match x: got {tuple(t.shape)} {t.dtype} on {t.device}, "
            f"expected {tuple(x.shape)} {x.dtype} on {x.device}"
        )
    _check_contiguous(name, t)


def _check_input(op: str, x: torch.Tensor) -> None:
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{op} supports {SUPPORTED_DTYPES}, got {x.dtype}")
    _check_contiguous("x", x)


def _grid(n: int, dtype: torch.dtype) -> tuple[int]:
    return (triton.cdiv(n, block_elements(dtype)),)


def copy(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Copy ``x`` element by element.

    Args:
        x: contiguous fp32, fp16 or bf16 tensor of any shape; a non-contiguous view is
            rejected with ``ValueError`` rather than copied behind the caller's back.
        out: optional contiguous tensor of the same shape, dtype and device.

    Returns:
        ``out`` when given, else a new tensor, bit-identical to ``x`` (NaN payloads, -0.0 and
        subnormals included: the kernel never does arithmetic on the values).
    """
    _check_input("copy", x)
    if out is None:
        out = torch.empty_like(x)
    else:
        _check_operand("out", out, x)
    n = x.numel()
    if n == 0:
        return out
    _copy_kernel[_grid(n, x.dtype)](x, out, n, BLOCK=block_elements(x.dtype), num_warps=_NUM_WARPS)
    return out


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Element-wise ``x + y`` computed in fp32 and rounded once to the storage dtype.

    Args:
        x: contiguous fp32, fp16 or bf16 tensor of any shape.
        y: contiguous tensor of the same shape, dtype and device (no broadcasting: the probe
            reads two full streams).
        out: optional contiguous tensor of the same shape, dtype and device.

    Returns:
        ``out`` when given, else a new tensor; bit-identical to ``torch.add(x, y)``.
    """
    _check_input("add", x)
    _check_operand("y", y, x)
    if out is None:
        out = torch.empty_like(x)
    else:
        _check_operand("out", out, x)
    n = x.numel()
    if n == 0:
        return out
    _add_kernel[_grid(n, x.dtype)](x, y, out, n, BLOCK=block_elements(x.dtype), num_warps=_NUM_WARPS)
    return out


def copy_reference(x: torch.Tensor) -> torch.Tensor:
    """``x`` copied by torch, the bit pattern ``copy`` must reproduce."""
    return x.clone()


def add_reference(x: torch.Tensor, y: torch.Tensor, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x + y`` computed in fp64 by torch.

    Args:
        x, y: tensors of the same shape, any floating dtype.
        out_dtype: dtype of the result; ``None`` casts back to ``x.dtype``. Pass
            ``torch.float64`` to measure a kernel's error against the unrounded values.
    """
    result = x.to(torch.float64) + y.to(torch.float64)
    return result.to(x.dtype if out_dtype is None else out_dtype)


# copy: no arithmetic, one read and one write per element -> 0 FLOP, 2 * n * itemsize bytes.
# add: one add per element, two reads and one write -> n FLOP, 3 * n * itemsize bytes.
def copy_flops(n: int) -> int:
    """Floating-point operations of one ``copy`` of ``n`` elements: none, in FLOP."""
    return 0


def copy_bytes(n: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``copy`` of ``n`` elements, in bytes."""
    return 2 * n * dtype.itemsize


def add_flops(n: int) -> int:
    """Floating-point operations of one ``add`` of ``n`` elements, in FLOP."""
    return n


def add_bytes(n: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``add`` of ``n`` elements, in bytes."""
    return 3 * n * dtype.itemsize
