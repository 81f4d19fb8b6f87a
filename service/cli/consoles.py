"""The command line's Rich consoles: squeezed to the terminal on a terminal, whole in a log or a pipe.

Rich falls back to 80 columns when its stream is not a terminal, which cuts a summary table's
columns down to ``r… │ c… │ s…`` in CI logs and files. Off a terminal the consoles are given a
width no table reaches, so every table prints at its natural width; ``COLUMNS`` still wins when
it is set (a user who asks for a width gets it).
"""

from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.markup import escape

OFF_TERMINAL_WIDTH = 10_000  # characters: wider than any table roofwatch prints, so none is truncated


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or os.environ.get("COLUMNS"):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=OFF_TERMINAL_WIDTH)


# C0 controls (tab and newline included: one value, one line), DEL and C1 controls: ANSI/OSC
# escapes that would recolour, retitle or hyperlink a terminal, or forge a line of output.
_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}


# Characters of one value shown: every message roofwatch writes fits (a run's reason is cut at
# 2,000), and Rich's highlighting of a 300,000-letter suite name held `roofwatch run` for minutes.
SHOWN_LIMIT = 2_000


# A message's own line breaks and tabs are kept (``inert_lines``); every other control is still written out.
_CONTROL_BUT_LINES = {code: text for code, text in _CONTROL.items() if chr(code) not in "\n\t"}


def inert(value: object) -> str:
    """Text from outside (a commit title, a suite or benchmark name, a CSV column) made inert for Rich:
    its markup escaped (``[/]``, ``[link=…]``), its control characters written out as ``\\xNN``, and
    past ``SHOWN_LIMIT`` characters cut, saying how many were left out."""
    return escape(_cut(str(value)).translate(_CONTROL))


def inert_lines(value: object, indent: str = "  ", limit: int = SHOWN_LIMIT) -> str:
    """A message of several lines (git's error, a suite's reason) made inert as ``inert`` makes a value,
    its line breaks kept: each line after the first starts with ``indent``, so it reads as part of the
    message it continues, and no line it carries can pass for one of roofwatch's own. ``limit``: the
    characters kept (a suite's output tail is longer than any one value)."""
    lines = _cut(str(value), limit).replace("\r\n", "\n").translate(_CONTROL_BUT_LINES).split("\n")
    return escape(f"\n{indent}".join(line.rstrip() for line in lines))


def _cut(text: str, limit: int = SHOWN_LIMIT) -> str:
    if len(text) > limit:
        return f"{text[:limit]}…[{len(text) - limit:,} more characters]"
    return text
