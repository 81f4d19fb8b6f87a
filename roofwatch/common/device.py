"""What device this worker measures on, and the fingerprint that makes series comparable.

Probed without importing torch (NVML for NVIDIA GPUs, /proc/cpuinfo otherwise) so a worker
can register itself before any suite runs. Library versions come from package metadata.
"""

from __future__ import annotations

import hashlib
import platform
import re
import socket
from importlib import metadata
from pathlib import Path

from roofwatch.common.envelope import DeviceInfo


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


def _probe_nvidia(index: int) -> DeviceInfo | None:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        if index >= pynvml.nvmlDeviceGetCount():
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        info = DeviceInfo(
            device_class=_text(pynvml.nvmlDeviceGetName(handle)),
            fingerprint="",
            uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
            driver=_text(pynvml.nvmlSystemGetDriverVersion()),
            cuda=f"{cuda // 1000}.{cuda % 1000 // 10}",
            sm_clock_mhz=float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            power_limit_w=pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        )
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()
    return info


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


