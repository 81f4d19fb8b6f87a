"""A device a repository models instead of the host it runs on: ``[tool.roofwatch.device]``.

Some kernels are timed on a model of an accelerator rather than on the accelerator itself: a
simulator, an emulator, or (roofwatch's demo) a device model that sleeps for as long as the
declared traffic would take. Their roofs are the model's, not the host's: held to the host's
DRAM, a modelled 250 MB/s device reads 0.1 % of roofline and its roofline says nothing. A
repository that declares the device it models is measured on that device::

    [tool.roofwatch.device]
    name = "demo accelerator"
    bandwidth = 2.5e8            # bytes/s
    flops = { fp32 = 1.0e9 }     # FLOP/s by dtype (fp64, fp32, tf32, fp16, bf16, fp8)

Its runs are stored under a device of that name, with the declared roofs as its peaks
(``peaks_source = "modelled"``), and a fingerprint of the host's and the model's: a change of
either starts a new epoch of every series, as a new driver does on a real GPU.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.errors import SuiteConfigError
from roofwatch.suite_config.declared import roofwatch_table, stored_or_own

DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


class ModelledDevice(BaseModel, extra="forbid"):
    name: str = Field(min_length=1, max_length=80)
    bandwidth: float = Field(gt=0)
    flops: dict[str, float] = Field(min_length=1)

    @field_validator("bandwidth")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("bandwidth must be a finite number of bytes/s")
        return value

    @field_validator("flops")
    @classmethod
    def _known_dtypes(cls, value: dict[str, float]) -> dict[str, float]:
        for dtype, peak in value.items():
            if dtype not in DTYPES:
                raise ValueError(f"unknown dtype {dtype!r} in flops (known: {', '.join(DTYPES)})")
            if not (math.isfinite(peak) and peak > 0):
                raise ValueError(f"flops.{dtype} must be a positive number of FLOP/s")
        return value

    @property
    def device_class(self) -> str:
        return f"{self.name} (modelled)"


def declared(data: dict[str, object]) -> ModelledDevice | None:
    """``[tool.roofwatch.device]`` of a parsed TOML document, or None when absent."""
    table = roofwatch_table(data)
    if table is None or "device" not in table:
        return None
    try:
        return ModelledDevice.model_validate(table["device"])
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'device'}: {e['msg']}" for e in exc.errors())
        raise SuiteConfigError(f"[tool.roofwatch.device] {problems}") from exc


def declared_for(tree: Path, stored_toml: str) -> ModelledDevice | None:
    """The stored config's device when it declares one, else the commit's."""
    return stored_or_own(tree, stored_toml, declared)


def on_model(host: DeviceInfo, model: ModelledDevice) -> DeviceInfo:
    """The device a run of a modelled repository is stored under: the model's name and roofs."""
    parts = [host.fingerprint, model.name, repr(model.bandwidth), *(f"{k}={v!r}" for k, v in sorted(model.flops.items()))]
    return DeviceInfo(
        device_class=model.device_class, fingerprint=hashlib.sha256("|".join(parts).encode()).hexdigest()[:32],
        driver=host.driver, cuda=host.cuda, torch_version=host.torch_version, triton_version=host.triton_version,
        hostname=host.hostname, peak_bandwidth=model.bandwidth, peak_flops=dict(model.flops),
        peaks_source="modelled",
    )


def device_for(host: DeviceInfo, tree: Path, stored_toml: str) -> DeviceInfo:
    """``host``, or the modelled device the tree's (or the stored) config declares."""
    model = declared_for(tree, stored_toml)
    return host if model is None else on_model(host, model)
