"""``roofwatch calibrate``, and the calibration ``roofwatch run`` does the first time it sees a device.

The roofs a device's benchmarks are held to — DRAM bandwidth, each cache level's bandwidth,
matmul FLOP/s per dtype — are measured on it (``roofwatch.workers.calibrate``) with a Rich progress bar,
cached under the data dir by device fingerprint and stored on the device's record: in-process on
the embedded default, through the ``ingest`` queue with a broker.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.task_names import TaskName
from roofwatch.roofline import datasheet_peaks
from roofwatch.service.core.config import get_settings
from roofwatch.workers.calibrate import (
    Calibration,
    drift,
    load_cached,
    peak_rows,
    steps_for,
    store_cached,
    with_peaks,
)
from roofwatch.workers.calibrate import calibrate as measure_device


def measure(info: DeviceInfo, gpu: int | None, console: Console) -> Calibration:
    """Measure the device with a progress bar; raises ``CalibrationError``."""
    device = f"cuda:{gpu}" if gpu is not None else None
    steps = steps_for(gpu)
    with Progress(TextColumn("calibrating {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(info.device_class, total=len(steps))
        seen: list[str] = []

        def step(name: str) -> None:
            if seen:
                bar.advance(task)
            seen.append(name)
            bar.update(task, description=f"{info.device_class}: {name}")

        return measure_device(device, progress=step)


def show(console: Console, info: DeviceInfo, calibration: Calibration) -> None:
    table = Table("peak", "measured", "datasheet", "measured / datasheet",
                  title=f"{info.device_class}, {calibration.timer} timer, {calibration.seconds:.1f} s")
    for row in peak_rows(calibration, datasheet_peaks(info.device_class)):
        table.add_row(*row)
    console.print(table)
    for dtype, why in calibration.skipped.items():
        console.print(f"{dtype} not measured: {why}")


def store(console: Console, info: DeviceInfo, calibration: Calibration) -> None:
    """Cache the calibration for this host and put the peaks on the device's record."""
    from roofwatch.service.cli.database import prepare_database
    from roofwatch.service.flows import dispatch

    settings = get_settings()
    previous = load_cached(settings.data_dir, info.fingerprint)
    for line in drift(previous, calibration) if previous is not None else []:
        console.print(f"[yellow]implausible change, check the host was idle and calibrate again:[/] {line}")
    store_cached(settings.data_dir, info.fingerprint, calibration)
    prepare_database()
    sent = dispatch.register_device(with_peaks(info, calibration).model_dump(mode="json"))
    if settings.embedded:
        console.print(f"stored as measured peaks of device {sent.get()}")
    else:
        console.print(f"sent to the ingest queue ({TaskName.REGISTER_DEVICE})")


def modelled_device_of(repo: str) -> str | None:
    """The device a local repository's checked-out ``pyproject.toml`` models (``[tool.roofwatch.device]``), if any.

    Its runs are held to the model's roofs, so measuring this host's would be time spent on roofs
    nothing is held to. A repository named rather than given as a path, or whose file does not
    parse, is calibrated as usual: the run reports what is wrong with its file.
    """
    from roofwatch.common.errors import SuiteConfigError
    from roofwatch.workers import modelled_device

    tree = Path(repo).expanduser()
    if not tree.is_dir():
        return None
    try:
        model = modelled_device.declared_for(tree, "")
    except SuiteConfigError:
        return None
    return model.device_class if model else None


def calibrate_first_time(info: DeviceInfo, console: Console) -> None:
    """Before the first run on a device: measure its roofs unless this host has them already.

    A CPU takes a few seconds, a GPU under a minute. ``roofwatch run --no-calibrate`` skips it;
    a calibration that fails leaves the device without measured roofs and the run goes on.
    """
    from roofwatch.workers.calibrate import CalibrationError

    if load_cached(get_settings().data_dir, info.fingerprint) is not None:
        return
    console.print(f"first run on [bold]{info.device_class}[/]: measuring its roofs for the roofline "
                  "(once per device; --no-calibrate skips it)")
    try:
        calibration = measure(info, None, console)
    except CalibrationError as exc:
        console.print(f"[yellow]calibration failed, no measured roofs:[/] {exc}")
        return
    show(console, info, calibration)
    store(console, info, calibration)
