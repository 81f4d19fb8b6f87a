"""What device this worker measures on, and the fingerprint that makes series comparable.

Probed without importing torch (NVML for NVIDIA GPUs, /proc/cpuinfo otherwise) so a worker
can register itself before any suite runs. Library versions come from package metadata.
"""

from __future__ import annotations

import hashlib
import platform
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.errors import NvmlUnavailable


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return re.sub(r"\s+", " ", match.group(1)).strip() if match else platform.machine()


def fingerprint(info: DeviceInfo) -> str:
    """Hash of what must match for timings to be comparable.

    Not the UUID or host: two H200s with the same driver, CUDA, clocks and power limit
    measure the same series. Any of these changing starts a new epoch of every series.
    """
    parts = [
        info.device_class, info.driver, info.cuda, info.torch_version, info.triton_version,
        f"{info.sm_clock_mhz or ''}", f"{info.power_limit_w or ''}",
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:32]


@contextmanager
def nvml_session() -> Iterator[Any]:
    """The ``pynvml`` module, initialised for the block and shut down after it, however it ends.

    The one way the worker side opens NVML (this probe, ``roofwatch doctor``'s check); the
    harness's timer keeps its own, open for the timer's life, as the harness imports nothing of
    the ground floor.
    """
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        raise NvmlUnavailable("nvidia-ml-py is not installed (no GPU clocks, temperatures or device names)",
                              "pip install nvidia-ml-py") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"no NVIDIA driver answered: {exc}",
                              "install the NVIDIA driver (nvidia-smi must work)") from None
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def _probe_nvidia(index: int) -> DeviceInfo | None:
    try:
        with nvml_session() as nvml:
            try:
                if index >= nvml.nvmlDeviceGetCount():
                    return None
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                cuda = nvml.nvmlSystemGetCudaDriverVersion_v2()
                return DeviceInfo(
                    device_class=_text(nvml.nvmlDeviceGetName(handle)),
                    fingerprint="",
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    driver=_text(nvml.nvmlSystemGetDriverVersion()),
                    cuda=f"{cuda // 1000}.{cuda % 1000 // 10}",
                    sm_clock_mhz=float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
                    power_limit_w=nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
                )
            except nvml.NVMLError:  # a query this driver or device does not answer
                return None
    except NvmlUnavailable:
        return None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def probe(gpu_index: int = 0) -> DeviceInfo:
    """This host's device: GPU ``gpu_index`` when NVML sees one, else the CPU."""
    info = _probe_nvidia(gpu_index) or DeviceInfo(device_class=f"CPU {_cpu_model()}", fingerprint="")
    info.torch_version = _version("torch")
    info.triton_version = _version("triton")
    info.hostname = socket.gethostname()
    info.fingerprint = fingerprint(info)
    return info


