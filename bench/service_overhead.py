"""What roofwatch adds per commit, around the suites themselves.

    python -m bench.service_overhead [--repeats 20] [--job-runs 3] [--measurements 10000]
        [--ingest-repeats 5] [--pushes 10] [--skip-webhook] [--markdown FILE] [--profile]
        [--database-url postgresql://postgres@127.0.0.1:5432/roofwatch_bench_overhead]

Four measurements, on this repository and its own suites (``[[tool.roofwatch.suites]]`` in
pyproject.toml):

1. **Warm checkout.** ``roofwatch.git.checkout.ensure_mirror`` on a mirror that is already cloned
   (an incremental fetch that finds nothing new), then ``roofwatch.git.checkout.worktree`` added at
   HEAD and removed. The cold clone is timed once, for context: from the path (git hardlinks
   the objects) and from a ``file://`` URL (git packs and sends them, as from a remote, less the
   network).
2. **Per-commit overhead.** ``roofwatch.workers.runner.run_job`` on HEAD, as a GPU worker calls it (device
   probe included), against the warm mirror; overhead = the whole call − Σ the suites' own
   ``duration_s``, plus ingesting the envelope into PostgreSQL. Timing wrappers around the
   runner's steps split the overhead; they cost microseconds.
3. **Ingest rate.** An envelope of ``--measurements`` pytest-benchmark results shaped like the
   benchmark suites' (names and params from parametrize ids, 20–200 samples, ``extra_info``
   with flops, bytes, dtype, shape, impl, clock) stored by ``roofwatch.service.records.ingest.ingest_envelope``,
   each repeat into a fresh run. The first repeat also creates the series; the later ones
   extend them, as every run after the first does.
4. **Webhook to worker start.** ``roofwatch serve`` and two ``roofwatch worker`` processes (one
   on the device queue only, one on ``cpu,ingest``) over a private ``redis-server``; a signed
   ``push`` for a registered repository's default branch; the time from sending the request to
   the device worker's ``run N: measuring`` log record. Each push waits for the previous run to
   finish and every queue to drain, so the worker is idle when the webhook arrives. The script
   and the workers run on one host and read the same wall clock (``time.time()`` here, the log
   record's ``created`` there, written as JSON lines to the microsecond). The pushed repository is a small one with one
   correctness suite: what it runs after the start is not part of this number.

The database named by ``--database-url`` is created (it must not exist), migrated, and dropped
at the end unless ``--keep-database``. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import os
import pstats
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session, select

from bench.dashboard.workload import DTYPES, ELEMENT_BYTES, FLEET, IMPLS, OPS, Spec, noise_sigma, typical_seconds
from roofwatch.common.device import fingerprint, probe
from roofwatch.common.envelope import DeviceInfo, Envelope, MeasurementRecord, SuiteResult
from roofwatch.common.jobs import Job
from roofwatch.common.task_names import queue_name
from roofwatch.common.vocabulary import TERMINAL_STATES, Trigger
from roofwatch.git import checkout
from roofwatch.service.core.db import make_engine, migrate, session_scope
from roofwatch.service.core.models import Commit, Repository, Run
from roofwatch.service.github.signature import sign
from roofwatch.service.records.ingest import ingest_envelope, parse_envelope
from roofwatch.service.records.repositories import register
from roofwatch.service.records.runs import create_run, upsert_commit
from roofwatch.workers import runner, sandbox
from roofwatch.workers.runner import run_job

ROOT = Path(__file__).resolve().parents[1]
ROOFWATCH = Path(sys.executable).parent / "roofwatch"
DEFAULT_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/roofwatch_bench_overhead"
SELF_NAME = "roofwatch/roofwatch"

CHECKOUT_GOAL_S = 0.5
OVERHEAD_GOAL_PCT = 5.0
INGEST_GOAL_PER_S = 1000.0
WEBHOOK_GOAL_S = 1.0

# Samples per result, as pytest-benchmark records them: a few dozen for a long kernel, 100 for a GPU
# kernel with fixed rounds (roofwatch's own suites), 200 for adaptive sampling of a short one.
SAMPLE_COUNTS = (20, 50, 100, 100, 100, 200)
GPU_DEVICE = "NVIDIA H100 80GB HBM3"


# --- statistics ---------------------------------------------------------------------------------


def median(values: list[float] | tuple[float, ...]) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def p95(values: list[float] | tuple[float, ...]) -> float:
    return float(np.percentile(values, 95)) if len(values) else float("nan")


# --- 1. warm checkout ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckoutTimes:
    cold_clone_s: float
    fetch_s: tuple[float, ...]  # ensure_mirror on the existing mirror
    add_s: tuple[float, ...]  # worktree add at the SHA (has_commit + git worktree add)
    remove_s: tuple[float, ...]  # rmtree + git worktree prune

    @property
    def total_s(self) -> tuple[float, ...]:
        return tuple(f + a + r for f, a, r in zip(self.fetch_s, self.add_s, self.remove_s, strict=True))


def cold_clone(source: str, mirrors_dir: Path) -> float:
    """Seconds ``ensure_mirror`` takes to clone ``source`` into an empty mirrors folder."""
    shutil.rmtree(checkout.mirror_path(mirrors_dir, source), ignore_errors=True)
    started = time.perf_counter()
    checkout.ensure_mirror(mirrors_dir, source)
    return time.perf_counter() - started


def warm_checkout(source: str, data_dir: Path, sha: str, repeats: int) -> CheckoutTimes:
    """Clone ``source`` once (timed), then ``repeats`` × (fetch with nothing new + worktree add/remove)."""
    mirrors, worktrees = data_dir / "mirrors", data_dir / "worktrees"
    cold = cold_clone(source, mirrors)
    mirror = checkout.mirror_path(mirrors, source)
    fetch, add, remove = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        checkout.ensure_mirror(mirrors, source)
        t1 = time.perf_counter()
        with checkout.worktree(mirror, sha, worktrees) as tree:
            t2 = time.perf_counter()
            assert (tree / ".git").exists()
        t3 = time.perf_counter()
        fetch.append(t1 - t0)
        add.append(t2 - t1)
        remove.append(t3 - t2)
    return CheckoutTimes(cold, tuple(fetch), tuple(add), tuple(remove))


# --- 2. per-commit overhead ---------------------------------------------------------------------


class Stopwatch:
    """Seconds spent in named steps of ``run_job``, by wrapping the functions it calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, step: str, seconds: float) -> None:
        self.seconds[step] = self.seconds.get(step, 0.0) + seconds

    def wrap(self, step: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(step, time.perf_counter() - started)
        return timed

    def wrap_sandbox(self, function: Callable[..., sandbox.Completed]) -> Callable[..., sandbox.Completed]:
        """The sandbox's own cost: the call minus the suite process's ``duration_s``."""
        def timed(*args: Any, **kwargs: Any) -> sandbox.Completed:
            started = time.perf_counter()
            done = function(*args, **kwargs)
            self.add("sandbox around the suite", time.perf_counter() - started - done.duration_s)
            return done
        return timed

    def wrap_worktree(self, function: Callable[..., Any]) -> Callable[..., Any]:
        @contextmanager
        def timed(*args: Any, **kwargs: Any) -> Iterator[Path]:
            started = time.perf_counter()
            manager = function(*args, **kwargs)
            tree = manager.__enter__()
            self.add("worktree add", time.perf_counter() - started)
            try:
                yield tree
            except BaseException:
                if not manager.__exit__(*sys.exc_info()):
                    raise
            else:
                started = time.perf_counter()
                manager.__exit__(None, None, None)
                self.add("worktree remove", time.perf_counter() - started)
        return timed

    @contextmanager
    def around_run_job(self) -> Iterator[None]:
        with ExitStack() as stack:
            for target, name, wrapper in (
                (runner, "probe", self.wrap("device probe", runner.probe)),
                (checkout, "ensure_mirror", self.wrap("mirror fetch", checkout.ensure_mirror)),
                (checkout, "commit_info", self.wrap("commit info", checkout.commit_info)),
                (checkout, "worktree", self.wrap_worktree(checkout.worktree)),
                (runner, "prepare_suites", self.wrap("suite config", runner.prepare_suites)),
                (runner, "_run_setup", self.wrap("setup (cached)", runner._run_setup)),
                (sandbox, "run", self.wrap_sandbox(sandbox.run)),
                (runner, "parse_junit", self.wrap("result parsing", runner.parse_junit)),
                (runner, "parse_benchmark_json", self.wrap("result parsing", runner.parse_benchmark_json)),
            ):
                stack.enter_context(mock.patch.object(target, name, wrapper))
            yield


@dataclass(frozen=True)
class JobTiming:
    total_s: float  # the whole run_job call
    suites_s: dict[str, float]  # each suite's own duration_s
    steps_s: dict[str, float]  # the runner's steps around the suites
    ingest_s: float  # ingest_envelope + commit, PostgreSQL
    status: str
    outcomes: int
    measurements: int

    @property
    def suite_total_s(self) -> float:
        return sum(self.suites_s.values())

    @property
    def runner_overhead_s(self) -> float:
        return self.total_s - self.suite_total_s

    @property
    def overhead_s(self) -> float:
        return self.runner_overhead_s + self.ingest_s

    @property
    def overhead_pct(self) -> float:
        return 100.0 * self.overhead_s / self.suite_total_s if self.suite_total_s > 0 else float("nan")


def new_run(engine: Engine, repository: str, clone_url: str, mirror: Path, sha: str) -> tuple[int, str]:
    """A queued run of ``sha`` under a fresh idempotency key, as the service creates before enqueueing."""
    info = checkout.commit_info(mirror, sha)
    key = f"{repository}@{sha}:bench:{uuid.uuid4().hex[:12]}"
    with session_scope(engine) as session:
        repo = session.exec(select(Repository).where(Repository.full_name == repository)).first() \
            or register(session, repository, clone_url)
        run = create_run(session, repo, upsert_commit(session, repo, info), key, trigger=Trigger.MANUAL)
        assert run.id is not None
        return run.id, key


def time_ingest(engine: Engine, envelope: Envelope) -> float:
    started = time.perf_counter()
    with session_scope(engine) as session:
        ingest_envelope(session, envelope)
    return time.perf_counter() - started


def job_overhead(source: str, data_dir: Path, sha: str, engine: Engine, repository: str = SELF_NAME) -> JobTiming:
    """One ``run_job`` on ``sha`` (the mirror under ``data_dir`` is warm after the first call), then its ingest."""
    mirror = checkout.ensure_mirror(data_dir / "mirrors", source)
    run_id, key = new_run(engine, repository, source, mirror, sha)
    job = Job(run_id=run_id, idempotency_key=key, repository=repository, clone_url=source, sha=sha,
              data_dir=str(data_dir), suite_timeout_s=1800.0)
    watch = Stopwatch()
    with watch.around_run_job():
        started = time.perf_counter()
        envelope = run_job(job)
        total = time.perf_counter() - started
    ingest_s = time_ingest(engine, envelope)
    return JobTiming(
        total_s=total, suites_s={s.name: s.duration_s for s in envelope.suites}, steps_s=watch.seconds,
        ingest_s=ingest_s, status=envelope.status,
        outcomes=sum(len(s.outcomes) for s in envelope.suites),
        measurements=sum(len(s.measurements) for s in envelope.suites),
    )


# --- 3. ingest rate -----------------------------------------------------------------------------


def benchmark_specs(count: int) -> list[Spec]:
    """``count`` distinct series: the dashboard workload's ops × shapes × dtypes × impls, then the
    same shapes with the leading (batch/rows) dimension doubled, tripled, … as a shape sweep does."""
    specs: list[Spec] = []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for scale in itertools.count(1):
        for op, (work, shapes) in OPS.items():
            for base in shapes:
                shape = (base[0] * scale, *base[1:])
                if (op, shape) in seen:
                    continue
                seen.add((op, shape))
                for dtype in DTYPES:
                    flops, moved = work(shape, ELEMENT_BYTES[dtype])
                    for impl in IMPLS:
                        specs.append(Spec(op, shape, dtype, impl, flops, moved))
                        if len(specs) == count:
                            return specs
    raise AssertionError("unreachable")


def measurement_record(spec: Spec, rng: np.random.Generator) -> MeasurementRecord:
    """What ``roofwatch.result_files.suite_results.parse_benchmark_json`` makes of one pytest-benchmark entry of this series."""
    seconds = typical_seconds(spec, FLEET, rng)
    n = int(rng.choice(SAMPLE_COUNTS))
    samples = seconds * np.exp(rng.normal(0.0, noise_sigma(seconds, rng), n))
    q1, q2, q3 = np.percentile(samples, [25, 50, 75])
    impl = spec.impl or "triton"
    return MeasurementRecord(
        name=spec.name, params=spec.params, group=f"{spec.op}-{spec.shape_text}-{spec.dtype}",
        samples=[float(x) for x in samples], median=float(q2), iqr=float(q3 - q1), min=float(samples.min()),
        mean=float(samples.mean()), n=n, stddev=float(samples.std(ddof=1)), flops=spec.flops, bytes=spec.bytes,
        dtype=spec.dtype, shape=spec.shape_text,
        extra_info={"flops": spec.flops, "bytes": spec.bytes, "dtype": spec.dtype, "shape": spec.shape_text,
                    "impl": impl, "sm_clock_mhz": 1980.0},
    )


def gpu_device() -> DeviceInfo:
    info = DeviceInfo(device_class=GPU_DEVICE, fingerprint="", uuid=FLEET[0].uuid, driver="550.54.15",
                      cuda="12.4", torch_version="2.4.1", triton_version="3.0.0", sm_clock_mhz=1980.0,
                      power_limit_w=700.0, l2_bytes=50 * 1024 * 1024, hostname=FLEET[0].hostname)
    info.fingerprint = fingerprint(info)
    return info


def large_envelope(run_id: int, key: str, repository: str, sha: str, records: list[MeasurementRecord]) -> Envelope:
    now = datetime.now(UTC)
    suite = SuiteResult(name="benchmarks", kind="benchmark", status="passed", exit_code=0, duration_s=1800.0,
                        output_tail=f"{len(records)} passed in 1800.00s", measurements=records)
    return Envelope(run_id=run_id, idempotency_key=key, repository=repository, sha=sha, status="succeeded",
                    device=gpu_device(), suites=[suite], started_at=now, finished_at=now)


@dataclass
class IngestTimes:
    measurements: int
    seconds: list[float] = field(default_factory=list)  # ingest_envelope + commit, per fresh run
    parse_s: float = 0.0  # parse_envelope of the JSON the ingest task receives
    payload_bytes: int = 0
    profile: str = ""

    @property
    def rates(self) -> list[float]:
        return [self.measurements / s for s in self.seconds]



def ingest_rate(engine: Engine, measurements: int, repeats: int, seed: int = 0, profile: bool = False,
                repository: str = "acme/kernels") -> IngestTimes:
    """Ingest a ``measurements``-result envelope ``repeats`` times, each into a fresh run of a new commit."""
    rng = np.random.default_rng(seed)
    specs = benchmark_specs(measurements)
    result = IngestTimes(measurements)
    with session_scope(engine) as session:
        repo = session.exec(select(Repository).where(Repository.full_name == repository)).first() \
            or register(session, repository, f"https://github.com/{repository}.git")
        repository_id = repo.id
    for index in range(repeats + int(profile)):
        sha = uuid.uuid4().hex + uuid.uuid4().hex[:8]
        with session_scope(engine) as session:
            row = session.get(Repository, repository_id)
            assert row is not None
            commit = upsert_commit(session, row, checkout.CommitInfo(sha, [], "bench <bench@localhost>",
                                                                     f"commit {index}", datetime.now(UTC), index + 1))
            run = create_run(session, row, commit, f"{repository}@{sha}:bench:{index}", trigger=Trigger.PUSH)
            run_id, key = run.id, run.idempotency_key
        assert run_id is not None
        envelope = large_envelope(run_id, key, repository, sha, [measurement_record(s, rng) for s in specs])
        payload = envelope.model_dump(mode="json")
        started = time.perf_counter()
        parsed = parse_envelope(payload)
        result.parse_s = time.perf_counter() - started
        result.payload_bytes = len(json.dumps(payload))
        if index < repeats:
            result.seconds.append(time_ingest(engine, parsed))
        else:  # one more, under the profiler (which slows it down), not counted
            profiler = cProfile.Profile()
            profiler.enable()
            time_ingest(engine, parsed)
            profiler.disable()
            result.profile = profile_text(profiler)
    return result


def profile_text(profiler: cProfile.Profile, lines: int = 25) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(lines)
    stats.sort_stats("cumulative").print_stats(lines)
    return out.getvalue()


# --- 4. webhook to worker start -----------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


@contextmanager
def private_redis() -> Iterator[str]:
    """A ``redis-server`` of our own on a free loopback port, without persistence; stopped afterwards."""
    import redis

    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.1)
        client.close()
        yield url
    finally:
        stop(process)


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


