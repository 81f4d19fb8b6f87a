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


def inert(value: object) -> str:
    """Text from outside (a commit title, a suite or benchmark name, a CSV column) made inert for Rich:
    its markup escaped (``[/]``, ``[link=…]``) and its control characters written out as ``\\xNN``."""
    return escape(str(value).translate(_CONTROL))
