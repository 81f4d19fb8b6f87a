"""One way the worker side opens NVML: the device probe and ``roofwatch doctor`` read it alike.

No GPU here, so ``pynvml`` is a stand-in module with the same names; each case decides on what
the stand-in is told to do, and every opened session must be shut down.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from roofwatch.common import device
from roofwatch.common.device import nvml_session
from roofwatch.common.errors import NvmlUnavailable
from roofwatch.workers import prerequisites


class NVMLError(Exception):
    pass


def _fake(*, init_fails: bool = False, name_fails: bool = False, count: int = 1) -> types.ModuleType:
    module = types.ModuleType("pynvml")
    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def name(_handle: object) -> bytes:
        if name_fails:
            raise NVMLError("Not Supported")
        return b"NVIDIA H200"

    module.__dict__.update(
        NVMLError=NVMLError, NVML_CLOCK_SM=1, calls=calls, nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"), nvmlDeviceGetCount=lambda: count,
        nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}", nvmlSystemGetCudaDriverVersion_v2=lambda: 12080,
        nvmlDeviceGetName=name, nvmlDeviceGetUUID=lambda _h: "GPU-1234", nvmlSystemGetDriverVersion=lambda: "570.86",
        nvmlDeviceGetMaxClockInfo=lambda _h, _c: 1980, nvmlDeviceGetEnforcedPowerLimit=lambda _h: 700_000)
    return module


Install = Callable[[types.ModuleType | None], Any]


@pytest.fixture
def install(monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    def put(module: types.ModuleType | None) -> Any:
        monkeypatch.setitem(sys.modules, "pynvml", module)  # None: "import pynvml" raises ImportError
        return module
    yield put


def test_without_the_package_it_says_what_to_install(install: Install) -> None:
    install(None)
    with pytest.raises(NvmlUnavailable, match="nvidia-ml-py is not installed") as raised, nvml_session():
        pass
    assert raised.value.remedy == "pip install nvidia-ml-py"
    assert device._probe_nvidia(0) is None
    check = prerequisites.nvml()
    assert (check.ok, check.fix) == (False, "pip install nvidia-ml-py")


def test_without_a_driver_it_says_so_and_never_shuts_down_what_did_not_start(install: Install) -> None:
    fake = install(_fake(init_fails=True))
    check = prerequisites.nvml()
    assert not check.ok and "no NVIDIA driver answered: Driver Not Loaded" in check.found
    assert device._probe_nvidia(0) is None
    assert fake.calls == ["init", "init"]


def test_a_device_is_read_and_the_session_always_shut_down(install: Install) -> None:
    fake = install(_fake())
    info = device._probe_nvidia(0)
    assert info is not None
    assert (info.device_class, info.uuid, info.driver, info.cuda, info.sm_clock_mhz, info.power_limit_w) == (
        "NVIDIA H200", "GPU-1234", "570.86", "12.8", 1980.0, 700.0)
    assert device._probe_nvidia(1) is None  # only one GPU
    check = prerequisites.nvml()
    assert check.ok and check.found == "driver 570.86, 1 GPU(s)"
    assert fake.calls == ["init", "shutdown"] * 3


def test_a_query_the_device_does_not_answer_is_no_device_and_still_shuts_down(install: Install) -> None:
    fake = install(_fake(name_fails=True))
    assert device._probe_nvidia(0) is None
    assert fake.calls == ["init", "shutdown"]
