"""A compute-bound Triton kernel whose work is set exactly: ``iterations`` FMAs per element.

Each element runs a dependent chain ``c = c * b + a`` in registers, so the time is
``elements × iterations`` FMAs over the device's FMA rate, with one load and one store per
element; a variant with 5 % more iterations does exactly 5 % more arithmetic.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _fma_kernel(x_ptr, out_ptr, n, iterations, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    b = a * 0.5 + 0.75
    c = a
    for _ in range(iterations):
        c = c * b + a
    tl.store(out_ptr + offsets, c, mask=mask)


def fma_loop(x: torch.Tensor, out: torch.Tensor, iterations: int) -> torch.Tensor:
    n = x.numel()
    _fma_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, iterations, BLOCK=BLOCK)
    return out
