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

OFF_TERMINAL_WIDTH = 10_000  # characters: wider than any table roofwatch prints, so none is truncated


def make_console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty() or os.environ.get("COLUMNS"):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=OFF_TERMINAL_WIDTH)
