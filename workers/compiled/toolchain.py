"""Compile one recorded launch for one target and measure the binary.

The numbers come from the same tools a kernel engineer would run by hand: Triton's own
compile pipeline (TTIR → TTGIR → LLVM IR → PTX → cubin through ptxas), then ``cuobjdump
-res-usage`` for registers, stack, spills and static shared memory and ``nvdisasm`` for the
SASS. All three ship inside the Triton wheel (``triton/backends/nvidia/bin``), so no CUDA
toolkit and no GPU is needed.

This runs inside the suite's sandbox, which sees no roofwatch installation: it imports only the
standard library, Triton and its own package, and returns plain dicts with the fields of
``roofwatch.common.envelope.CompiledArtifactRecord`` (the worker validates them when it reads the file).
"""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.errors import OutOfResources

from .launches import Launch
from .sass import instruction_mix, parse_resource_usage

try:  # in the sandbox, the targets module is copied in beside the plugin (compiled.install)
    from .targets import Target, max_threads
except ImportError:  # run from roofwatch's own tree, where it lives with the suite configuration
    from roofwatch.suite_config.targets import Target, max_threads

TOOL_TIMEOUT_S = 120
WARP_SIZE = 32


class ToolMissing(RuntimeError):
    """An NVIDIA binary tool Triton should ship is not there."""


def _tool(name: str) -> str:
    path = getattr(knobs.nvidia, name).path
    if not path or not Path(path).is_file():
        raise ToolMissing(f"{name} not found (looked for {path!r}); the Triton wheel's NVIDIA backend is incomplete")
    return str(path)


@functools.cache
def toolchain_version() -> str:
    """``triton X, ptxas Y``: recorded with every artifact, a change starts a new epoch."""
    try:
        out = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
        match = re.search(r"V(\d+\.\d+\.\d+)", out.stdout)
        ptxas = match.group(1) if match else "unknown"
    except (ToolMissing, OSError, subprocess.SubprocessError):
        ptxas = "missing"
    return f"triton {triton.__version__}, ptxas {ptxas}"


def _run_tool(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _first_line(exc: BaseException) -> str:
    """The compiler's message without Python's traceback frames; capped, since ptxas can be chatty."""
    text = str(exc).strip() or type(exc).__name__
    return text[:2000]


def compile_launch(launch: Launch, specialization: str, target: Target,
                   tests: list[str] | None = None) -> dict[str, Any]:
    """Compile ``launch`` for ``target``; a failure (compiler error, limit exceeded) is data, not an exception."""
    record: dict[str, Any] = {"kernel": launch.kernel, "specialization": specialization, "target": target.name,
                              "status": "failed", "reason": "", "toolchain": toolchain_version(),
                              "tests": list(tests or [])}
    started = time.perf_counter()
    try:
        source = ASTSource(launch.fn, launch.signature, launch.constexprs, launch.attrs)
        compiled = triton.compile(source, target=GPUTarget("cuda", target.capability, WARP_SIZE),
                                  options=dict(launch.options))
    except Exception as exc:  # noqa: BLE001 - any compiler failure is the kernel's outcome for this target
        return record | {"reason": _first_line(exc), "compile_s": time.perf_counter() - started}
    try:
        record |= _measure(compiled)
    except (ToolMissing, RuntimeError, OSError, subprocess.SubprocessError) as exc:
        record["reason"] = f"could not read the binary: {exc}"
    record |= _limits_check(record, compiled.metadata, target)
    return record | {"compile_s": time.perf_counter() - started}


def _measure(compiled: triton.compiler.CompiledKernel) -> dict[str, Any]:
    cubin: bytes = compiled.asm["cubin"]
    name = compiled.metadata.name  # the entry symbol cuobjdump reports
    with tempfile.TemporaryDirectory(prefix="roofwatch-cubin-") as scratch:
        path = Path(scratch) / "kernel.cubin"
        path.write_bytes(cubin)
        usage = parse_resource_usage(_run_tool([_tool("cuobjdump"), "-res-usage", str(path)]))
        disassembly = _run_tool([_tool("nvdisasm"), "-c", str(path)])
    if name not in usage:
        raise RuntimeError(f"cuobjdump reported no resource usage for {name}")
    res = usage[name]
    total, mix = instruction_mix(disassembly)
    return {
        "status": "compiled", "registers": res.registers, "spill_bytes": res.local_bytes,
        "stack_bytes": res.stack_bytes, "shared_bytes": compiled.metadata.shared + res.static_shared_bytes,
        "ptx_bytes": len(compiled.asm["ptx"].encode()), "sass_bytes": len(cubin), "sass_instructions": total,
        # The hash is of the disassembled code, not of the cubin file: the cubin also carries
        # line tables, so a comment that shifts a line would change it without changing a
        # single instruction.
        "instructions": mix, "sass_hash": hashlib.sha256(disassembly.encode()).hexdigest(),
    }


def _limits_check(record: dict[str, Any], metadata: object, target: Target) -> dict[str, Any]:
    """Triton's own load-time checks, done here against the target's limits instead of a device."""
    if record["status"] != "compiled":
        return {}
    threads = getattr(metadata, "num_warps", 4) * getattr(metadata, "num_ctas", 1) * WARP_SIZE
    problems: list[OutOfResources] = []
    if record["shared_bytes"] > target.max_shared_bytes:
        problems.append(OutOfResources(record["shared_bytes"], target.max_shared_bytes, "shared memory"))
    if record["registers"] and threads > max_threads(record["registers"]):
        problems.append(OutOfResources(threads, max_threads(record["registers"]), "threads"))
    if not problems:
        return {}
    return {"status": "failed", "reason": f"{target.name}: " + "; ".join(map(str, problems))}
