"""Calibration: measuring a device's roofs, storing them, and holding measurements to them.

The measurements run for real on this machine's CPU (small sizes); the storing goes through
the real CLI, the real ``register_device`` task and real ingest, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import select
from support.environment import _reset_caches
from support.tests_support import roofwatch
from typer.testing import CliRunner

from roofwatch.common.envelope import ENVELOPE_VERSION, DeviceInfo, Envelope
from roofwatch.roofline import ROOF_MARGIN, RooflineError, datasheet_peaks, roof_dtype, roofline_fraction
from roofwatch.service.core.db import downgrade, migrate, session_scope
from roofwatch.service.core.models import Commit, Device, Measurement, Repository, Run
from roofwatch.service.records.ingest import ingest_envelope, parse_envelope, upsert_device
from roofwatch.service.records.roofline import bound_of, peaks_for, roof_of
from roofwatch.service.records.runs import create_run
from roofwatch.timing import StoppingRule, WarmUp
from roofwatch.workers import calibrate as calibration_module
from roofwatch.workers.cache_sizes import cpu_caches
from roofwatch.workers.calibrate import (
    Calibration,
    CalibrationError,
    CalibrationPlan,
    calibrate,
    calibrate_in_subprocess,
    calibrated,
    load_cached,
    peak_rows,
    usable_caches,
    with_peaks,
)

SMALL_PLAN = CalibrationPlan(
    copy_bytes=4 << 20,
    matmul_n={"fp32": 128, "bf16": 64, "tf32": 64, "fp8": 64},
    rule=StoppingRule(min_samples=3, max_samples=50, max_time_s=0.05),
    warmup=WarmUp(time_s=0.0, max_calls=1),
)

H200_PEAKS = {"fp32": 51e12, "tf32": 380e12, "bf16": 760e12, "fp16": 770e12, "fp8": 1300e12}
H200_BW = 4.3e12


def _calibration(**changes: object) -> Calibration:
    base = dict(device="NVIDIA H200", bandwidth=H200_BW, flops=dict(H200_PEAKS),
                sizes={"copy_bytes": 1 << 30}, timer="cuda_event", seconds=12.0)
    return Calibration(**{**base, **changes})  # type: ignore[arg-type]


def _h200(fingerprint: str = "h200-fp", **peaks: object) -> DeviceInfo:
    return DeviceInfo(device_class="NVIDIA H200", fingerprint=fingerprint, driver="575.57", cuda="12.9",
                      **peaks)  # type: ignore[arg-type]


# --- measuring --------------------------------------------------------------------------------


def test_cpu_calibration_measures_positive_finite_peaks() -> None:
    measured = calibrate("cpu", SMALL_PLAN)

    assert measured.device == "cpu" and measured.timer == "host"
    assert math.isfinite(measured.bandwidth) and measured.bandwidth > 0
    assert set(measured.flops) == {"fp32", "bf16"}
    assert all(math.isfinite(v) and v > 0 for v in measured.flops.values())
    # No tensor cores, no fp8 units on a CPU: said, not faked.
    assert set(measured.skipped) == {"tf32", "fp8"}
    assert measured.sizes == {"copy_bytes": 4 << 20, "matmul_fp32": 128, "matmul_bf16": 64}
    copy = measured.details["copy"]
    assert copy["n"] >= 3 and copy["best_s"] <= copy["median_s"]
    assert measured.bandwidth == pytest.approx(2 * (4 << 20) / copy["best_s"])
    assert Calibration.from_json(measured.to_json()) == measured


def test_a_gpu_that_is_not_there_is_a_calibration_error() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(CalibrationError, match="no CUDA device"):
        calibrate("cuda:0", SMALL_PLAN)


def test_the_worker_path_reports_a_failed_calibration_as_an_error() -> None:
    """``python -m roofwatch.workers.calibrate`` in a child process, as a worker runs it."""
    with pytest.raises(CalibrationError, match="no CUDA device cuda:97"):
        calibrate_in_subprocess(gpu=97, timeout_s=300)


def test_module_entry_point_prints_the_calibration_as_json(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(calibration_module, "CPU_PLAN", SMALL_PLAN)
    assert calibration_module.main([]) == 0
    printed = Calibration.from_json(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed.device == "cpu" and printed.flops["fp32"] > 0


def test_unusable_calibration_json_is_refused() -> None:
    with pytest.raises(CalibrationError):
        Calibration.from_json("{not json")
    with pytest.raises(CalibrationError):
        Calibration.from_json(_calibration(bandwidth=0.0).to_json())
    with pytest.raises(CalibrationError):
        Calibration.from_json(_calibration(flops={"fp32": float("nan")}).to_json())


def test_table_rows_compare_with_the_datasheet() -> None:
    rows = peak_rows(_calibration(), datasheet_peaks("NVIDIA H200"))
    assert rows[0] == ("DRAM bandwidth", "4.3 TB/s", "4.8 TB/s", "90%")
    assert ("bf16 matmul", "760 TFLOP/s", "989 TFLOP/s", "77%") in rows
    cpu = peak_rows(_calibration(device="cpu", bandwidth=3.2e9, flops={"fp32": 1.9e10}), None)
    assert cpu == [("DRAM bandwidth", "3.2 GB/s", "—", "—"), ("fp32 matmul", "19 GFLOP/s", "—", "—")]


# --- a worker calibrates once per device and host ---------------------------------------------


def test_worker_calibrates_once_then_uses_its_cache(tmp_path: Path) -> None:
    info = _h200()
    calls: list[int] = []

    def measure() -> Calibration:
        calls.append(1)
        return _calibration()

    first = calibrated(info, tmp_path, measure)
    again = calibrated(info, tmp_path, measure)

    assert calls == [1]  # the restart found the cache
    assert first == again and first.peak_bandwidth == H200_BW and first.peak_flops == H200_PEAKS
    assert load_cached(tmp_path, info.fingerprint) == _calibration()
    other = calibrated(_h200("after-driver-update"), tmp_path, measure)
    assert calls == [1, 1] and other.peak_bandwidth == H200_BW  # a new fingerprint measures again


def test_worker_that_cannot_calibrate_registers_without_peaks(tmp_path: Path) -> None:
    def measure() -> Calibration:
        raise CalibrationError("calibration exited 1: CUDA error: out of memory")

    info = calibrated(_h200(), tmp_path, measure)
    assert info.peak_bandwidth is None and info.peak_flops == {}
    assert load_cached(tmp_path, info.fingerprint) is None
    (tmp_path / "calibration").mkdir(exist_ok=True)
    (tmp_path / "calibration" / "h200-fp.json").write_text("truncated {")
    assert load_cached(tmp_path, "h200-fp") is None  # a torn cache file means "measure again"


# --- envelopes stay compatible ----------------------------------------------------------------


def test_device_info_from_before_the_peaks_still_validates() -> None:
    old = {"device_class": "NVIDIA H200", "fingerprint": "abc", "driver": "550.54", "cuda": "12.4",
           "torch_version": "2.4.0", "triton_version": "3.0.0", "sm_clock_mhz": 1980.0,
           "power_limit_w": 700.0, "l2_bytes": None, "hostname": "gpu-7"}
    info = DeviceInfo.model_validate(old)
    assert info.peak_bandwidth is None and info.peak_flops == {}
    now = datetime.now(UTC).isoformat()
    envelope = parse_envelope({"version": ENVELOPE_VERSION, "run_id": 1, "idempotency_key": "k",
                               "repository": "acme/kernels", "sha": "a" * 40, "status": "succeeded",
                               "device": old, "started_at": now, "finished_at": now})
    assert envelope.device == info


# --- storing and using the peaks --------------------------------------------------------------


@pytest.fixture
def db(database_url: str, roofwatch_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An embedded roofwatch on a migrated database of each kind."""
    if database_url.startswith("postgresql"):
        downgrade(database_url, "base")  # the session's PostgreSQL database is shared between tests
    migrate(database_url)
    monkeypatch.setenv("ROOFWATCH_DATABASE_URL", database_url)
    _reset_caches()
    yield database_url
    _reset_caches()