PUSH_REPO_PYPROJECT = """\
[project]
name = "tiny-kernels"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
"""
PUSH_REPO_FILES = {
    "pyproject.toml": PUSH_REPO_PYPROJECT,
    "checks/test_scale.py": "def test_scale():\n    assert [2.0 * x for x in (1.0, 2.0)] == [2.0, 4.0]\n",
}
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
                "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost"}


def _git(repo: Path, *args: str) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(repo), **GIT_IDENTITY}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def make_push_repo(path: Path, files: dict[str, str] | None = None) -> None:
    """A small repository with one fast correctness suite (no benchmarks, so no A/B follow-ups keep
    the device worker busy between pushes)."""
    for name, content in (files or PUSH_REPO_FILES).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Add scale")


def push_commit(repo: Path, index: int) -> str:
    """A new commit on main (the pushed head); returns its SHA."""
    (repo / "NOTES.md").write_text(f"push {index}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", f"Notes, take {index}")
    return _git(repo, "rev-parse", "HEAD").strip()


def push_payload(repository: str, clone_url: str, before: str, after: str) -> dict[str, Any]:
    """A ``push`` delivery as GitHub sends it for one new commit on the default branch."""
    owner, name = repository.split("/")
    user = {"name": owner, "email": f"{owner}@users.noreply.github.com", "username": owner}
    head = {"id": after, "tree_id": uuid.uuid4().hex + "00000000", "distinct": True, "message": "Notes",
            "timestamp": datetime.now(UTC).isoformat(), "url": f"https://github.com/{repository}/commit/{after}",
            "author": user, "committer": user, "added": [], "removed": [], "modified": ["NOTES.md"]}
    return {
        "ref": "refs/heads/main", "before": before, "after": after, "created": False, "deleted": False,
        "forced": False, "base_ref": None, "compare": f"https://github.com/{repository}/compare/{before[:12]}...{after[:12]}",
        "commits": [head], "head_commit": head, "pusher": {"name": owner, "email": user["email"]},
        "repository": {"id": 1296269, "name": name, "full_name": repository, "private": False,
                       "owner": {"login": owner, "id": 1, "type": "Organization"},
                       "html_url": f"https://github.com/{repository}", "clone_url": clone_url,
                       "default_branch": "main", "master_branch": "main"},
        "sender": {"login": owner, "id": 1, "type": "User"},
    }


