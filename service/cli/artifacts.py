"""``roofwatch artifacts``: the compiled kernels stored for one commit."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from roofwatch.service.core.models import CompiledArtifact


def render(console: Console, sha: str, rows: list[CompiledArtifact]) -> None:
    table = Table("kernel", "specialization", "target", "regs", "spills B", "shared B", "SASS", "tensor core",
                  "hash", title=f"compiled artifacts of {sha[:12]} ({rows[0].toolchain})")
    for row in rows:
        if row.status != "compiled":
            table.add_row(row.kernel.rsplit(".", 1)[-1], row.specialization, row.target,
                          f"[red]failed[/]: {row.reason[:120]}", "", "", "", "", "")
            continue
        tensor = ", ".join(f"{name} {row.instructions[name]}" for name in ("wgmma", "mma", "tcgen05_mma")
                           if row.instructions.get(name))
        table.add_row(row.kernel.rsplit(".", 1)[-1], row.specialization, row.target, str(row.registers),
                      str(row.spill_bytes), str(row.shared_bytes), str(row.sass_instructions), tensor or "–",
                      row.sass_hash[:12])
    console.print(table)
