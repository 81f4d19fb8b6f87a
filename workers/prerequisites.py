"""What this machine has and lacks for measuring, found before anything is checked out.

Each check is a ``Prerequisite``: what it is, whether it is here, what was found, and the one
command that fixes it. ``blocking`` ones (git, the sandbox) stop ``roofwatch run`` before the
first commit is checked out: without them every commit would be checked out, run and recorded
as errored for the same reason. The others (a GPU, NVML) only say what a mode cannot do here.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache

from roofwatch.common.device import nvml_session
from roofwatch.common.errors import NvmlUnavailable, SandboxUnavailable
from roofwatch.common.settings import WorkerSettings
from roofwatch.workers import bubblewrap


@dataclass(frozen=True)
class Prerequisite:
    name: str
    ok: bool
    found: str  # what was found, or why it is missing
    fix: str = ""  # the one command (or setting) that fixes it; "" when ok
    blocking: bool = False  # ``roofwatch run`` cannot measure anything without it


def git() -> Prerequisite:
    path = shutil.which("git")
    if path is None:
        return Prerequisite("git", False, "git is not on PATH", "apt-get install git", blocking=True)
    version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    return Prerequisite("git", True, version or path, blocking=True)


def sandbox(settings: WorkerSettings) -> Prerequisite:
    if settings.sandbox == "unconfined":
        return Prerequisite("sandbox", True, "off (ROOFWATCH_SANDBOX=unconfined): suites run unconfined",
                            blocking=True)
    try:
        bubblewrap.check(settings.bwrap_path)
    except SandboxUnavailable as exc:
        return Prerequisite(
            "sandbox (bubblewrap)", False, str(exc),
            "apt-get install bubblewrap   (or, for code you trust only: export ROOFWATCH_SANDBOX=unconfined)",
            blocking=True)
    return Prerequisite("sandbox (bubblewrap)", True, bubblewrap.resolve(settings.bwrap_path), blocking=True)


def nvml() -> Prerequisite:
    try:
        with nvml_session() as session:
            count = session.nvmlDeviceGetCount()
            driver = session.nvmlSystemGetDriverVersion()
    except NvmlUnavailable as exc:
        return Prerequisite("NVML", False, str(exc), exc.remedy)
    return Prerequisite("NVML", True, f"driver {driver!s}, {count} GPU(s)")


@lru_cache(maxsize=1)
def gpu() -> Prerequisite:
    """A CUDA device torch can use (kernels run on it; without one they run on the CPU or interpreter)."""
    try:
        import torch
    except ImportError:
        return Prerequisite("GPU (torch)", False, "torch is not installed", "pip install torch")
    if torch.cuda.is_available():
        return Prerequisite("GPU (torch)", True, f"{torch.cuda.get_device_name(0)} (torch {torch.__version__})")
    return Prerequisite("GPU (torch)", False, f"no CUDA device visible to torch {torch.__version__}: "
                        "benchmarks time the CPU, Triton kernels run in the interpreter",
                        "run on a host with an NVIDIA GPU and a CUDA build of torch")


def for_running(settings: WorkerSettings) -> list[Prerequisite]:
    """The checks ``roofwatch run`` needs to pass before it checks out a commit."""
    return [git(), sandbox(settings)]


def missing(checks: list[Prerequisite]) -> list[Prerequisite]:
    return [check for check in checks if check.blocking and not check.ok]


def for_suites(needing_gpu: list[str]) -> list[Prerequisite]:
    """A GPU, blocking, when any of the suites about to run says it needs one (``gpu = true``)."""
    if not needing_gpu:
        return []
    found = gpu()
    return [Prerequisite(f"GPU for suite(s) {', '.join(needing_gpu)} (gpu = true)", found.ok, found.found,
                         found.fix, blocking=True)]