# Worker log lines come in three shapes: roofwatch's JSON lines (``ROOFWATCH_LOG_FORMAT=json``, which
# this script sets: "ts" in UTC to the microsecond), roofwatch's text lines
# ("2025-05-01T12:00:03.412Z INFO    roofwatch.workers.tasks: run 12: …", UTC) and Celery's own default
# ("[2025-05-01 12:00:03,412: INFO/ForkPoolWorker-1] run 12: …", local time).
TEXT_LINE = re.compile(r"^(?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \w+\s+\S+: (?P<message>.*)$")
CELERY_LINE = re.compile(r"^\[(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): \w+/[^\]]+\] (?P<message>.*)$")


def log_line(line: str) -> tuple[float, str] | None:
    """(wall-clock time, message) of one log line, or None for a line that is not a log record."""
    if line.startswith("{"):
        try:
            data = json.loads(line)
            return datetime.fromisoformat(data["ts"]).timestamp(), str(data.get("message", ""))
        except (ValueError, KeyError, TypeError):
            return None
    if match := TEXT_LINE.match(line):
        at = datetime.strptime(match["at"], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
        return at.timestamp(), match["message"]
    if match := CELERY_LINE.match(line):
        local = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f")  # naive: this host's local time
        return local.timestamp(), match["message"]
    return None


def log_events(text: str, pattern: str) -> list[tuple[float, str]]:
    """(wall-clock time, message) of each log line whose message matches ``pattern``."""
    records = (log_line(line) for line in text.splitlines())
    return [record for record in records if record is not None and re.search(pattern, record[1])]


@dataclass(frozen=True)
class PushTiming:
    answered_s: float  # the webhook's HTTP response
    event_task_s: float  # until the cpu worker received roofwatch.handle_github_event
    started_s: float  # until the device worker logged "run N: measuring"


class Logs:
    """A worker's log file, read from where the last look stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.path.stat().st_size

    def since_mark(self) -> str:
        with open(self.path, encoding="utf-8", errors="replace") as handle:
            handle.seek(self.offset)
            return handle.read()

    def shows(self, text: str) -> bool:
        return text in self.since_mark()


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def _idle(redis_url: str, queues: list[str]) -> bool:
    """Nothing queued and nothing being worked on (late acks keep a running task in ``unacked``)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return all(client.llen(q) == 0 for q in queues) and client.hlen("unacked") == 0
    finally:
        client.close()


def webhook_to_start(database_url: str, work_dir: Path, pushes: int, console: Console,
                     repo_files: dict[str, str] | None = None) -> tuple[PushTiming, list[PushTiming]]:
    """Serve + a device worker + a cpu/ingest worker on a private Redis; time ``pushes`` pushes after a warm-up one.

    ``database_url`` must be migrated. Returns the warm-up push (the first task of freshly started
    workers) and the measured ones.
    """
    repository, secret = "bench/tiny-kernels", uuid.uuid4().hex
    repo = work_dir / "tiny-kernels"
    make_push_repo(repo, repo_files)
    device_class = probe().device_class
    device_queue = queue_name(device_class)
    queues = [device_queue, "cpu", "ingest"]
    engine = make_engine(database_url)
    with private_redis() as redis_url, ExitStack() as stack:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")} | {
            "ROOFWATCH_DATA_DIR": str(work_dir / "data"), "ROOFWATCH_DATABASE_URL": database_url,
            "ROOFWATCH_BROKER_URL": redis_url, "ROOFWATCH_GITHUB_WEBHOOK_SECRET": secret,
            "ROOFWATCH_PR_DEVICE_CLASS": device_class, "ROOFWATCH_LOG_FORMAT": "json", "COLUMNS": "200",
        }
        subprocess.run([str(ROOFWATCH), "repo", "add", repository, "--clone-url", str(repo),
                        "--default-branch", "main"], env=env, check=True, capture_output=True)
        port = free_port()
        processes = {
            "serve": [str(ROOFWATCH), "serve", "--port", str(port)],
            "device worker": [str(ROOFWATCH), "worker", "--queues", device_queue, "--loglevel", "info"],
            "cpu worker": [str(ROOFWATCH), "worker", "--queues", "cpu,ingest", "--loglevel", "info"],
        }
        logs = {}
        for label, argv in processes.items():
            path = work_dir / f"{label.replace(' ', '-')}.log"
            handle = stack.enter_context(open(path, "w"))
            process = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT)
            stack.callback(stop, process)
            logs[label] = Logs(path)
        url = f"http://127.0.0.1:{port}"
        with console.status("starting serve and two workers"):
            wait_for(lambda: _healthy(url), 120, "roofwatch serve")
            for label in ("device worker", "cpu worker"):
                wait_for(partial(logs[label].shows, " ready."), 120, f"the {label}", 0.2)
        timings: list[PushTiming] = []
        before = _git(repo, "rev-parse", "HEAD").strip()
        try:
            with httpx.Client(timeout=60) as client:
                for index in range(pushes + 1):
                    with console.status(f"push {index}/{pushes}" if index else "warm-up push"):
                        wait_for(partial(_idle, redis_url, queues), 600, "idle workers", 0.1)
                        time.sleep(1.0)  # the worker is back in its blocking wait on the queue
                        after = push_commit(repo, index)
                        body = json.dumps(push_payload(repository, str(repo), before, after)).encode()
                        timings.append(_time_push(client, url, secret, body, logs))
                        wait_for(partial(_finished, engine, after), 600, f"the run of {after[:12]}", 0.2)
                        before = after
            wait_for(partial(_idle, redis_url, queues), 600, "idle workers", 0.1)
        except (TimeoutError, RuntimeError) as exc:
            tails = "\n".join(f"--- {log.path.name}\n" + "\n".join(log.path.read_text().splitlines()[-30:])
                              for log in logs.values())
            raise RuntimeError(f"{exc}\n{tails}") from exc
    engine.dispose()
    return timings[0], timings[1:]


