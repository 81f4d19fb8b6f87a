"""Record the specializations a suite launches its Triton kernels with, without running them.

While recording, ``JITFunction.run`` computes the specialization exactly as Triton does before
compiling (argument types, divisibility attributes, constexprs, options) and returns without
launching; ``Autotuner.run`` hands *every* config that survives the kernel's own pruning to
the function below it, so each autotune candidate is compiled, not only the winner a GPU
would pick. Nothing here needs a GPU driver: the specialization is computed against a
backend made for a chosen target.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction, create_function_from_signature

# Options a launch may pass that change the compiled code; the rest (debug flags set by
# JITFunction.run itself) are kept too, but these are the ones a reader recognises.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class Launch:
    """One kernel specialization as Triton would compile it.

    ``signature`` maps each argument to its Triton type (``*bf16``, ``i32``, ``constexpr``),
    ``constexprs`` maps argument paths to values, ``attrs`` holds the divisibility hints
    Triton derived from the actual pointers and integers, ``options`` the launch options.
    """

    fn: JITFunction = field(compare=False, hash=False)
    kernel: str
    signature: dict[str, str]
    constexprs: dict[tuple[int, ...], Any] = field(compare=False, hash=False)
    attrs: dict[tuple[int, ...], Any] = field(compare=False, hash=False)
    options: dict[str, Any] = field(compare=False, hash=False)
    key: str = ""

    def label(self) -> str:
        """A short readable name: ``bf16, BLOCK_M=128 BLOCK_N=64, w8 s3``."""
        dtypes = sorted({t.lstrip("*") for t in self.signature.values() if t.startswith("*")})
        # Only the parameters the kernel declares tl.constexpr: the integers Triton specialises
        # because they equal 1 (and None pointers) are in the identity, not in the name.
        declared = {param.num: param.name for param in self.fn.params if param.is_constexpr}
        consts = " ".join(f"{declared[path[0]]}={_plain(value)}" for path, value in sorted(self.constexprs.items())
                          if len(path) == 1 and path[0] in declared)
        warps, stages = self.options.get("num_warps", 4), self.options.get("num_stages", 3)
        parts = [",".join(dtypes) or "-", consts or "-", f"w{warps} s{stages}"]
        return ", ".join(parts)


def _plain(value: Any) -> str:
    value = getattr(value, "value", value)
    return str(value)


def _launch_key(kernel: str, signature: dict[str, str], constexprs: dict, attrs: dict, options: dict) -> str:
    text = json.dumps([kernel, signature, sorted((list(k), _plain(v)) for k, v in constexprs.items()),
                       sorted((list(k), repr(v)) for k, v in attrs.items()),
                       sorted((k, repr(v)) for k, v in options.items())], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class LaunchRecorder:
    """Collects distinct launches in the order they were first seen."""

    def __init__(self, target: GPUTarget) -> None:
        self.backend = make_backend(target)
        self.launches: dict[str, Launch] = {}
        # Which tests launched each specialization: the link from a kernel to the timing
        # series (pytest-benchmark names a benchmark after its test).
        self.current_test = ""
        self.tests: dict[str, list[str]] = {}
        self._binders: dict[int, Any] = {}

    def record(self, fn: JITFunction, args: tuple, kwargs: dict[str, Any]) -> None:
        kwargs = dict(kwargs)
        kwargs.setdefault("debug", fn.debug or knobs.runtime.debug)
        binder = self._binders.get(id(fn))
        if binder is None:
            binder = self._binders[id(fn)] = create_function_from_signature(fn.signature, fn.params, self.backend)
        bound_args, specialization, options = binder(*args, **kwargs)
        _, signature, constexprs, attrs = fn._pack_args(self.backend, kwargs, bound_args, specialization, options)
        launch_options = {k: v for k, v in kwargs.items() if k not in signature}
        kernel = f"{fn.module}.{fn.fn.__qualname__}"
        key = _launch_key(kernel, signature, constexprs, attrs, launch_options)
        if key not in self.launches:
            self.launches[key] = Launch(fn, kernel, dict(signature), constexprs, attrs, launch_options, key)
        tests = self.tests.setdefault(key, [])
        if self.current_test and self.current_test not in tests:
            tests.append(self.current_test)


@contextmanager
def recording(recorder: LaunchRecorder) -> Iterator[LaunchRecorder]:
    """Within the block, kernel launches are recorded instead of executed."""

    def run_jit(self: JITFunction, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> None:
        recorder.record(self, args, kwargs)
        return None

    def run_autotuned(self: Autotuner, *args: Any, **kwargs: Any) -> None:
        self.nargs = dict(zip(self.arg_names, args))
        configs = self.prune_configs(kwargs) if len(self.configs) > 1 else self.configs
        for config in configs:
            self.fn.run(*args, **kwargs, **config.all_kwargs())
        return None

    saved = JITFunction.run, Autotuner.run
    JITFunction.run, Autotuner.run = run_jit, run_autotuned  # type: ignore[method-assign]
    try:
        yield recorder
    finally:
        JITFunction.run, Autotuner.run = saved  # type: ignore[method-assign]
