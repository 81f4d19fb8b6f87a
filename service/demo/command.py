"""``roofwatch demo init DIR``: write the demo repository and say what roofwatch should find in it."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roofwatch.service.demo.history import PR_BRANCH, DemoError, build_demo_repository

# What each planted step is, for the table printed after init (the rest are neutral commits).
PLANTED = {
    "slow": "rmsnorm ~2× slower (a float64 copy of x)",
    "bug": "softmax wrong for large logits (test_softmax[large-*] fail)",
    "fix": "softmax fixed (those failures become fixed)",
    "fast": "matmul ~4.7× faster (b read once per tile)",
    "pr": f"branch {PR_BRANCH}: layernorm ~1.8× slower",
}


def init_demo(directory: Path, console: Console) -> int:
    """Write the demo history into ``directory``; the exit code (2 when it cannot)."""
    try:
        shas = build_demo_repository(directory)
    except DemoError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    table = Table("step", "commit", "planted", title=f"demo kernel repository in {directory}")
    for name, sha in shas.items():
        table.add_row(name, sha[:12], escape(PLANTED[name]) if name in PLANTED else "[dim]neutral[/]")
    console.print(table)
    console.print(f"next: roofwatch run --repo {directory} --last {len(shas) - 1}\n"
                  f"      roofwatch compare main {PR_BRANCH} --repo {directory}\n"
                  "      roofwatch regressions; roofwatch serve")
    return 0
