"""The GPUs a repository compiles for, and the per-block limits Triton checks when it loads a kernel.

Limits are the CUDA programming guide's per-architecture numbers (compute capabilities
table): the most dynamic shared memory one block may opt in to, and the register file a block
can use. Triton only checks them when it loads a binary on a real device; here they are
checked against the compiled metadata so a kernel that could never launch fails on any machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_TARGETS = ("sm_90",)
REGISTERS_PER_BLOCK = 65536
MAX_THREADS_PER_BLOCK = 1024


@dataclass(frozen=True)
class Target:
    name: str  # "sm_90"
    capability: int  # 90
    max_shared_bytes: int  # per block, opt-in maximum


# Opt-in shared memory per block, bytes: 163 KiB on A100, 99 KiB on consumer Ampere/Ada and
# Blackwell GeForce, 227 KiB on Hopper and datacenter Blackwell.
_MAX_SHARED = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448, 103: 232448,
               120: 101376}


class UnknownTarget(ValueError):
    """A target name that is not ``sm_<capability>`` for a GPU with known limits."""


def parse_target(name: str) -> Target:
    match = re.fullmatch(r"sm_(\d+)a?", name.strip())
    if not match or int(match.group(1)) not in _MAX_SHARED:
        known = ", ".join(f"sm_{c}" for c in sorted(_MAX_SHARED))
        raise UnknownTarget(f"unknown compile target {name!r}; known targets: {known}")
    capability = int(match.group(1))
    return Target(f"sm_{capability}", capability, _MAX_SHARED[capability])


def parse_targets(names: str | list[str] | tuple[str, ...]) -> list[Target]:
    items = names.split(",") if isinstance(names, str) else list(names)
    targets = [parse_target(name) for name in items if name.strip()]
    if not targets:
        raise UnknownTarget("no compile targets given")
    return list({t.name: t for t in targets}.values())


def max_threads(registers: int, warp_size: int = 32) -> int:
    """How many threads one block can hold at ``registers`` per thread (register-file bound).

    Registers are allocated per warp in units of 256 (8 per thread), as the occupancy
    calculator does.
    """
    per_thread = max(8, -(-registers // 8) * 8)
    warps = REGISTERS_PER_BLOCK // (per_thread * warp_size)
    return min(MAX_THREADS_PER_BLOCK, warps * warp_size)
