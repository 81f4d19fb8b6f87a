"""The import layers of DESIGN §2 hold on the graph the code really imports, each contract fails on a planted
violation, no part imports another in a cycle, types check and lint is clean."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_layer_contracts_are_kept() -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _graph(root: Path) -> dict[str, Any]:
    """``tests/support/import_graph.py``'s report on the tree at ``root``, read in a fresh interpreter."""
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "import_graph.py")], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_guard_reads_the_graph_the_code_imports() -> None:
    """By the names the code imports (``roofwatch.service.…``), imports inside functions included."""
    report = _graph(ROOT)
    assert report["modules"] > 150 and report["imports"] > 500
    edges = {tuple(edge) for edge in report["part_edges"]}
    assert ("service.cli", "service.core") in edges and ("dashboard", "service.records") in edges
    assert ("service.api", "dashboard") in edges  # the API mounts the dashboard …
    assert ("dashboard", "service.api") not in edges  # … which stands below it
    # the ground floor: both sides stand on it, it stands on neither, and service.core needs no worker
    assert ("workers", "common") in edges and ("service.core", "common") in edges
    assert not [edge for edge in edges if edge[0] == "common"]
    assert ("service.core", "workers") not in edges
    # the neutral floors: workers and service both stand on them, the workers on nothing of the service
    assert {("workers", "ab"), ("service.records", "ab"), ("workers", "git"), ("service.flows", "git"),
            ("workers", "suite_config"), ("service.records", "suite_config"), ("workers", "result_files"),
            ("service.flows", "result_files")} <= edges
    assert not [edge for edge in edges if edge[0] == "workers" and edge[1].startswith("service")]
    # records hold no git, and only the CLI reaches a worker module
    assert not [edge for edge in edges if edge[0] == "service.records" and edge[1] in ("git", "workers")]
    assert {edge[0] for edge in edges if edge[1] == "workers"} <= {"service.cli", "harness", "kernels", "suites"}


def test_no_import_cycle_between_the_parts_or_inside_service_and_workers() -> None:
    report = _graph(ROOT)
    assert report["part_cycles"] == []
    assert report["service_cycles"] == []
    assert report["workers_cycles"] == []


def _planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the tree (links resolved, as installed) with ``line`` added to ``module``'s file."""
    root = tmp_path / "tree"
    root.mkdir()
    for name in ("roofwatch", "kernels", "suites"):
        shutil.copytree(ROOT / name, root / name, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "static", "templates", "golden"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    path = root / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + "\n\n" + line + "\n")
    return root


# One planted import per contract of pyproject.toml, each a violation of that contract alone.
PLANTED = [
    ("service reads top-down", "roofwatch.service.api.json_api", "import roofwatch.service.cli.main"),
    ("the harness a kernel repository imports stands alone", "roofwatch.tolerances",
     "import roofwatch.service.core.config"),
    # Not even the pure analysis: what workers and service share stands on a neutral floor.
    ("workers import nothing of the service", "roofwatch.workers.activity", "import roofwatch.service.analysis.compare"),
    ("the A/B floor stands on the ground floor alone", "roofwatch.ab.fdr", "import kernels"),
    ("records hold no git", "roofwatch.service.records.series", "import roofwatch.git.checkout"),
    # A flow sends a worker's task by name; importing the task module is the mistake this catches.
    ("only the CLI imports a worker module", "roofwatch.service.flows.dispatch", "import roofwatch.workers.tasks"),
    # A lazy import inside a command, as cli/main.py's used to be.
    ("the CLI records and reads through flows", "roofwatch.service.cli.consoles",
     "def _planted():\n    from roofwatch.service.records import queries"),
    ("the neutral floors stand on the ground floor", "roofwatch.result_files.uploads",
     "import roofwatch.service.core.config"),
    ("the analysis is pure", "roofwatch.service.analysis.lifecycle", "import roofwatch.service.core.db"),
    ("the dashboard reads through service.core, service.records", "roofwatch.dashboard.reads",
     "from roofwatch.service.api import deps"),
    ("the ground floor stands alone", "roofwatch.common.errors", "import roofwatch.roofline"),
    ("service.core stands on the ground floor", "roofwatch.service.core.config", "import roofwatch.workers.activity"),
    # Inside a function, as a lazy import would be: the graph has those too.
    ("torch and triton stay in the harness", "roofwatch.service.cli.calibration", "def _planted():\n    import torch"),
]


def test_every_contract_is_planted_once() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert sorted(c["name"] for c in contracts) == sorted(
        next(c["name"] for c in contracts if c["name"].startswith(prefix)) for prefix, _, _ in PLANTED)


@pytest.mark.parametrize(("contract", "module", "line"), PLANTED, ids=[p[0] for p in PLANTED])
def test_a_planted_import_breaks_its_contract(tmp_path: Path, contract: str, module: str, line: str) -> None:
    root = _planted(tmp_path, module, line)
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports"), "--no-cache"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    # "… BROKEN", or "… BROKEN (2 ignored imports)" for a contract with ignore_imports.
    broken = [line for line in done.stdout.splitlines() if re.search(r" BROKEN( \(.*\))?$", line)]
    assert len(broken) == 1 and " ".join(done.stdout.split()).count(f"{contract}") >= 1, done.stdout[-3000:]
    assert f"Contracts: {len(PLANTED) - 1} kept, 1 broken." in done.stdout


def test_a_planted_cycle_between_parts_is_found(tmp_path: Path) -> None:
    root = _planted(tmp_path, "roofwatch.dashboard.reads", "from roofwatch.service.api import app")
    assert ["dashboard", "service.api"] in _graph(root)["part_cycles"]


def test_types_check() -> None:
    """mypy over roofwatch, service, workers, dashboard and bench (configured in pyproject.toml)."""
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_lint() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-6000:]