def _time_push(client: httpx.Client, url: str, secret: str, body: bytes, logs: dict[str, Logs]) -> PushTiming:
    """Send one signed push; wait for the device worker to start its run; read the times off the logs."""
    headers = {"X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
               "X-Hub-Signature-256": sign(secret, body), "Content-Type": "application/json",
               "User-Agent": "GitHub-Hookshot/bench"}
    for log in logs.values():
        log.mark()
    sent = time.time()  # wall clock: the workers' log timestamps are wall clock too
    response = client.post(url + "/webhooks/github", content=body, headers=headers)
    answered = time.time() - sent
    if response.status_code != 202 or response.json().get("outcome") != "accepted":
        raise RuntimeError(f"the push was not accepted: {response.status_code} {response.text}")
    started = wait_for(lambda: log_events(logs["device worker"].since_mark(), r"^run \d+: measuring "),
                       120, "the device worker to start the run")
    received = log_events(logs["cpu worker"].since_mark(), r"Task roofwatch\.handle_github_event\[.*\] received")
    return PushTiming(answered, received[0][0] - sent if received else float("nan"), started[0][0] - sent)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _finished(engine: Engine, sha: str) -> bool:
    with Session(engine) as session:
        state = session.exec(select(Run.state).join(Commit, Run.commit_id == Commit.id)  # type: ignore[arg-type]
                             .where(Commit.sha == sha)).first()
    return state in TERMINAL_STATES


