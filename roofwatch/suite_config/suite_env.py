"""Which variables a suite may set through its ``env`` table, and how they reach it.

A suite's ``env`` is written by whoever writes the commit (or the stored config), so it is
attacker input. It only ever reaches the suite's own processes inside the sandbox (bubblewrap
is started with a fixed environment of roofwatch's and passes these on with ``--setenv``),
and even there a few variables would turn the interpreter or the dynamic loader against the
harness itself or reach outside the worktree, so they are refused when the config is read,
with the reason, instead of being dropped silently:

* ``LD_*`` (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``LD_AUDIT``): code loaded into every process;
* ``BASH_ENV`` / ``ENV``: scripts sourced by every non-interactive shell;
* ``GIT_*``: git's own configuration, hooks and object directories;
* ``PYTHON*`` other than a few harmless switches: ``PYTHONSTARTUP``, ``PYTHONHOME``,
  ``PYTHONUSERBASE`` and the like choose what the interpreter loads; ``PYTHONPATH`` is allowed
  when every entry is a relative path inside the worktree (a ``src/`` layout);
* the variables roofwatch sets itself (``HOME``, ``TMPDIR``, ``ROOFWATCH_*``).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

# Interpreter switches that change diagnostics, hashing or buffering, never what is loaded.
HARMLESS_PYTHON = frozenset({
    "PYTHONHASHSEED", "PYTHONWARNINGS", "PYTHONFAULTHANDLER", "PYTHONUNBUFFERED",
    "PYTHONDONTWRITEBYTECODE", "PYTHONUTF8", "PYTHONDEVMODE", "PYTHONOPTIMIZE",
    "PYTHONTRACEMALLOC", "PYTHONIOENCODING",
})
RESERVED = frozenset({"HOME", "TMPDIR", "BASH_ENV", "ENV", "IFS"})
FORBIDDEN_PREFIXES = ("LD_", "GIT_", "ROOFWATCH_", "DYLD_")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_env(env: dict[str, str]) -> None:
    """Raise ``ValueError`` naming the first variable a suite may not set, and why."""
    for key, value in env.items():
        if not NAME.fullmatch(key):
            raise ValueError(f"env: {key!r} is not a variable name")
        if "\0" in value:
            raise ValueError(f"env: {key} holds a NUL byte")
        if key in RESERVED or key.startswith(FORBIDDEN_PREFIXES):
            raise ValueError(f"env: {key} may not be set by a suite (it would change what the sandbox, "
                             "the loader or git runs, or a variable roofwatch sets itself)")
        if key == "PYTHONPATH":
            for entry in filter(None, value.split(":")):
                if not inside_tree(entry):
                    raise ValueError(f"env: PYTHONPATH entry {entry!r} must be a relative path inside the "
                                     "worktree (e.g. \"src\")")
        elif key.startswith("PYTHON") and key not in HARMLESS_PYTHON:
            raise ValueError(f"env: {key} may not be set by a suite (it changes what the interpreter loads); "
                             f"allowed: PYTHONPATH with relative paths, {', '.join(sorted(HARMLESS_PYTHON))}")


def inside_tree(path: str) -> bool:
    """A relative path that stays inside the folder it is relative to (no absolute, no ``..`` out)."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or not path.strip():
        return False
    depth = 0
    for part in pure.parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True
