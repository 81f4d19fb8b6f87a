"""Running the real ``roofwatch`` console script in a subprocess with a chosen environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from filelock import FileLock

ROOFWATCH = Path(sys.executable).parent / "roofwatch"

# Packages installed beside roofwatch bring pytest plugins that load in every suite process the
# tests start, hundreds of times over, and that no suite here needs: schemathesis and hypothesis
# (the test tools) cost about 2 s of CPU per process, anyio (through httpx) and platformdirs
# another 0.35 s, half of what remains. roofwatch passes this to suites as a host setting would.
SUITE_PYTEST_ADDOPTS = "-p no:schemathesis -p no:hypothesispytest -p no:anyio -p no:platformdirs"
# One BLAS/OpenMP thread per suite process, as a host running several workers per machine would
# set: with three test workers on two cores, a threaded matmul spins waiting for its own threads,
# which burns CPU and turns a few milliseconds into tens.
SUITE_THREADS = {"OMP_NUM_THREADS": "1"}


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a roofwatch process of a test's own: none of this process's
    ``ROOFWATCH_*`` settings, the test tools' pytest plugins kept out of its suites, one thread
    per suite, then ``env``."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")}
    full["ROOFWATCH_SUITE_PYTEST_ADDOPTS"] = SUITE_PYTEST_ADDOPTS
    return full | SUITE_THREADS | (env or {})


def pytest_env(**extra: str) -> dict[str, str]:
    """The environment for a pytest a test starts itself, without the test tools' plugins."""
    return {**os.environ, "PYTEST_ADDOPTS": SUITE_PYTEST_ADDOPTS, **SUITE_THREADS, **extra}


def roofwatch(args: list[str], env: dict[str, str], check: bool = True,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # A first run calibrates its device (seconds, a GiB copy); tests that want roofs ask for it.
    full_env = child_env({"ROOFWATCH_CALIBRATE": "0", **env})
    full_env["COLUMNS"] = "200"  # wide tables, so assertions see whole words
    done = subprocess.run([str(ROOFWATCH), *args], env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"roofwatch {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def built_once(tmp_path_factory: Any, worker_id: str, name: str, build: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """``build(folder)``'s JSON-able result, built by the first pytest-xdist worker that asks.

    A module fixture is set up again in every worker that runs one of its module's tests; for
    one that measures a whole history, the others wait on a lock and read the first one's
    result (pytest-xdist's recipe). Without xdist it is simply built.
    """
    if worker_id == "master":
        return build(tmp_path_factory.mktemp(name))
    folder = tmp_path_factory.getbasetemp().parent / name  # this session's, shared by its workers
    with FileLock(str(folder) + ".lock"):
        result = folder / "result.json"
        if result.exists():
            return json.loads(result.read_text())  # type: ignore[no-any-return]
        folder.mkdir(exist_ok=True)
        value = build(folder)
        result.write_text(json.dumps(value))
        return value


def completed(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """A finished command as JSON-able data, for ``built_once``."""
    return {"args": done.args, "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def as_completed(data: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(data["args"], data["returncode"], data["stdout"], data["stderr"])
