"""What changed between two environments a suite ran in: the packages a commit pins, and Python.

Pure: two recorded environments in (``{"python": "3.11.7", "packages": {name: version}}``, as the
worker records them for a suite that declares its own environment), one phrase per difference out.
A version bump is among the most common causes of a kernel regression, so a change whose two sides
ran in different environments says so beside its numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SHOWN = 20  # differences named; the rest are counted


def environment_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """How ``after`` differs from ``before``: "slowdep 1.0 → 2.0", "torch absent → 2.4.0", "python 3.11.7 → 3.12.1"."""
    if not before and not after:
        return []
    out: list[str] = []
    if before.get("python") != after.get("python"):
        out.append(f"python {before.get('python') or 'the worker'} → {after.get('python') or 'the worker'}")
    old, new = dict(before.get("packages") or {}), dict(after.get("packages") or {})
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            out.append(f"{name} {old.get(name, 'absent')} → {new.get(name, 'absent')}")
    if not before or not after:
        out.insert(0, "its own environment " + ("added" if not before else "removed"))
    if len(out) > SHOWN:
        out = out[:SHOWN] + [f"and {len(out) - SHOWN} more"]
    return out