def _device(fingerprint: str) -> Device:
    with session_scope() as session:
        device = session.exec(select(Device).where(Device.fingerprint == fingerprint)).one()
        session.expunge(device)
        return device


def test_register_device_stores_measured_peaks_and_runs_do_not_erase_them(db: str) -> None:
    from roofwatch.service.tasks import register_device

    device_id = register_device.delay(_h200().model_dump(mode="json")).get()
    row = _device("h200-fp")
    assert (row.peak_bandwidth, row.peak_flops, row.peaks_source) == (None, {}, "none")

    assert register_device.delay(with_peaks(_h200(), _calibration()).model_dump(mode="json")).get() == device_id
    row = _device("h200-fp")
    assert (row.peak_bandwidth, row.peak_flops, row.peaks_source) == (H200_BW, H200_PEAKS, "measured")

    with session_scope() as session:  # a run's envelope carries the device without peaks
        upsert_device(session, _h200())
    assert _device("h200-fp").peak_flops == H200_PEAKS

    recalibrated = _calibration(bandwidth=4.4e12, flops={"fp32": 52e12})
    register_device.delay(with_peaks(_h200(), recalibrated).model_dump(mode="json")).get()
    row = _device("h200-fp")
    assert (row.peak_bandwidth, row.peak_flops) == (4.4e12, {"fp32": 52e12})


