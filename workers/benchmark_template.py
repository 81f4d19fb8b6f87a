"""The ``kernel_benchmark`` file ``roofwatch init`` writes for a kernel repository without benchmarks.

Kernel libraries often keep their benchmarks as scripts (``triton.testing.do_bench`` loops, plots)
that roofwatch cannot run as a suite. ``init`` cannot write the benchmarks for them either: what a
kernel's inputs are, and what one call costs, is the author's knowledge. So it writes the file
with everything else in place — one benchmark per kernel module that the CPU-runnable tests
reach (modules under a ``backends`` package, vendor variants of another module's kernels, left out), importing that module (so the file fails loudly if the module does not load), listing the
kernels and the functions that launch them, and shapes that suit a GPU and the interpreter — and
marks what is left with ``TODO(roofwatch)``:

- ``call``: a function of no arguments that launches the kernel once on inputs made beforehand;
  until it is written the benchmark skips, saying so, and the suite passes with nothing timed;
- ``flops`` and ``bytes_moved``: the FLOP and compulsory bytes of one call. Until filled in they
  are ``None``: time and peak memory are tracked, the roofline is not.

Every name that reaches the file comes from the tree: module paths are dotted identifiers (the
kernel discovery keeps only those) and everything else is written through ``repr``.
"""

from __future__ import annotations

from roofwatch.workers.kernel_tests import KernelModule

BENCHMARK_FILE = "roofwatch_benchmarks/test_kernels.py"
MODULES_KEPT = 200  # benchmarks one generated file holds, so a huge library gets a file a person can read
LAUNCHERS_SHOWN = 6


def benchmark_file(repository: str, modules: list[KernelModule]) -> str:
    """The file's text: a ``kernel_benchmark`` test per module in ``modules`` (the first ``MODULES_KEPT``)."""
    kept = modules[:MODULES_KEPT]
    names = _test_names(kept)
    parts = [_HEADER.format(repository=repository.replace('"""', "'''"), count=len(kept),
                            left_out="" if len(modules) <= MODULES_KEPT else
                            f"\n({len(modules) - MODULES_KEPT} more kernel modules were left out: add them the same way.)\n")]
    for name, module in zip(names, kept, strict=True):
        launchers = [f"#   {launcher}" for launcher in module.launchers[:LAUNCHERS_SHOWN]] or [
            "#   (none found: the kernels are launched elsewhere; call the function your library exposes)"]
        if len(module.launchers) > LAUNCHERS_SHOWN:
            launchers.append(f"#   ... and {len(module.launchers) - LAUNCHERS_SHOWN} more")
        kernels = ", ".join(module.kernels)
        parts.append(_BENCHMARK.format(
            name=name, path=module.path, kernels=kernels, module=module.name,
            launchers="\n    ".join(launchers), skip_reason=repr(f"roofwatch init wrote this benchmark of {module.path}: "
                                                             f"write its call (TODO(roofwatch) in {BENCHMARK_FILE})")))
    return "".join(parts)


def _test_names(modules: list[KernelModule]) -> list[str]:
    """``test_<module's last part>``, made unique with the parts before it where two modules share one."""
    names: list[str] = []
    for module in modules:
        parts = module.name.split(".")
        depth = 1
        while "_".join(parts[-depth:]) in [n.removeprefix("test_") for n in names] and depth < len(parts):
            depth += 1
        name = "test_" + "_".join(parts[-depth:])
        while name in names:
            name += "_"
        names.append(name)
    return names


_HEADER = '''"""Benchmarks of {repository}'s Triton kernels, written by `roofwatch init`: {count} to finish by hand.
{left_out}
Each benchmark below imports one kernel module and lists its kernels and the functions that launch
them. To finish one, replace its TODO(roofwatch) lines:

1. ``call``: make the inputs (random, never zeros, from a fixed seed; allocated here, outside the
   timed call) and set ``call`` to a function of no arguments that launches the kernel once.
   Until then the benchmark skips, saying so.
2. ``flops`` and ``bytes_moved``: the floating-point operations and the compulsory bytes moved of
   one call, with the math in a comment. Until then they are None: time and peak memory are
   tracked, the roofline (achieved FLOP/s and GB/s against this device's peaks) is not.

``kernel_benchmark`` (roofwatch's pytest plugin) times ``call``: CUDA events with an L2 flush on a
GPU, the host clock on a CPU, samples until the median is known to +-0.5 % or a cap, and the
peak memory of one call. Without a GPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1,
set by the suite): keep the CPU shapes small. How it measures, what each field means and what
the interpreter cannot compute (bf16 arithmetic): roofwatch's docs/harness.md and
docs/track-your-repository.md#triton-kernel-repositories.
"""

import pytest
import torch

from roofwatch.tolerances import dtype_name

ON_GPU = torch.cuda.is_available()
DEVICE = "cuda" if ON_GPU else "cpu"
# (rows, columns): LLM-sized on a GPU; small on a CPU, where the interpreter runs each program in Python.
SHAPE = (4096, 4096) if ON_GPU else (64, 256)
DTYPE = torch.float32
'''

_BENCHMARK = '''

def {name}(kernel_benchmark) -> None:
    """{path}: {kernels}."""
    import {module} as kernels  # the module loads here, or this benchmark fails saying why

    # Functions of the module that launch a kernel:
    {launchers}
    rows, cols = SHAPE
    torch.manual_seed(0)
    call = None  # TODO(roofwatch): e.g. x = torch.randn(SHAPE, device=DEVICE, dtype=DTYPE); call = lambda: kernels.launcher(x)
    flops = None  # TODO(roofwatch): FLOP of one call, with the math, e.g. 3 * rows * cols
    bytes_moved = None  # TODO(roofwatch): compulsory bytes of one call, e.g. 2 * rows * cols * x.element_size()
    if call is None:
        pytest.skip({skip_reason})
    kernel_benchmark(call, flops=flops, bytes=bytes_moved, dtype=dtype_name(DTYPE),
                     shape=f"{{rows}}x{{cols}}", impl="triton")
'''
