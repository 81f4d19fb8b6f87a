"""Kernels written as GPU kernel libraries write them, run under Triton's interpreter without and
with ``roofwatch.triton_interpreter``; prints what each gave as JSON.

Run as a script in a process whose environment has ``TRITON_INTERPRET=1`` from the start: Triton
decorates its own library (``tl.sum``, ``tl.max``) when it is imported, so a process that imported
Triton before setting the variable cannot interpret a kernel that reduces. The tests in
``tests/harness/test_triton_interpreter.py`` run it once and check every case.

Each case is a kernel, its inputs and an fp64 reference. The phases: ``without`` the layer,
``with`` it (``install()`` called twice), ``after_uninstall``; for each, a case's outcome is its
output values or the error it raised, and every ``InterpreterBf16Warning`` raised is counted.
"""

from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.cuda.libdevice import rsqrt as cuda_rsqrt
from triton.language.extra.libdevice import rsqrt, tanh  # bound by name, as Liger-Kernel imports them

from roofwatch import triton_interpreter

N = 8


@triton.jit
def generic_by_name(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(x_ptr + offsets)
    tl.store(y_ptr + offsets, tanh(x) * rsqrt(x * x + 1.0))


@triton.jit
def generic_module_attributes(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(x_ptr + offsets)
    y = libdevice.exp(x) + libdevice.log1p(x * x) + libdevice.erf(x) + libdevice.pow(libdevice.abs(x), 2.5)
    tl.store(y_ptr + offsets, y)


@triton.jit
def cuda_module(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(x_ptr + offsets)
    tl.store(y_ptr + offsets, tl.extra.cuda.libdevice.tanh(x) + cuda_rsqrt(x * x + 1.0))


@triton.jit
def _gelu_tanh(x):
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@triton.jit
def device_function(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, _gelu_tanh(tl.load(x_ptr + offsets)))


@triton.jit
def fp64_sqrt(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, libdevice.sqrt(tl.abs(tl.load(x_ptr + offsets))))


@triton.jit
def unsupported_bessel(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, libdevice.j0(tl.load(x_ptr + offsets)))


@triton.jit
def float_scalar_to(x_ptr, y_ptr, eps, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(x_ptr + offsets)
    tl.store(y_ptr + offsets, x * eps.to(tl.float32))


@triton.jit
def fp16_times_float_scalar(x_ptr, y_ptr, scale, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets) * scale)  # y is fp32: the product's dtype shows


@triton.jit
def bf16_sum(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr, tl.sum(tl.load(x_ptr + offsets), axis=0))


@triton.jit
def bf16_upcast_sum(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(y_ptr, tl.sum(tl.load(x_ptr + offsets).to(tl.float32), axis=0))


@triton.jit
def fp32_row_norm(x_ptr, y_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(x_ptr + offsets)
    tl.store(y_ptr + offsets, x / tl.sqrt(tl.sum(x * x, axis=0)))


def _x(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.linspace(-1.75, 2.0, N, dtype=torch.float64).to(dtype)


def _gelu_tanh_reference(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


SCALE = 1.0 / 3.0  # not an fp16 number: an fp16 product differs from an fp32 one
# name -> (kernel, input, output like, extra scalar arguments, reference of the output or None)
x32, x64, x16, xbf = _x(), _x(torch.float64), _x(torch.float16), _x(torch.bfloat16)
d32 = x32.double().numpy()
erf = np.vectorize(math.erf)
CASES: dict[str, tuple[Any, torch.Tensor, torch.Tensor, tuple[object, ...], np.ndarray | None]] = {
    "generic_by_name": (generic_by_name, x32, x32, (), np.tanh(d32) / np.sqrt(d32 * d32 + 1.0)),
    "generic_module_attributes": (generic_module_attributes, x32, x32, (),
                                  np.exp(d32) + np.log1p(d32 * d32) + erf(d32) + np.abs(d32) ** 2.5),
    "cuda_module": (cuda_module, x32, x32, (), np.tanh(d32) + 1.0 / np.sqrt(d32 * d32 + 1.0)),
    "device_function": (device_function, x32, x32, (), _gelu_tanh_reference(d32)),
    "fp64_sqrt": (fp64_sqrt, x64, x64, (), np.sqrt(np.abs(x64.numpy()))),
    "unsupported_bessel": (unsupported_bessel, x32, x32, (), None),
    "float_scalar_to": (float_scalar_to, x32, x32, (1e-2,), d32 * np.float64(np.float32(1e-2))),
    "fp16_times_float_scalar": (fp16_times_float_scalar, x16, x32, (SCALE,),
                                x16.double().numpy() * np.float64(np.float32(SCALE))),
    "bf16_sum": (bf16_sum, xbf, xbf[:1], (), np.array([xbf.double().sum().item()])),
    "bf16_upcast_sum": (bf16_upcast_sum, xbf, x32[:1], (), np.array([xbf.double().sum().item()])),
    "fp32_row_norm": (fp32_row_norm, x32, x32, (), d32 / np.sqrt((d32 * d32).sum())),
}


def _run(kernel: Any, x: torch.Tensor, like: torch.Tensor, scalars: tuple[object, ...]) -> dict[str, Any]:
    out = torch.full_like(like, float("nan"))
    try:
        with np.errstate(all="ignore"):
            kernel[(1,)](x, out, *scalars, N=N)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}", "values": None}
    return {"error": None, "values": out.double().tolist()}


def _phase() -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcomes = {name: _run(kernel, x, like, scalars) for name, (kernel, x, like, scalars, _) in CASES.items()}
    bf16 = [str(w.message) for w in caught if issubclass(w.category, triton_interpreter.InterpreterBf16Warning)]
    return {"outcomes": outcomes, "bf16_warnings": bf16,
            "bf16_warning_lines": [w.lineno for w in caught
                                   if issubclass(w.category, triton_interpreter.InterpreterBf16Warning)]}


def _names_restored() -> bool:
    """The names a launch replaced are Triton's own again once it returned."""
    from triton.language.extra import libdevice as generic
    from triton.language.extra.cuda import libdevice as cuda

    module = sys.modules[__name__]
    return (module.rsqrt is generic.__dict__["rsqrt"] and getattr(module, "tanh") is generic.__dict__["tanh"]
            and getattr(module, "cuda_rsqrt") is cuda.__dict__["rsqrt"] and libdevice.exp.__module__ == generic.__name__)


def _interpreter_attributes() -> dict[str, int]:
    from triton.runtime import interpreter

    owners: dict[str, Callable[[], object]] = {
        "_patch_lang": lambda: interpreter._patch_lang,
        "_implicit_cvt": lambda: interpreter._implicit_cvt,
        "GridExecutor.__call__": lambda: interpreter.GridExecutor.__call__,
        "create_extern_elementwise": lambda: interpreter.InterpreterBuilder.create_extern_elementwise,
        "binary_op": lambda: interpreter.InterpreterBuilder.binary_op,
        "ReduceOps.apply": lambda: interpreter.ReduceOps.apply,
    }
    return {name: id(get()) for name, get in owners.items()}


def main() -> None:
    original = _interpreter_attributes()
    report: dict[str, Any] = {"triton": triton.__version__, "interpreting": triton_interpreter.interpreting()}
    report["without"] = _phase()
    report["installed"] = list(triton_interpreter.install())
    first = _interpreter_attributes()
    report["installed_again"] = list(triton_interpreter.install())
    report["patched_once"] = _interpreter_attributes() == first and first != original
    report["gaps"] = {name: gap._asdict() for name, gap in triton_interpreter.gaps().items()}
    report["with"] = _phase()
    report["names_restored_after_launches"] = _names_restored()
    triton_interpreter.uninstall()
    report["restored_after_uninstall"] = _interpreter_attributes() == original
    report["after_uninstall"] = _phase()
    report["references"] = {name: None if case[4] is None else case[4].tolist() for name, case in CASES.items()}
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