def test_measured_peaks_win_over_the_datasheet() -> None:
    measured = Device(fingerprint="x", device_class="NVIDIA H200", peak_bandwidth=H200_BW,
                      peak_flops=H200_PEAKS, peaks_source="measured")
    peaks = peaks_for(measured)
    assert peaks is not None and peaks.source == "measured"
    assert peaks.bandwidth == H200_BW and dict(peaks.flops) == H200_PEAKS
    uncalibrated = peaks_for(Device(fingerprint="y", device_class="NVIDIA H200"))
    assert uncalibrated is not None and uncalibrated.source == "datasheet" and uncalibrated.bandwidth == 4.8e12


def _ingest(measurements: list[dict[str, object]]) -> int:
    """A run on the calibrated H200, its envelope ingested; the run's id."""
    with session_scope() as session:
        repository = Repository(full_name="acme/kernels", clone_url="/nowhere")
        session.add(repository)
        session.flush()
        commit = Commit(repository_id=repository.id, sha="c" * 40)  # type: ignore[arg-type]
        session.add(commit)
        session.flush()
        run = create_run(session, repository, commit, "calibrated-run")
        upsert_device(session, with_peaks(_h200(), _calibration()))
        now = datetime.now(UTC)
        envelope = Envelope(
            run_id=run.id, idempotency_key="calibrated-run", repository="acme/kernels", sha="c" * 40,  # type: ignore[arg-type]
            status="succeeded", device=_h200(), started_at=now, finished_at=now,
            suites=[{"name": "benchmarks", "kind": "benchmark", "status": "passed",  # type: ignore[list-item]
                     "measurements": measurements}],
        )
        ingest_envelope(session, envelope)
        return run.id  # type: ignore[return-value]


def _record(name: str, median: float, flops: float, bytes_: float, dtype: str = "bf16") -> dict[str, object]:
    return {"name": name, "params": "", "samples": [median] * 5, "median": median, "iqr": 0.0,
            "min": median, "mean": median, "n": 5, "flops": flops, "bytes": bytes_, "dtype": dtype}


def test_ingest_holds_measurements_to_the_measured_roofs(db: str) -> None:
    # A copy of 1 GB each way in 0.5 ms: 4.0 TB/s, against the measured 4.3 (not the datasheet's 4.8).
    copy = _record("test_copy[1G]", 5e-4, flops=0.0, bytes_=2e9)
    # A bf16 GEMM at 700 TFLOP/s, against the measured 760 (not the datasheet's 989).
    gemm = _record("test_gemm[8192]", 2 * 8192**3 / 700e12, flops=2 * 8192**3, bytes_=3 * 2 * 8192**2)
    run_id = _ingest([copy, gemm])

    with session_scope() as session:
        rows = {m.benchmark_id: m for m in session.exec(select(Measurement).where(Measurement.run_id == run_id))}
        run = session.get(Run, run_id)
    fractions = sorted(m.roofline_fraction for m in rows.values())  # type: ignore[type-var]
    assert fractions == [pytest.approx(700 / 760), pytest.approx(4.0 / 4.3)]
    assert run is not None and "harness error" not in run.log_excerpt


