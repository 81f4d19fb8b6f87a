"""What the seeded history is made of: kernels with their work per call, GPUs with measured roofs.

Everything here is plain data and arithmetic (no database), so the seed stays a thin COPY layer.
The shapes are LLM-sized, the work per call follows each op's usual FLOP/byte count, and the
times are placed under the roofline (a fraction of the attainable time plus a launch overhead),
so achieved FLOP/s, bandwidth and roofline fractions are consistent with the devices' peaks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
DTYPES = tuple(ELEMENT_BYTES)
# "" is the kernel under test; the others are the baselines a suite times beside it.
IMPLS = ("", "torch", "torch.compile")
# Mean fraction of the roofline each implementation reaches, and its fixed cost per call (s).
IMPL_EFFICIENCY = {"": 0.72, "torch": 0.55, "torch.compile": 0.64}
IMPL_OVERHEAD_S = {"": 3e-6, "torch": 6e-6, "torch.compile": 9e-6}

Work = Callable[[tuple[int, ...], int], tuple[float, float]]  # (shape, element bytes) -> (flops, bytes)


def _rows(flops_per: float, tensors: float) -> Work:
    """An op over an (m, n) tensor: ``flops_per`` FLOPs per element, ``tensors`` full tensors moved."""
    return lambda s, e: (flops_per * s[0] * s[1], tensors * s[0] * s[1] * e)


def _matmul(s: tuple[int, ...], e: int) -> tuple[float, float]:
    m, n, k = s
    return 2.0 * m * n * k, float((m * k + k * n + m * n) * e)


def _attention(s: tuple[int, ...], e: int) -> tuple[float, float]:
    batch, heads, seq, dim = s
    return 4.0 * batch * heads * seq * seq * dim, 4.0 * batch * heads * seq * dim * e


def _rope(s: tuple[int, ...], e: int) -> tuple[float, float]:
    tokens, heads, dim = s
    return 6.0 * tokens * heads * dim, 2.0 * tokens * heads * dim * e + tokens * dim * 4


def _adam(s: tuple[int, ...], e: int) -> tuple[float, float]:
    (numel,) = s
    # param and grad in the dtype, both fp32 moments; param and moments are written back.
    return 15.0 * numel, numel * (3 * e + 4 * 4.0)


Shape = tuple[int, ...]
ROWS: list[Shape] = [(4096, 4096), (4096, 8192), (8192, 4096), (16384, 4096), (2048, 12288),
        (4096, 14336), (1024, 16384), (32768, 2048), (8192, 8192), (512, 1024)]
VOCAB: list[Shape] = [(4096, 32000), (2048, 32000), (1024, 50304), (4096, 50304), (1024, 128256),
         (2048, 128256), (512, 151936), (8192, 32000), (256, 256000), (64, 32000)]

OPS: dict[str, tuple[Work, list[Shape]]] = {
    "softmax": (_rows(5, 2), ROWS),
    "rmsnorm": (_rows(4, 2), ROWS),
    "layernorm": (_rows(8, 2), ROWS),
    "gelu": (_rows(10, 2), ROWS),
    "silu_mul": (_rows(5, 3), ROWS),
    "add": (_rows(1, 3), ROWS),
    "transpose": (_rows(0, 2), ROWS),  # no FLOPs: only the memory roof applies
    "cross_entropy": (_rows(6, 1), VOCAB),
    "matmul": (_matmul, [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (4096, 4096, 14336),
                         (1024, 4096, 4096), (16, 4096, 4096), (128, 8192, 8192), (2048, 2048, 2048),
                         (8192, 1024, 8192), (512, 12288, 4096)]),
    "attention": (_attention, [(1, 32, 4096, 128), (4, 32, 2048, 128), (8, 16, 1024, 64), (1, 64, 8192, 128),
                               (2, 40, 4096, 128), (16, 12, 512, 64), (1, 32, 16384, 128), (4, 8, 4096, 256),
                               (32, 32, 256, 128), (2, 24, 8192, 128)]),
    "rope": (_rope, [(4096, 32, 128), (8192, 32, 128), (16384, 8, 128), (2048, 64, 128), (4096, 40, 128),
                     (1024, 16, 64), (32768, 32, 128), (8192, 8, 256), (512, 32, 128), (4096, 128, 64)]),
    "fused_adam": (_adam, [(1 << 20,), (1 << 22,), (1 << 24,), (1 << 26,), (7_000_000,), (70_000_000,),
                           (125_000_000,), (350_000,), (50_000_000,), (1 << 28,)]),
}


@dataclass(frozen=True)
class Spec:
    """One benchmark series: op × shape × dtype × implementation, with its work per call."""

    op: str
    shape: tuple[int, ...]
    dtype: str
    impl: str
    flops: float
    bytes: float

    @property
    def shape_text(self) -> str:
        return "x".join(str(d) for d in self.shape)

    @property
    def params(self) -> str:
        """pytest's parametrize id, as pytest-benchmark reports it in ``param``."""
        return f"{self.impl or 'triton'}-{self.shape_text}-{self.dtype}"

    @property
    def name(self) -> str:
        return f"test_{self.op}[{self.params}]"


