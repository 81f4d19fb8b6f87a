"""The pull request comment's "compiled code changed" section (Markdown only, no transport)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WARNING = "⚠️"


def render_compiled(compiled: dict[str, Any], budget: int, code: Callable[[str], str]) -> str:
    """The section for ``comparison_report(...)["compiled"]``; '' when the repository compiles nothing.

    ``code`` makes a line an inline code span safe against backticks in kernel names.
    """
    if not compiled:
        return ""
    targets = ", ".join(compiled.get("targets") or [])
    if compiled.get("identical"):
        kernels = int(compiled.get("kernels") or 0)
        return (f"Compiled code is identical for all {kernels} kernel{'' if kernels == 1 else 's'} on {targets}: "
                "a timing difference between these commits is the machine, not the code.")
    diffs = list(compiled.get("diffs") or [])
    # What changes the kernel's nature (spills, lost tensor cores, narrower math, no longer
    # compiling) comes first: it matters before any GPU has timed it.
    diffs.sort(key=lambda d: (not d.get("flags"), d.get("line", "")))
    heading = f"#### Compiled code changed ({targets})\n\n"
    lines: list[str] = []
    used = len(heading)
    for index, item in enumerate(diffs):
        flags = item.get("flags") or []
        mark = f"{WARNING} " if flags else ""
        why = f" — {'; '.join(flags)}" if flags else ""
        line = f"- {mark}{code(str(item.get('line', '')))}{why}"
        more = f"- … {len(diffs) - index} more on the dashboard"
        if used + len(line) + len(more) + 2 > budget:
            lines.append(more)
            break
        lines.append(line)
        used += len(line) + 1
    return heading + "\n".join(lines)