def test_a_measurement_faster_than_the_roofline_is_a_harness_error(db: str) -> None:
    # 2 GB in 0.4 ms is 5 TB/s: faster than the measured 4.3 TB/s, so the timer or the bytes lie.
    too_fast = _record("test_copy[1G]", 4e-4, flops=0.0, bytes_=2e9)
    run_id = _ingest([too_fast])

    with session_scope() as session:
        [row] = session.exec(select(Measurement).where(Measurement.run_id == run_id)).all()
        run = session.get(Run, run_id)
    assert row.roofline_fraction is None  # never stored as a flattering 1.16
    assert row.achieved_bandwidth == pytest.approx(5e12)
    assert run is not None and "harness error in test_copy[1G]" in run.log_excerpt
    assert "faster than every roof" in run.log_excerpt


# --- the command ------------------------------------------------------------------------------


def test_calibrate_command_prints_and_stores_the_peaks(roofwatch_env: Path) -> None:
    """The real console script, as an operator runs it (embedded: SQLite under the data dir)."""
    from roofwatch.common.device import probe

    done = roofwatch(["calibrate"], {"ROOFWATCH_DATA_DIR": str(roofwatch_env)}, timeout=300)
    assert "DRAM bandwidth" in done.stdout and "fp32 matmul" in done.stdout
    assert "stored as measured peaks of device" in done.stdout

    info = probe()
    cached = load_cached(roofwatch_env, info.fingerprint)
    assert cached is not None and cached.timer == "host"  # a worker on this host will not measure again
    row = _device(info.fingerprint)
    assert row.peaks_source == "measured"
    assert row.peak_bandwidth == cached.bandwidth and row.peak_flops == cached.flops
    assert set(row.peak_flops) == {"fp32", "bf16", "fp16"}


