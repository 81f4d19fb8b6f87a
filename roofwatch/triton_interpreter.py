"""Triton interpreter compatibility: what kernel libraries use that ``TRITON_INTERPRET=1`` lacks.

A machine without a GPU runs Triton kernels through Triton's interpreter (numpy on CPU
tensors). Kernel libraries written for GPUs use a few things it does not implement, and their
suites then fail on a CPU for reasons that have nothing to do with the kernels:

- **libdevice math** (``from triton.language.extra.libdevice import rsqrt, tanh``, or
  ``tl.extra.cuda.libdevice``): the generic functions are stubs that return None there, the
  backends' need a compiler. Patched: while an interpreted kernel runs, every libdevice function
  it can reach (bound by name in its module or read off a libdevice module) is one that keeps the
  backend's dtype rules (fp32 and fp64; an fp16 argument is refused as a GPU compile refuses it)
  and computes with numpy in float64, rounded once to the result's dtype. Functions with no
  numpy equivalent here (rounding modes other than nearest, Bessel functions, ``erfinv``, ...)
  raise ``NotImplementedError`` naming themselves instead of failing obscurely.
- **float scalar arguments** (``eps.to(tl.float32)``): a compiled kernel receives a Python
  float as an fp32 scalar; the interpreter passes the Python float on. Patched: float arguments
  become fp32 scalars, so ``.to`` works and ``x_fp16 * eps`` promotes to fp32 as compiled.

Not fixable here, and reported instead: **bf16 arithmetic.** numpy has no bfloat16, so the
interpreter keeps bf16 values as their 16-bit patterns in integer arrays; loads, stores,
``tl.where`` and conversions (``.to(tl.float32)``) are right, but arithmetic, math functions,
ordering comparisons and reductions (``tl.sum``, ``tl.max``, scans) applied to bf16 operands
compute on the integers. With ``warn_bf16`` (the default) the first such operation in a process
emits one ``InterpreterBf16Warning``. Kernels that convert to fp32 before computing are right;
bf16 cases of kernels that compute in bf16 belong on a GPU.

Each gap is first probed on the installed Triton (``roofwatch.triton_interpreter_probes``, once
per process); only a gap whose probe fails is patched. ``install()`` does nothing unless the
interpreter is on (``TRITON_INTERPRET``), is idempotent, and ``uninstall()`` restores Triton as
it was. The patches act only while an interpreted kernel runs (libdevice) or inside the
interpreter's own classes, so kernels compiled in the same process are untouched.

The ``roofwatch`` pytest plugin installs it for a session with ``--roofwatch-triton-compat`` or
``ROOFWATCH_TRITON_COMPAT=1``; scripts call ``install()`` themselves.
"""

from __future__ import annotations

import contextvars
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from roofwatch.triton_interpreter_probes import Gap

__all__ = ["FIXED", "REPORTED", "InterpreterBf16Warning", "gaps", "install", "installed", "interpreting",
           "uninstall"]

FIXED = ("libdevice", "cuda-libdevice", "hip-libdevice", "float-scalars")
REPORTED = ("bf16-arithmetic",)


class InterpreterBf16Warning(UserWarning):
    """bf16 operands reached arithmetic in the Triton interpreter, which computes on their bit patterns."""


def _erf(x: float) -> float:
    return math.erf(x)


def _erfc(x: float) -> float:
    return math.erfc(x)


_np_erf = np.vectorize(_erf, otypes=[np.float64])
_np_erfc = np.vectorize(_erfc, otypes=[np.float64])

