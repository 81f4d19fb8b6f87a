"""How much memory one kernel call needs: its peak allocation above what was live when it began.

``kernel_benchmark`` measures it once per benchmark, in one more call after the timed samples (the
steady state: JIT compilation, autotuning and lazily created workspaces happened in the warm-up),
and writes it into ``extra_info`` as ``peak_memory_bytes`` with ``peak_memory_source`` saying
which allocator counted it:

- ``cuda``: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, less what was
  allocated when the call began — the outputs, temporaries and workspaces the call allocates
  through torch's caching allocator. Not around the timed samples themselves: in CUDA-graph mode
  a replay allocates nothing (its memory was taken at capture), and the warm-up's autotuner
  benchmarks configurations with buffers of its own.
- ``tracemalloc``: on a machine without CUDA, the peak of what Python's allocators trace during
  the call (Python objects, NumPy arrays, the Triton interpreter's block values), above what they
  traced when it began. torch allocates CPU tensors outside Python's allocators, so a torch CPU
  buffer is not counted here; torch has no CPU counterpart of its CUDA memory statistics. The
  process's peak RSS was not used: it only ever grows, counts everything before the benchmark,
  and glibc keeps freed blocks resident, so a buffer allocated again in the measured call often
  adds nothing to it.

Only what the call allocates counts, never the inputs allocated before it, so the number does not
depend on which benchmarks ran before in the process (their order is shuffled per A/B round) and a
change that doubles a kernel's buffer doubles it. A call that allocates nothing reports 0, which
roofwatch cannot track as a ratio: such a benchmark has no memory series until it allocates.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PeakMemory", "cuda_peak", "extra_info_for", "peak_memory", "traced_peak"]


@dataclass(frozen=True)
class PeakMemory:
    """Bytes one call allocated at its peak, above what was live when it began, and who counted them."""

    bytes: int
    source: str  # "cuda" or "tracemalloc"


def cuda_peak(fn: Callable[[], object], torch: Any, device: Any = None) -> PeakMemory:
    """One call of ``fn`` under torch's CUDA allocator statistics (``torch`` is the module)."""
    cuda = torch.cuda
    cuda.synchronize(device)
    live = cuda.memory_allocated(device)
    cuda.reset_peak_memory_stats(device)
    result = fn()
    cuda.synchronize(device)  # the call's kernels may still allocate nothing, but its host code has run
    peak = cuda.max_memory_allocated(device)
    del result
    return PeakMemory(max(0, int(peak) - int(live)), "cuda")


def traced_peak(fn: Callable[[], object]) -> PeakMemory:
    """One call of ``fn`` under ``tracemalloc``; an already running trace is reset, not stopped."""
    running = tracemalloc.is_tracing()
    if not running:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        live, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        if not running:
            tracemalloc.stop()
    return PeakMemory(max(0, peak - live), "tracemalloc")


def peak_memory(fn: Callable[[], object], timer: str) -> PeakMemory:
    """The peak of one call, counted by the allocator the timer's device uses.

    ``timer`` is the timer's name (``cuda_event``/``cuda_graph`` on a GPU, ``host`` elsewhere).
    """
    if timer.startswith("cuda"):
        import torch

        return cuda_peak(fn, torch)
    return traced_peak(fn)


def extra_info_for(peak: PeakMemory) -> dict[str, Any]:
    """What ``extra_info`` holds about memory (roofwatch's result parser reads these two keys)."""
    return {"peak_memory_bytes": peak.bytes, "peak_memory_source": peak.source}