def catalogue() -> list[Spec]:
    """Every series the workload can hold (1,080), in a stable order."""
    specs: list[Spec] = []
    for op, (work, shapes) in OPS.items():
        for shape in shapes:
            for dtype in DTYPES:
                flops, moved = work(shape, ELEMENT_BYTES[dtype])
                specs.extend(Spec(op, shape, dtype, impl, flops, moved) for impl in IMPLS)
    return specs


def pick(count: int, rng: np.random.Generator) -> list[Spec]:
    """``count`` series spread over every op, dtype and implementation (a random subset, then sorted)."""
    specs = catalogue()
    if count > len(specs):
        raise ValueError(f"the workload has {len(specs)} distinct benchmarks; asked for {count}")
    chosen = sorted(rng.choice(len(specs), size=count, replace=False).tolist())
    return [specs[i] for i in chosen]


@dataclass(frozen=True)
class GPU:
    """A device of the fleet, with the roofs ``roofwatch calibrate`` would have measured."""

    hostname: str
    uuid: str
    peak_bandwidth: float
    peak_flops: dict[str, float]
    sm_clock_mhz: float


DEVICE_CLASS = "NVIDIA H100 80GB HBM3"
# Two hosts of one class: CI routes a run to whichever is free, and their measured roofs differ a little.
FLEET = (
    GPU("gpu-runner-01", "GPU-5e1c0b9e-2f44-4c4e-9a51-0d3b2a7f6c01", 3.02e12,
        {"bf16": 7.12e14, "fp16": 7.15e14, "fp32": 5.02e13}, 1980.0),
    GPU("gpu-runner-02", "GPU-a93d7e14-8b2c-41f0-bc7e-6f1d9e0a4c02", 2.97e12,
        {"bf16": 6.98e14, "fp16": 7.01e14, "fp32": 4.95e13}, 1980.0),
)


def roof_seconds(spec: Spec, gpu: GPU) -> float:
    """The shortest time either roof allows for one call: what a roofline fraction of 1 would take."""
    return max(spec.flops / gpu.peak_flops[spec.dtype], spec.bytes / gpu.peak_bandwidth)


def fastest_roof(spec: Spec, fleet: tuple[GPU, ...]) -> float:
    return min(roof_seconds(spec, gpu) for gpu in fleet)


def typical_seconds(spec: Spec, fleet: tuple[GPU, ...], rng: np.random.Generator) -> float:
    """A plausible median for this series before any change: under the roof, plus launch overhead."""
    efficiency = float(np.clip(rng.normal(IMPL_EFFICIENCY[spec.impl], 0.1), 0.2, 0.93))
    return fastest_roof(spec, fleet) / efficiency + IMPL_OVERHEAD_S[spec.impl]


def noise_sigma(seconds: float, rng: np.random.Generator) -> float:
    """Relative run-to-run noise: short kernels (launch-bound) are noisier than long ones."""
    short = 1.0 / (1.0 + math.log10(max(seconds, 1e-6) / 1e-6))
    return float(0.004 + 0.03 * short * rng.uniform(0.5, 1.5))