# libdevice name -> numpy on float64 (ints as given); the result is cast to the backend's return dtype.
_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint, "nearbyint": np.rint,
    "sqrt": np.sqrt, "sqrt_rn": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "rsqrt_rn": lambda x: 1.0 / np.sqrt(x),
    "cbrt": np.cbrt, "rcbrt": lambda x: 1.0 / np.cbrt(x), "rcp_rn": lambda x: 1.0 / x,
    "exp": np.exp, "fast_expf": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(10.0, x),
    "fast_exp10f": lambda x: np.power(10.0, x), "expm1": np.expm1,
    "log": np.log, "fast_logf": np.log, "log2": np.log2, "fast_log2f": np.log2, "log10": np.log10,
    "fast_log10f": np.log10, "log1p": np.log1p,
    "sin": np.sin, "fast_sinf": np.sin, "cos": np.cos, "fast_cosf": np.cos, "tan": np.tan, "fast_tanf": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "fast_tanhf": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _np_erf, "erfc": _np_erfc, "saturatef": lambda x: np.clip(x, 0.0, 1.0),
    "isnan": np.isnan, "isinf": np.isinf, "signbit": np.signbit, "finitef": np.isfinite, "isfinited": np.isfinite,
}
_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "pow": np.power, "fast_powf": np.power, "atan2": np.arctan2, "fmod": np.fmod, "hypot": np.hypot,
    "copysign": np.copysign, "div_rn": np.divide, "fast_dividef": np.divide,
    "add_rn": np.add, "sub_rn": np.subtract, "mul_rn": np.multiply,
}
_TERNARY: dict[str, Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]] = {
    "fma": lambda x, y, z: x * y + z, "fma_rn": lambda x, y, z: x * y + z,
}
NUMPY_LIBDEVICE: dict[str, Callable[..., np.ndarray]] = {**_UNARY, **_BINARY, **_TERNARY}

# The libdevice function a replacement is computing, for the builder call it makes below it.
_calling: contextvars.ContextVar[str | None] = contextvars.ContextVar("roofwatch_libdevice_call", default=None)


@dataclass
class _Launch:
    """What one interpreted launch replaced, undone when it returns."""

    undo: list[Callable[[], None]] = field(default_factory=list)
    namespaces: set[int] = field(default_factory=set)
    modules_done: bool = False


@dataclass
class _State:
    applied: tuple[str, ...]
    patches: list[tuple[object, str, object]] = field(default_factory=list)
    launches: list[_Launch] = field(default_factory=list)
    bf16_warned: bool = False


_gaps: dict[str, Gap] | None = None
_state: _State | None = None


def interpreting() -> bool:
    """Whether ``triton.jit`` makes interpreted kernels now (``TRITON_INTERPRET``)."""
    if os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("", "0", "false", "off", "no"):
        return False  # decided without importing triton: outside the interpreter this module costs nothing
    import triton

    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET") == "1"  # releases before triton.knobs read it this way


def gaps() -> dict[str, Gap]:
    """Each gap's probe on the installed Triton's interpreter (run once per process, without the patches)."""
    global _gaps
    if _gaps is None:
        if _state is not None:
            raise RuntimeError("the probes must see the interpreter unpatched: call gaps() before install()")
        from roofwatch import triton_interpreter_probes

        _gaps = triton_interpreter_probes.probe_all()
    return _gaps


def installed() -> tuple[str, ...]:
    """The gaps patched now, and ``bf16-arithmetic`` when its warning is on; () when not installed."""
    return _state.applied if _state is not None else ()


def install(*, warn_bf16: bool = True) -> tuple[str, ...]:
    """Patch the interpreter's gaps found on this Triton; returns what ``installed()`` returns.

    Does nothing outside the interpreter, and nothing more when already installed.
    """
    global _state
    if _state is not None:
        return _state.applied
    if not interpreting():
        return ()
    found = gaps()
    from triton.runtime import interpreter

    libdevice_gaps = [name for name in ("libdevice", "cuda-libdevice", "hip-libdevice") if found[name].present]
    applied = [*libdevice_gaps]
    if found["float-scalars"].present:
        applied.append("float-scalars")
    if warn_bf16 and found["bf16-arithmetic"].present:
        applied.append("bf16-arithmetic")
    state = _State(tuple(applied))
    try:
        if libdevice_gaps:
            _patch_libdevice(state, interpreter, libdevice_gaps)
        if "float-scalars" in applied:
            _patch_float_scalars(state, interpreter)
        if "bf16-arithmetic" in applied:
            _warn_on_bf16(state, interpreter)
    except Exception:
        _restore(state)
        raise
    _state = state
    return state.applied


