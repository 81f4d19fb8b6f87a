"""Put the compile plugin where a sandboxed suite can import it.

The sandbox shows a suite its worktree, its scratch folder and the interpreter, not roofwatch's
own source, so the plugin's modules (standard library, Triton and pytest only) are copied into
the scratch folder as the package ``roofwatch_compiled``. The name cannot clash with the
repository's own ``workers`` package, roofwatch's included.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from roofwatch.suite_config import targets

PACKAGE = "roofwatch_compiled"
PLUGIN = f"{PACKAGE}.plugin"
# What runs inside the suite's process; artifacts_file and install stay with the worker.
SANDBOX_MODULES = ("__init__.py", "plugin.py", "launches.py", "sass.py", "toolchain.py")
# The compile targets are read by the suite's configuration as well (``[[suites]] targets``), so the
# module lives on that floor; it imports nothing of roofwatch and is copied in beside the plugin.
TARGETS_MODULE = Path(targets.__file__)


def install_plugin(scratch: Path) -> Path:
    """Copy the plugin package under ``scratch``; the folder to add to the suite's PYTHONPATH."""
    root = scratch / "plugins"
    package = root / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    source = Path(__file__).parent
    for name in SANDBOX_MODULES:
        shutil.copyfile(source / name, package / name)
    shutil.copyfile(TARGETS_MODULE, package / "targets.py")
    return root


def with_plugin_path(env: dict[str, str], root: Path) -> dict[str, str]:
    """``env`` with the plugin folder after the worktree on PYTHONPATH (the tree's packages win)."""
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join([*paths, str(root)])}
