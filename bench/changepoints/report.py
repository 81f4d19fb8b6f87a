"""Result tables, built once and rendered twice: with rich on the terminal and as Markdown for a file."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table as RichTable

from bench.changepoints.score import Score


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # a rule above these row indexes, to separate groups (families, pooled rows)
    sections: set[int] = field(default_factory=set)

    def add(self, *cells: str, new_section: bool = False) -> None:
        if new_section and self.rows:
            self.sections.add(len(self.rows))
        self.rows.append(list(cells))


def fmt(x: float, digits: int = 3) -> str:
    return "—" if math.isnan(x) else f"{x:.{digits}f}"


def score_cells(score: Score, seconds: float) -> list[str]:
    """F1, precision, recall, false alarms per clean series, seconds: the columns of every synthetic table."""
    return [fmt(score.f1), fmt(score.precision), fmt(score.recall), fmt(score.false_alarms_per_clean, 2),
            f"{seconds:.1f}"]


SCORE_COLUMNS = ["F1", "precision", "recall", "FA/clean", "seconds"]
SCORE_LEGEND = ("FA/clean = mean detections on change-free series (false alarms a user sees on a benchmark that "
                "did not change); seconds = detector time summed over the series.")


def print_rich(console: Console, table: Table) -> None:
    """The table, then its notes as plain lines (a caption would wrap them to the table's width)."""
    console.print(to_rich(table))
    for note in table.notes:
        console.print(note, style="dim")
    console.print()


def to_rich(table: Table) -> RichTable:
    out = RichTable(title=table.title, title_justify="left")
    for i, name in enumerate(table.columns):
        out.add_column(name, justify="left" if i == 0 or not _numeric(table, i) else "right")
    for i, row in enumerate(table.rows):
        out.add_row(*row, end_section=(i + 1) in table.sections)
    return out


def _numeric(table: Table, column: int) -> bool:
    cells = [r[column] for r in table.rows if r[column] not in ("", "—")]
    return bool(cells) and all(_is_number(c) for c in cells)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def to_markdown(table: Table) -> str:
    lines = [f"### {table.title}", "", "| " + " | ".join(table.columns) + " |",
             "|" + "|".join("---:" if _numeric(table, i) else "---" for i in range(len(table.columns))) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows]
    if table.notes:
        lines += [""] + [f"{note}  " for note in table.notes]
    return "\n".join(lines) + "\n"