def uninstall() -> None:
    """Restore every attribute ``install`` replaced."""
    global _state
    if _state is not None:
        _restore(_state)
        _state = None


def _restore(state: _State) -> None:
    while state.patches:
        owner, name, original = state.patches.pop()
        setattr(owner, name, original)


def _replace(state: _State, owner: object, name: str, value: object) -> None:
    state.patches.append((owner, name, getattr(owner, name)))
    setattr(owner, name, value)


def _libdevice_functions(module: Any) -> Iterable[tuple[str, Any]]:
    for name, value in vars(module).items():
        if callable(value) and not name.startswith("_") and getattr(value, "__module__", None) == module.__name__:
            yield name, value


def _patch_libdevice(state: _State, interpreter: Any, names: list[str]) -> None:
    from roofwatch.triton_interpreter_probes import LIBDEVICE_MODULES, backend_libdevice

    semantic = interpreter.interpreter_semantic
    # The backend's function keeps its dtype table and broadcasting; only the builder call is ours.
    backends = [module for module in (backend_libdevice("cuda"), backend_libdevice("hip")) if module is not None]

    def replacement(name: str) -> Callable[..., Any]:
        typed = next((getattr(module, name) for module in backends if hasattr(module, name)), None)

        def libdevice_in_interpreter(*args: Any, _semantic: Any = None) -> Any:
            if typed is None or name not in NUMPY_LIBDEVICE:
                raise NotImplementedError(f"libdevice.{name} has no Triton interpreter implementation in "
                                          "roofwatch.triton_interpreter; run this kernel on a GPU")
            token = _calling.set(name)
            try:
                return typed(*args, _semantic=semantic)
            finally:
                _calling.reset(token)

        libdevice_in_interpreter.__name__ = name
        return libdevice_in_interpreter

    # id -> (original, replacement): the original is kept so its id stays its own.
    by_id: dict[int, tuple[Any, Callable[..., Any]]] = {}
    module_entries: list[tuple[Any, str, Callable[..., Any]]] = []
    for gap in names:
        module = LIBDEVICE_MODULES[gap]
        for name, original in _libdevice_functions(module):
            new = replacement(name)
            by_id[id(original)] = (original, new)
            module_entries.append((module, name, new))

    def substitute(launch: _Launch, namespace: dict[str, Any]) -> None:
        if not launch.modules_done:
            launch.modules_done = True
            for module, name, new in module_entries:
                old = getattr(module, name)
                setattr(module, name, new)
                launch.undo.append(partial(setattr, module, name, old))
        if id(namespace) in launch.namespaces:
            return
        launch.namespaces.add(id(namespace))
        for key, value in list(namespace.items()):
            entry = by_id.get(id(value))
            if entry is not None and entry[0] is value:
                namespace[key] = entry[1]
                launch.undo.append(partial(namespace.__setitem__, key, value))

    original_patch_lang = interpreter._patch_lang
    original_call = interpreter.GridExecutor.__call__
    original_extern = interpreter.InterpreterBuilder.create_extern_elementwise

    def patch_lang(fn: Any) -> Any:
        scope = original_patch_lang(fn)
        if state.launches:  # a kernel, or a device function it calls, about to run
            substitute(state.launches[-1], fn.__globals__)
        return scope

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        state.launches.append(_Launch())
        try:
            return original_call(self, *args, **kwargs)
        finally:
            for undo in reversed(state.launches.pop().undo):
                undo()

    def create_extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str, args: list[Any],
                                  ret_type: Any, is_pure: bool) -> Any:
        name = _calling.get()
        if name is None:
            return original_extern(self, lib_name, lib_path, symbol, args, ret_type, is_pure)
        scalar = ret_type.scalar
        operands = [a.data.astype(np.float64) if a.data.dtype.kind == "f" else a.data for a in args]
        with np.errstate(all="ignore"):  # NaN and Inf are results here, as on a GPU
            result = np.asarray(NUMPY_LIBDEVICE[name](*operands))
        return interpreter.TensorHandle(result.astype(interpreter._get_np_dtype(scalar)), scalar)

    _replace(state, interpreter, "_patch_lang", patch_lang)
    _replace(state, interpreter.GridExecutor, "__call__", launch)
    _replace(state, interpreter.InterpreterBuilder, "create_extern_elementwise", create_extern_elementwise)


