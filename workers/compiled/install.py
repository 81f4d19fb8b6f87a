"""Put the compile plugin where a sandboxed suite can import it.

Its modules are copied into the suite's scratch folder as the package ``roofwatch_compiled``
(``workers/plugin_packages.py``). The name cannot clash with the repository's own ``workers``
package, roofwatch's included.
"""

from __future__ import annotations

from pathlib import Path

from roofwatch.suite_config import targets
from roofwatch.workers.plugin_packages import copy_package

PACKAGE = "roofwatch_compiled"
PLUGIN = f"{PACKAGE}.plugin"
# What runs inside the suite's process; artifacts_file and install stay with the worker.
SANDBOX_MODULES = ("__init__.py", "plugin.py", "launches.py", "sass.py", "toolchain.py")
# The compile targets are read by the suite's configuration as well (``[[suites]] targets``), so the
# module lives on that floor; it imports nothing of roofwatch and is copied in beside the plugin.
TARGETS_MODULE = Path(targets.__file__)


def install_plugin(scratch: Path) -> Path:
    """Copy the plugin package under ``scratch``; the folder to add to the suite's PYTHONPATH."""
    source = Path(__file__).parent
    return copy_package(scratch / "plugins", PACKAGE,
                        [*((source / name, name) for name in SANDBOX_MODULES), (TARGETS_MODULE, "targets.py")])
