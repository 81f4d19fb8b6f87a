"""Cache capacities of this device: the levels a hierarchical roofline draws roofs for.

On a CPU they are read from Linux's sysfs (``/sys/devices/system/cpu/cpu0/cache/index*``: data
and unified caches of level 2 and up; L1 is left out, a copy loop cannot isolate it from the
register file and store buffers with host timers). On a GPU, torch reports the L2 size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    """``"2048K"`` → 2097152 bytes; sysfs writes sizes with a K, M or G suffix."""
    text = text.strip()
    if text and text[-1].upper() in _UNITS:
        return int(text[:-1]) * _UNITS[text[-1].upper()]
    return int(text)


def cpu_caches(root: Path = SYSFS_CACHES) -> dict[str, int]:
    """``{"L2": bytes, "L3": bytes}`` for the caches sysfs lists; empty where it lists none."""
    levels: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if level >= 2 and kind in ("Data", "Unified") and size > 0:
            levels[f"L{level}"] = max(size, levels.get(f"L{level}", 0))
    return levels


def gpu_caches(torch: Any, dev: Any) -> dict[str, int]:
    """``{"L2": bytes}`` of CUDA device ``dev``; empty when there is no such device."""
    if not torch.cuda.is_available() or (dev.index or 0) >= torch.cuda.device_count():
        return {}
    size = int(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 0)
    return {"L2": size} if size > 0 else {}