def _patch_float_scalars(state: _State, interpreter: Any) -> None:
    import triton.language as tl

    original = interpreter._implicit_cvt

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            with np.errstate(over="ignore"):  # beyond fp32's range is Inf, as a compiled launch passes it
                data = np.array([arg], dtype=np.float32)
            return tl.tensor(interpreter.TensorHandle(data, tl.float32), tl.float32)
        return original(arg)

    _replace(state, interpreter, "_implicit_cvt", implicit_cvt)


_EXACT_ON_PATTERNS = (np.equal, np.not_equal)  # bit-pattern equality is value equality (but for ±0 and NaN)


def _warn_on_bf16(state: _State, interpreter: Any) -> None:
    import triton

    def is_bf16(handle: Any) -> bool:
        return getattr(handle.dtype.scalar, "name", None) == "bf16"

    triton_folder = os.path.dirname(triton.__file__)

    def warn() -> None:
        state.bf16_warned = True
        # Point at the kernel's line: the first frame outside Triton and this module.
        frame, level = sys._getframe(0), 1
        while frame.f_back is not None and (frame.f_code.co_filename.startswith(triton_folder)
                                            or frame.f_code.co_filename == __file__):
            frame, level = frame.f_back, level + 1
        warnings.warn(
            f"bf16 arithmetic ran in the Triton {triton.__version__} interpreter, which computes on bf16 bit "
            "patterns rather than values: this kernel's bf16 results are wrong here. Convert to tl.float32 before "
            "computing, or check the bf16 cases on a GPU (roofwatch docs: track-your-repository.md, Triton kernel "
            "repositories on a machine without a GPU).", InterpreterBf16Warning, stacklevel=level)

    builder = interpreter.InterpreterBuilder
    binary_op, unary_op, fma = builder.binary_op, builder.unary_op, builder.create_fma

    def checked_binary(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not state.bf16_warned and is_bf16(lhs) and op not in _EXACT_ON_PATTERNS:
            warn()
        return binary_op(self, lhs, rhs, op)

    def checked_unary(self: Any, arg: Any, op: Any) -> Any:
        if not state.bf16_warned and is_bf16(arg):
            warn()
        return unary_op(self, arg, op)

    def checked_fma(self: Any, x: Any, y: Any, z: Any) -> Any:
        if not state.bf16_warned and is_bf16(x):
            warn()
        return fma(self, x, y, z)

    _replace(state, builder, "binary_op", checked_binary)
    _replace(state, builder, "unary_op", checked_unary)
    _replace(state, builder, "create_fma", checked_fma)
    for reduction in (interpreter.ReduceOps, interpreter.ScanOps):
        apply = reduction.apply

        def checked_apply(self: Any, input: Any, apply: Any = apply) -> Any:
            operands = input if isinstance(input, tuple) else (input,)
            if not state.bf16_warned and any(is_bf16(getattr(operand, "handle", operand)) for operand in operands):
                warn()
            return apply(self, input)

        _replace(state, reduction, "apply", checked_apply)
