"""Probe kernels: which gaps the installed Triton's interpreter has, seen by running them.

``roofwatch.triton_interpreter`` closes a gap only where its probe fails, so a Triton release
that fixes one is left alone. Each probe is a kernel of a few lines, always interpreted (built
with ``InterpretedFunction`` whatever ``TRITON_INTERPRET`` says), on inputs whose results are
exact in the dtype, compared with numpy:

- ``libdevice``, ``cuda-libdevice``, ``hip-libdevice``: ``tanh`` from
  ``triton.language.extra.libdevice`` (the stubs a compiled kernel maps to its backend's) and
  from each backend's own module, as kernel libraries import them.
- ``float-scalars``: ``value.to(tl.float32)`` on a float argument, which a compiled kernel
  receives as an fp32 scalar.
- ``bf16-arithmetic``: a product and a ``tl.sum`` of bf16 values.

This module imports torch and triton; ``roofwatch.triton_interpreter`` imports it only when the
interpreter is on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
import torch
import triton.language as tl
from triton.language.extra import libdevice as generic_libdevice
from triton.runtime.interpreter import InterpretedFunction

__all__ = ["GAPS", "Gap", "backend_libdevice", "probe_all"]


def backend_libdevice(backend: str) -> ModuleType | None:
    """``triton.language.extra.<backend>.libdevice``, or None where this Triton build has none."""
    try:
        return importlib.import_module(f"triton.language.extra.{backend}.libdevice")
    except ImportError:
        return None


cuda_libdevice = backend_libdevice("cuda")
hip_libdevice = backend_libdevice("hip")


class Gap(NamedTuple):
    """One gap of the interpreter: whether its probe failed here, and what the probe saw."""

    name: str
    present: bool
    detail: str


# Where each libdevice probe's functions live; None where the build lacks the module.
LIBDEVICE_MODULES: dict[str, ModuleType | None] = {
    "libdevice": generic_libdevice,
    "cuda-libdevice": cuda_libdevice,
    "hip-libdevice": hip_libdevice,
}
GAPS = (*LIBDEVICE_MODULES, "float-scalars", "bf16-arithmetic")


def _generic_tanh(x_ptr, out_ptr):
    offsets = tl.arange(0, 4)
    tl.store(out_ptr + offsets, generic_libdevice.tanh(tl.load(x_ptr + offsets)))


def _cuda_tanh(x_ptr, out_ptr):
    offsets = tl.arange(0, 4)
    tl.store(out_ptr + offsets, cuda_libdevice.tanh(tl.load(x_ptr + offsets)))  # type: ignore[union-attr]


def _hip_tanh(x_ptr, out_ptr):
    offsets = tl.arange(0, 4)
    tl.store(out_ptr + offsets, hip_libdevice.tanh(tl.load(x_ptr + offsets)))  # type: ignore[union-attr]


def _float_scalar(out_ptr, value):
    tl.store(out_ptr, value.to(tl.float32) * 2.0)


def _bf16_product_and_sum(x_ptr, product_ptr, sum_ptr):
    offsets = tl.arange(0, 4)
    x = tl.load(x_ptr + offsets)
    tl.store(product_ptr + offsets, x * x)
    tl.store(sum_ptr, tl.sum(x, axis=0))


_LIBDEVICE_KERNELS: dict[str, Callable[..., Any]] = {
    "libdevice": _generic_tanh, "cuda-libdevice": _cuda_tanh, "hip-libdevice": _hip_tanh,
}


def _launch(fn: Callable[..., Any], *args: object) -> str | None:
    """Run ``fn`` interpreted on one program; the error it raised, or None."""
    try:
        InterpretedFunction(fn)[(1,)](*args)
    except Exception as error:  # the gaps show as assorted errors wrapped in InterpreterError
        return f"{type(error).__name__}: {error}"
    return None


def _compare(name: str, got: torch.Tensor, want: np.ndarray) -> Gap:
    values = got.double().numpy()
    if np.allclose(values, want, rtol=1e-6, atol=0.0):
        return Gap(name, False, f"{values.tolist()} as numpy gives")
    return Gap(name, True, f"{values.tolist()} where numpy gives {want.tolist()}")


def probe_libdevice(name: str) -> Gap:
    """``tanh`` of fp32 values through one libdevice module."""
    if LIBDEVICE_MODULES[name] is None:
        return Gap(name, False, "this Triton build has no such module")
    x = torch.tensor([-2.0, -0.5, 0.25, 3.0], dtype=torch.float32)
    out = torch.full_like(x, float("nan"))
    error = _launch(_LIBDEVICE_KERNELS[name], x, out)
    if error is not None:
        return Gap(name, True, error)
    return _compare(name, out, np.tanh(x.double().numpy()))


def probe_float_scalars() -> Gap:
    out = torch.full((1,), float("nan"), dtype=torch.float32)
    error = _launch(_float_scalar, out, 1.5)
    if error is not None:
        return Gap("float-scalars", True, error)
    return _compare("float-scalars", out, np.array([3.0]))


def probe_bf16_arithmetic() -> Gap:
    # Values whose squares and sum are exact in bf16, so any difference is the interpreter's.
    x = torch.tensor([1.5, 2.0, -0.5, 4.0], dtype=torch.bfloat16)
    product = torch.full_like(x, float("nan"))
    total = torch.full((1,), float("nan"), dtype=torch.bfloat16)
    with np.errstate(all="ignore"):  # the wrong results overflow and divide by zero on the way
        error = _launch(_bf16_product_and_sum, x, product, total)
    if error is not None:
        return Gap("bf16-arithmetic", True, error)
    got = torch.cat([product, total])
    return _compare("bf16-arithmetic", got, np.array([2.25, 4.0, 0.25, 16.0, 7.0]))


def probe_all() -> dict[str, Gap]:
    """Every probe, keyed by gap name (``GAPS``), run on the interpreter as installed."""
    found = {name: probe_libdevice(name) for name in LIBDEVICE_MODULES}
    found["float-scalars"] = probe_float_scalars()
    found["bf16-arithmetic"] = probe_bf16_arithmetic()
    return found