def test_calibrate_command_can_measure_without_storing(roofwatch_env: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from roofwatch.service.cli.main import app

    monkeypatch.setattr(calibration_module, "CPU_PLAN", SMALL_PLAN)
    done = CliRunner().invoke(app, ["calibrate", "--no-store"], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "DRAM bandwidth" in done.output and "stored" not in done.output
    assert not (roofwatch_env / "calibration").exists() and not (roofwatch_env / "roofwatch.db").exists()


def test_calibrate_command_on_a_missing_gpu_fails_clearly(roofwatch_env: Path) -> None:
    import torch

    from roofwatch.service.cli.main import app

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = CliRunner().invoke(app, ["calibrate", "--gpu", "3"], env={"COLUMNS": "200"})
    assert done.exit_code == 2 and "no CUDA device" in done.output


def test_an_uncalibrated_cpu_has_no_roofs_a_calibrated_one_its_cache_roofs() -> None:
    assert peaks_for(Device(fingerprint="u", device_class="CPU AMD EPYC 9654")) is None  # no datasheet for CPUs
    cpu = Device(fingerprint="c", device_class="CPU AMD EPYC 9654", peak_bandwidth=4e9, peak_flops={"fp32": 1e11},
                 cache_roofs={"L2": {"capacity": 1 << 20, "bandwidth": 100e9},
                              "L3": {"capacity": 32 << 20, "bandwidth": 30e9}})
    peaks = peaks_for(cpu)
    assert peaks is not None and peaks.warm_caches
    assert [name for name, _, _ in peaks.memory_levels()] == ["DRAM", "L3", "L2"]
    # A 512 KiB working set copied at 50 GB/s beats DRAM's 4 GB/s twelvefold: held to L2, not a harness error.
    small = bound_of(peaks, 0.0, 512 << 10, (512 << 10) / 50e9, "fp32")
    assert small.roof == "L2" and small.fraction == pytest.approx(0.5)
    # 8 MiB fits L3 but not L2: held to L3; 256 MiB fits no cache: DRAM.
    assert bound_of(peaks, 0.0, 8 << 20, (8 << 20) / 15e9, "fp32").roof == "L3"
    assert bound_of(peaks, 0.0, 256 << 20, (256 << 20) / 2e9, "fp32").roof == "DRAM"
    # A working set too large for L3 that still beats DRAM was partly resident: the next roof up.
    assert bound_of(peaks, 0.0, 256 << 20, (256 << 20) / 20e9, "fp32").roof == "L3"
    with pytest.raises(RooflineError, match="faster than every roof"):
        bound_of(peaks, 0.0, 512 << 10, (512 << 10) / 200e9, "fp32")


def test_a_gpu_starts_at_dram_and_climbs_to_l2_only_when_beaten() -> None:
    gpu = Device(fingerprint="g", device_class="NVIDIA H200", peak_bandwidth=H200_BW, peak_flops=H200_PEAKS,
                 peaks_source="measured", cache_roofs={"L2": {"capacity": 60 << 20, "bandwidth": 10e12}})
    peaks = peaks_for(gpu)
    assert peaks is not None and not peaks.warm_caches  # the harness flushes L2 before each sample
    assert bound_of(peaks, 0.0, 1 << 20, (1 << 20) / 2e12, "bf16").roof == "DRAM"
    # Graph replays of a tiny kernel can run from L2: faster than DRAM, placed under the L2 roof.
    assert bound_of(peaks, 0.0, 1 << 20, (1 << 20) / 6e12, "bf16").roof == "L2"


def test_sysfs_cache_sizes_are_read_per_level(tmp_path: Path) -> None:
    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                                 (2, "Unified", "2048K"), (3, "Unified", "480M")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", str(level)), ("type", kind), ("size", size)):
            (folder / name).write_text(value + "\n")
    assert cpu_caches(tmp_path) == {"L2": 2 << 20, "L3": 480 << 20}
    assert cpu_caches(tmp_path / "absent") == {}


def test_cpu_calibration_measures_a_roof_per_cache_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calibration_module, "cpu_caches", lambda: {"L2": 1 << 20})
    steps: list[str] = []
    measured = calibrate("cpu", replace(SMALL_PLAN, caches=True, max_copy_bytes=8 << 20), progress=steps.append)
    assert steps == ["DRAM bandwidth", "L2 bandwidth", "fp32 matmul", "bf16 matmul", "tf32 matmul", "fp8 matmul"]
    assert measured.sizes["copy_bytes"] == 4 << 20  # past twice the largest cache (2 MiB) already
    assert measured.sizes["copy_L2"] == 256 << 10  # two buffers filling half the cache
    # The 4 MiB "DRAM" copy fits this host's real caches, so which copy is faster is up to the
    # host's load: the level is a roof above DRAM's, or named as not measured (usable_caches).
    if "L2" in measured.caches:
        l2 = measured.caches["L2"]
        assert l2["capacity"] == 1 << 20 and math.isfinite(l2["bandwidth"]) and l2["bandwidth"] > measured.bandwidth
        assert "L2 bandwidth (1 MiB)" in [row[0] for row in peak_rows(measured, None)]
    else:
        assert "no faster than DRAM" in measured.skipped["L2"]
    assert Calibration.from_json(measured.to_json()) == measured
    info = with_peaks(DeviceInfo(device_class="cpu", fingerprint="f"), measured)
    assert info.cache_roofs == measured.caches


@pytest.mark.parametrize(("l2_bandwidth", "kept"), [
    (5.5e12, True),    # an H100's L2, well above its DRAM
    (3.01e12, False),  # equal to DRAM: not a faster level
    (2.25e12, False),  # what the H100 gave with a 12.5 MiB copy: launch gaps, not the cache
])
def test_a_cache_roof_no_faster_than_dram_is_not_a_roof(l2_bandwidth: float, kept: bool) -> None:
    caches = {"L2": {"capacity": float(50 << 20), "bandwidth": l2_bandwidth}}
    usable, unusable = usable_caches(caches, dram_bandwidth=3.01e12)
    assert ("L2" in usable) is kept and ("L2" in unusable) is not kept
    if not kept:
        assert "no faster than DRAM's 3,010 GB/s" in unusable["L2"]


@pytest.mark.parametrize(("over_the_roof", "expected"), [
    (0.999, 0.999),  # under the roof: the fraction itself
    (1.006, 1.0),    # an H100's add kernel against the copy that measured its DRAM roof
    (1.010, 1.0),    # its swiglu: at the roof, within the roof's own measurement error
    (1.029, 1.0),
    (1.04, None),    # beyond the margin: the declared work, a peak or the timer is wrong
    (2.0, None),     # the usual harness error: a tensor counted twice
])
def test_a_point_just_over_a_measured_roof_sits_at_it(over_the_roof: float, expected: float | None) -> None:
    bandwidth, nbytes = 3.009e12, 3 * (1 << 30)
    seconds = nbytes / bandwidth / over_the_roof
    peaks = datasheet_peaks("NVIDIA H100 80GB HBM3")
    assert peaks is not None
    peaks = replace(peaks, bandwidth=bandwidth, caches=(), source="measured")
    if expected is None:
        assert over_the_roof > 1 + ROOF_MARGIN
        with pytest.raises(RooflineError, match="faster than"):
            roofline_fraction(0.0, nbytes, seconds, 1e15, bandwidth)
        with pytest.raises(RooflineError, match="faster than every roof"):
            bound_of(peaks, 0.0, nbytes, seconds, "bf16")
    else:
        assert roofline_fraction(0.0, nbytes, seconds, 1e15, bandwidth) == pytest.approx(expected)
        bound = bound_of(peaks, 0.0, nbytes, seconds, "bf16")
        assert bound.roof == "DRAM" and bound.fraction == pytest.approx(expected)


@pytest.mark.parametrize(("dtype", "roof"), [
    ("fp8e4m3", "fp8"),          # roofwatch's own fp8 matmul benchmarks
    ("float8_e5m2", "fp8"),
    ("torch.float8_e4m3fn", "fp8"),
    ("bf16", "bf16"), ("bfloat16", "bf16"), ("float16", "fp16"), ("float32", "fp32"), ("tf32", "tf32"),
    ("int8", "int8"),            # no roof of its own: roof_of falls back to fp32's
])
def test_every_spelling_of_a_dtype_is_held_to_its_own_roof(dtype: str, roof: str) -> None:
    assert roof_dtype(dtype) == roof
    peaks = datasheet_peaks("NVIDIA H100 80GB HBM3")
    assert peaks is not None
    assert roof_of(peaks, dtype) == peaks.flops.get(roof, peaks.flops["fp32"])


def test_an_fp8_matmul_at_an_h100s_rate_is_under_the_fp8_roof_not_a_harness_error() -> None:
    # 962 TFLOP/s measured on the H100 for the 4096³ fp8e4m3 matmul: 18× the fp32 roof it was held to.
    peaks = replace(datasheet_peaks("NVIDIA H100 80GB HBM3"), flops={"fp32": 52.0e12, "fp8": 1329.5e12},
                    bandwidth=3.009e12, source="measured")
    n = 4096
    bound = bound_of(peaks, 2.0 * n**3, 3 * n * n, 2.0 * n**3 / 962.3e12, "fp8e4m3")
    assert bound.roof == "DRAM" and bound.fraction == pytest.approx(962.3 / 1329.5, rel=1e-3)


def test_a_cache_level_slower_than_a_larger_one_is_flagged_and_not_used() -> None:
    # Seen on a busy 2-core host: L2 at 45 GB/s under L3's 71, both above DRAM's 9.
    caches = {"L1": {"capacity": 48e3, "bandwidth": 300e9}, "L2": {"capacity": 1e6, "bandwidth": 45e9},
              "L3": {"capacity": 32e6, "bandwidth": 71e9}}
    usable, unusable = usable_caches(caches, dram_bandwidth=9e9)
    assert sorted(usable) == ["L1", "L3"]
    assert "no faster than L3's 71 GB/s, a larger level: implausible" in unusable["L2"]


def test_a_peak_that_moved_more_than_twofold_since_the_last_calibration_is_flagged() -> None:
    from roofwatch.workers.calibrate import drift

    before = _calibration()
    # Seen on a busy host: two calibrations 11 minutes apart, fp32 8x apart.
    after = _calibration(flops={**H200_PEAKS, "fp32": H200_PEAKS["fp32"] / 8}, bandwidth=H200_BW * 1.3)
    assert drift(before, after) == ["fp32 compute: 6.38 TFLOP/s, 0.12x the previous calibration's 51 TFLOP/s"]
    assert drift(before, _calibration()) == []
