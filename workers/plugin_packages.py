"""Put a pytest plugin where a sandboxed suite can import it: the compile plugin and the rounds plugin.

The sandbox shows a suite its worktree, its scratch folder and the interpreter, not roofwatch's
own source, so a plugin's modules (standard library, Triton and pytest only) are copied into the
scratch folder as a package whose name cannot clash with the repository's own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path


def copy_package(root: Path, package: str, files: Iterable[tuple[Path, str]]) -> Path:
    """Copy each ``(source file, name)`` into ``root/package``; ``root``, the folder for PYTHONPATH."""
    target = root / package
    target.mkdir(parents=True, exist_ok=True)
    for source, name in files:
        shutil.copyfile(source, target / name)
    return root


def with_plugin_path(env: dict[str, str], root: Path) -> dict[str, str]:
    """``env`` with the plugin folder after the worktree on PYTHONPATH (the tree's packages win)."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, str(root)])}
