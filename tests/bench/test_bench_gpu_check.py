"""The GPU check's verdicts, on benchmark records shaped like the suites' own."""

from __future__ import annotations

from bench.gpu_check import (
    attention_target,
    matmul_target,
    memory_target,
    noise_target,
    roofline_rows,
    run_to_run_spread,
)
from roofwatch.common.envelope import MeasurementRecord

H200_BW = 4.3e12  # a measured copy bandwidth, bytes/s
H200_FLOPS = {"bf16": 800e12, "fp32": 60e12}


def record(group: str, impl: str, median: float, *, flops: float = 0.0, bytes_: float = 0.0,
           dtype: str = "bf16", name: str | None = None) -> MeasurementRecord:
    return MeasurementRecord(name=name or f"test[{impl}-{group}]", group=group, median=median, iqr=0.0,
                             min=median, mean=median, n=100, flops=flops, bytes=bytes_, dtype=dtype,
                             extra_info={"impl": impl})


def test_memory_bound_kernels_are_judged_at_their_largest_shape() -> None:
    records = [
        record("softmax-4096x4096-bf16", "triton", 100e-6, flops=1e8, bytes_=0.1 * H200_BW * 100e-6),  # small: 10 %
        record("softmax-4096x32000-bf16", "triton", 1e-3, flops=1e9, bytes_=0.9 * H200_BW * 1e-3),  # largest: 90 %
        record("rmsnorm-forward-16384x4096-bf16", "triton", 1e-3, flops=1e9, bytes_=0.88 * H200_BW * 1e-3),
        record("rmsnorm-forward-16384x4096-bf16", "torch", 1e-4, flops=1e9, bytes_=0.99 * H200_BW * 1e-4),
    ]
    target = memory_target(records, H200_BW)
    assert target.met is True and "softmax/bf16 90%" in target.measured and "rmsnorm/bf16 88%" in target.measured
    records.append(record("swiglu-4096x14336-bf16", "triton", 1e-3, flops=1e9, bytes_=0.6 * H200_BW * 1e-3))
    assert memory_target(records, H200_BW).met is False


def test_matmul_is_held_to_cublas_on_the_same_shape() -> None:
    records = [
        record("matmul-4096x4096x4096-bf16", "triton", 1.05e-3), record("matmul-4096x4096x4096-bf16", "torch", 1.0e-3),
        record("matmul-8192x8192x8192-bf16", "triton", 8.0e-3), record("matmul-8192x8192x8192-bf16", "torch", 7.6e-3),
        record("matmul-64x64x64-bf16", "triton", 1.0), record("matmul-64x64x64-bf16", "torch", 1e-6),  # not a target shape
    ]
    target = matmul_target(records)
    assert target.met is True and "95%" in target.measured
    records[0] = record("matmul-4096x4096x4096-bf16", "triton", 1.2e-3)
    assert matmul_target(records).met is False
    assert matmul_target([]).met is None


def test_attention_target_counts_only_long_bf16_head_dim_128() -> None:
    flops = 4 * 4 * 32 * 4096**2 * 128 / 2
    records = [
        record("attention-4x32x4096x128-causal-bf16", "triton", flops / 500e12, flops=flops),
        record("attention-16x32x1024x128-full-bf16", "triton", 1.0, flops=1.0),  # seq 1k: not a target
        record("attention-4x32x4096x64-full-bf16", "triton", 1.0, flops=1.0),  # head dim 64: not a target
    ]
    assert attention_target(records).met is True
    records.append(record("attention-1x32x16384x128-full-bf16", "triton", flops / 400e12, flops=flops))
    assert attention_target(records).met is False


def test_noise_is_the_spread_of_medians_between_two_processes() -> None:
    first = [record(f"k-{i}", "triton", 1.0, name=f"t{i}") for i in range(10)]
    second = [record(f"k-{i}", "triton", 1.0 + 0.001 * i, name=f"t{i}") for i in range(10)]
    spread = run_to_run_spread(first, second)
    assert len(spread) == 10 and spread[0] == 0.0 and abs(spread[-1] - 0.009 / 1.009) < 1e-12
    assert noise_target(spread).met is True  # p50 ~0.5 % of 1.005 → within
    assert noise_target([0.01] * 5).met is False
    assert noise_target([]).met is None


def test_a_result_above_the_roof_is_shown_as_a_harness_error() -> None:
    rows = roofline_rows([record("copy-268435456-bf16", "triton", 1e-4, flops=0.0, bytes_=2 * H200_BW * 1e-4)],
                         H200_BW, H200_FLOPS)
    assert rows[0][4].startswith("harness error")
    rows = roofline_rows([record("copy-268435456-bf16", "triton", 1e-4, flops=0.0, bytes_=0.5 * H200_BW * 1e-4),
                          record("copy-268435456-bf16", "torch", 1e-4, flops=0.0, bytes_=1.0)], H200_BW, H200_FLOPS)
    assert [row[4] for row in rows] == ["50.0%"]  # baselines are not listed against the roof
