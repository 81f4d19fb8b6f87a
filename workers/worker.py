"""Starting a worker (one per GPU) and the beat scheduler.

A worker that serves only ``gpu.*`` queues runs untrusted code next to the GPU: it keeps no
database or GitHub credentials (they are dropped from its environment if an operator passed
them) and talks to nothing but the broker. What it measures goes to ``ingest`` as an envelope.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass

from roofwatch.common import redelivery
from roofwatch.common.celery_app import CPU_QUEUE, INGEST_QUEUE, TaskName, app, send, task_modules
from roofwatch.common.device import probe
from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.settings import get_worker_settings
from roofwatch.common.task_names import is_cpu, queue_name
from roofwatch.workers.calibrate import calibrated

log = logging.getLogger(__name__)

# What a GPU-only worker must not hold: the database, GitHub and the API's token.
SECRETS = ("ROOFWATCH_DATABASE_URL", "ROOFWATCH_GITHUB_TOKEN", "ROOFWATCH_GITHUB_APP_PRIVATE_KEY",
           "ROOFWATCH_GITHUB_APP_ID", "ROOFWATCH_GITHUB_WEBHOOK_SECRET", "ROOFWATCH_API_TOKEN")


@dataclass(frozen=True)
class WorkerPlan:
    name: str
    queues: list[str]
    gpu: int | None
    device: DeviceInfo

    @property
    def device_class(self) -> str:
        return self.device.device_class

    @property
    def gpu_only(self) -> bool:
        return all(q.startswith("gpu.") for q in self.queues)

    @property
    def node(self) -> str:
        return f"{self.name}@{socket.gethostname()}"


def plan(gpu: int | None, queues: str | None, name: str | None) -> WorkerPlan:
    """Which queues and which stable name; the name must survive restarts (see ``redelivery``).

    The device is probed once, here, by its NVML index: NVML numbers every GPU of the host
    whatever ``CUDA_VISIBLE_DEVICES`` says.
    """
    device = probe(gpu if gpu is not None else 0)
    chosen = [q.strip() for q in (queues or "").split(",") if q.strip()] or [
        queue_name(device.device_class), CPU_QUEUE, INGEST_QUEUE]
    if name is None:
        name = f"gpu{gpu}" if gpu is not None else ("cpu" if not any(q.startswith("gpu.") for q in chosen) else "main")
    return WorkerPlan(name=name, queues=chosen, gpu=gpu, device=device)


def drop_secrets() -> list[str]:
    """Remove credentials from this process's environment; the names that were there."""
    present = [name for name in SECRETS if name in os.environ]
    for name in present:
        del os.environ[name]
    return present


def start_worker(worker: WorkerPlan, loglevel: str) -> None:
    if worker.gpu is not None:
        # Before anything touches CUDA: this process and every suite it starts see one GPU.
        os.environ["CUDA_VISIBLE_DEVICES"] = str(worker.gpu)
    if worker.gpu_only:
        dropped = drop_secrets()
        if dropped:
            log.warning("a GPU worker holds no credentials; ignoring %s", ", ".join(dropped))
    settings = get_worker_settings()
    if os.geteuid() == 0 and not settings.suite_user:
        log.warning("running as root without ROOFWATCH_SUITE_USER: suites run as root too")
    # A GPU-only worker registers the GPU task alone: it never imports the service's tasks.
    app.conf.include = task_modules(worker.queues)
    redelivery.install(app, worker.node, worker.device_class, worker.queues, settings.broker_url)
    # The device row and its calibration exist before the first run reaches the database.
    # Measured once per device fingerprint on this host (cached under the data dir), in a child
    # process, before this worker takes any task: nothing else runs on the device meanwhile.
    # A CPU has no roofline worth holding interpreted kernels to (see roofwatch.service.records.roofline),
    # so only GPUs are calibrated here; `roofwatch calibrate` still measures a CPU on request.
    found = worker.device
    device = calibrated(found, settings.data_dir) if not is_cpu(found.device_class) else found
    send(TaskName.REGISTER_DEVICE, device.model_dump(mode="json"))
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app.worker_main([
        "worker", f"--queues={','.join(worker.queues)}", "--concurrency=1", "--prefetch-multiplier=1",
        f"--loglevel={loglevel}", f"--hostname={worker.node}",
        # Revocations (cancelled runs) survive a restart, so a requeued cancelled run is dropped.
        f"--statedb={settings.data_dir / f'worker-{worker.name}.state'}",
    ])


def start_beat(loglevel: str) -> None:
    settings = get_worker_settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    app.start(["beat", f"--loglevel={loglevel}", f"--schedule={settings.data_dir / 'beat-schedule'}"])