# --- database -----------------------------------------------------------------------------------


def sqlalchemy_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


@contextmanager
def bench_database(url: str, keep: bool = False) -> Iterator[str]:
    """Create the PostgreSQL database named in ``url`` (it must not exist yet), migrate it, drop it afterwards."""
    target = make_url(sqlalchemy_url(url))
    name = target.database
    admin = create_engine(target.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        if connection.execute(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}).first():
            admin.dispose()
            raise SystemExit(f"database {name!r} already exists; drop it (dropdb {name}) or name another one")
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    rendered = target.render_as_string(hide_password=False)
    try:
        migrate(rendered)
        yield rendered
    finally:
        if not keep:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# --- report -------------------------------------------------------------------------------------


def _s(seconds: float) -> str:
    if seconds != seconds:
        return "–"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _met(median_ok: bool, p95_ok: bool | None = None) -> str:
    if not median_ok:
        return "no"
    return "yes" if p95_ok in (None, True) else "median only"


@dataclass
class Section:
    """One printed table, kept as text so it can go to the console and to Markdown alike."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    bold: set[int] = field(default_factory=set)  # row indexes

    def add(self, *cells: str, bold: bool = False) -> None:
        if bold:
            self.bold.add(len(self.rows))
        self.rows.append(list(cells))

    def rich(self) -> Table:
        table = Table(title=self.title)
        for index, header in enumerate(self.headers):
            table.add_column(header, justify="left" if index == 0 else "right")
        for index, row in enumerate(self.rows):
            missed = self.headers[-1] == "met?" and row[-1] == "no"
            table.add_row(*row, style="red" if missed else "bold" if index in self.bold else "")
        return table

    def markdown(self) -> str:
        lines = [f"**{self.title}**", "", "| " + " | ".join(self.headers) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(self.headers) - 1)) + "|"]
        for index, row in enumerate(self.rows):
            cells = [f"**{c}**" if index in self.bold and c else c for c in row]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"


def checkout_section(times: CheckoutTimes, cold_url_s: float | None = None) -> Section:
    cold = f"cold clone {_s(times.cold_clone_s)}" + (f", over file:// {_s(cold_url_s)}" if cold_url_s else "")
    section = Section(f"Warm checkout ({len(times.total_s)} repeats; {cold})", ["step", "median", "p95", "max"])
    for label, values in (("ensure_mirror (fetch, nothing new)", times.fetch_s), ("worktree add", times.add_s),
                          ("worktree remove", times.remove_s), ("total", times.total_s)):
        section.add(label, _s(median(values)), _s(p95(values)), _s(max(values)), bold=label == "total")
    return section


def job_section(jobs: list[JobTiming]) -> Section:
    section = Section(f"Per-commit overhead: run_job on HEAD, then ingest ({len(jobs)} run(s))",
                      ["part", *[f"run {i + 1}" for i in range(len(jobs))]])
    for name in jobs[0].suites_s:
        section.add(f"suite {name} (its own duration_s)", *[_s(j.suites_s.get(name, float("nan"))) for j in jobs])
    section.add("Σ suites", *[_s(j.suite_total_s) for j in jobs], bold=True)
    steps = sorted({step for job in jobs for step in job.steps_s}, key=lambda s: -jobs[0].steps_s.get(s, 0.0))
    for step in steps:
        section.add(f"· {step}", *[_s(j.steps_s.get(step, 0.0)) for j in jobs])
    section.add("· rest (envelope, runner bookkeeping)", *[_s(j.runner_overhead_s - sum(j.steps_s.values())) for j in jobs])
    section.add("run_job − Σ suites", *[_s(j.runner_overhead_s) for j in jobs], bold=True)
    section.add("ingest into PostgreSQL", *[_s(j.ingest_s) for j in jobs], bold=True)
    section.add("overhead (% of Σ suites)", *[f"{_s(j.overhead_s)} ({j.overhead_pct:.2f} %)" for j in jobs], bold=True)
    section.add("run_job total", *[_s(j.total_s) for j in jobs])
    section.add("envelope", *[f"{j.status}: {j.outcomes} outcomes, {j.measurements} measurements" for j in jobs])
    return section


def ingest_section(times: IngestTimes) -> Section:
    section = Section(f"Ingest of a {times.measurements:,}-measurement envelope ({times.payload_bytes / 1e6:.1f} MB "
                      f"as JSON; parse_envelope {_s(times.parse_s)}, not counted)", ["run", "seconds", "measurements/s"])
    for index, (seconds, rate) in enumerate(zip(times.seconds, times.rates, strict=True)):
        section.add(f"{index + 1}" + (" (creates the series)" if index == 0 else ""), f"{seconds:.2f}", f"{rate:,.0f}")
    return section


def webhook_section(warmup: PushTiming, pushes: list[PushTiming]) -> Section:
    section = Section(f"Webhook → device worker starts run_commit ({len(pushes)} pushes, idle workers)",
                      ["from sending the push until", "median", "p95", "max", "first push after start"])
    for label, attr in (("serve answered 202", "answered_s"), ("cpu worker received the event task", "event_task_s"),
                        ("device worker logged 'run N: measuring'", "started_s")):
        values = [getattr(p, attr) for p in pushes]
        section.add(label, _s(median(values)), _s(p95(values)), _s(max(values)), _s(getattr(warmup, attr)))
    return section


# --- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL,
                        help="PostgreSQL database to create, use and drop (it must not exist)")
    parser.add_argument("--keep-database", action="store_true", help="leave the database behind")
    parser.add_argument("--repo", default=str(ROOT), help="the git repository whose HEAD is measured (default: this one)")
    parser.add_argument("--repeats", type=int, default=20, help="warm checkouts")
    parser.add_argument("--job-runs", type=int, default=3, help="run_job calls on HEAD (each runs every suite)")
    parser.add_argument("--measurements", type=int, default=10_000, help="measurements in the ingest-rate envelope")
    parser.add_argument("--ingest-repeats", type=int, default=5, help="ingests of that envelope, each into a fresh run")
    parser.add_argument("--pushes", type=int, default=10, help="timed pushes, after one warm-up push")
    parser.add_argument("--skip-webhook", action="store_true", help="leave out the webhook-to-worker measurement")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the last ingest")
    parser.add_argument("--markdown", help="also write the tables as Markdown to this file")
    args = parser.parse_args(argv)
    console = Console(width=None if sys.stdout.isatty() else 160)
    source = str(Path(args.repo).resolve())
    sha = checkout.resolve(Path(source), "HEAD")
    summary = Section("What roofwatch adds per commit", ["metric", "measured", "goal", "met?"])
    sections: list[Section] = []

    def show(section: Section) -> None:
        sections.append(section)
        console.print(section.rich())

    load = os.getloadavg()
    console.print(f"HEAD {sha[:12]} of {source}; {os.cpu_count()} CPUs; load average "
                  f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; device {probe().device_class}")
    with tempfile.TemporaryDirectory(prefix="roofwatch-overhead-") as scratch, \
            bench_database(args.database_url, args.keep_database) as database_url:
        work = Path(scratch)
        engine = make_engine(database_url)

        if args.repeats > 0:
            with console.status("warm checkout"):
                times = warm_checkout(source, work / "data", sha, args.repeats)
            cold_url = cold_clone(Path(source).as_uri(), work / "cold")  # packs sent as to a remote, no hardlinks
            show(checkout_section(times, cold_url))
            total = times.total_s
            summary.add("warm checkout: fetch + worktree add/remove (median / p95)",
                        f"{_s(median(total))} / {_s(p95(total))}", f"< {_s(CHECKOUT_GOAL_S)}",
                        _met(median(total) < CHECKOUT_GOAL_S, p95(total) < CHECKOUT_GOAL_S))

        jobs = []
        for index in range(args.job_runs):
            with console.status(f"run_job on {sha[:12]} ({index + 1}/{args.job_runs}): every suite runs"):
                jobs.append(job_overhead(source, work / "data", sha, engine))
        if jobs:
            show(job_section(jobs))
            ranked = sorted(jobs, key=lambda j: j.overhead_pct)
            middle = ranked[(len(ranked) - 1) // 2]  # the median run (the lower one of an even count)
            summary.add(f"per-commit overhead / Σ suite time (median run of {len(jobs)}; max)",
                        f"{middle.overhead_pct:.2f} % ({_s(middle.overhead_s)} of {_s(middle.suite_total_s)}); "
                        f"max {ranked[-1].overhead_pct:.2f} %",
                        f"< {OVERHEAD_GOAL_PCT:.0f} %", _met(middle.overhead_pct < OVERHEAD_GOAL_PCT))

        if args.ingest_repeats > 0:
            with console.status(f"ingesting {args.measurements:,} measurements × {args.ingest_repeats}"):
                ingest = ingest_rate(engine, args.measurements, args.ingest_repeats, profile=args.profile)
            show(ingest_section(ingest))
            rate = median(ingest.rates)
            summary.add(f"ingest rate, {args.measurements:,} measurements (median of {len(ingest.rates)} runs; min)",
                        f"{rate:,.0f} /s; min {min(ingest.rates):,.0f} /s", f"≥ {INGEST_GOAL_PER_S:,.0f} /s",
                        _met(rate >= INGEST_GOAL_PER_S))
            if ingest.profile:
                console.print(ingest.profile, markup=False, highlight=False)
        engine.dispose()

        if not args.skip_webhook:
            warmup, pushes = webhook_to_start(database_url, work / "webhook", args.pushes, console)
            show(webhook_section(warmup, pushes))
            started = [p.started_s for p in pushes]
            summary.add("webhook → device worker starts the run (median / p95)",
                        f"{_s(median(started))} / {_s(p95(started))}", f"< {_s(WEBHOOK_GOAL_S)}",
                        _met(median(started) < WEBHOOK_GOAL_S, p95(started) < WEBHOOK_GOAL_S))

    show(summary)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write("\n".join(section.markdown() for section in sections))
    return 1 if any(row[-1] == "no" for row in summary.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
