"""The service-overhead benchmark's plumbing (bench/service_overhead.py), at tiny sizes.

Its goals are checked by ``python -m bench.service_overhead`` on this repository, never here: this
checks that each measurement runs the code it claims to and stores what it should, so the script
cannot rot. The repository measured here has suites that write their result files directly
(no pytest), so a whole ``run_job`` takes well under a second. The webhook measurement starts
``roofwatch serve`` and two workers (tens of seconds of imports on a loaded 2-core host), so only
its parts are checked here: the push it sends and the worker log lines it reads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import Session, select
from support.sample_repo import commit, init

from bench.service_overhead import (
    PushTiming,
    benchmark_specs,
    checkout_section,
    ingest_rate,
    ingest_section,
    job_overhead,
    job_section,
    log_events,
    push_payload,
    warm_checkout,
    webhook_section,
)
from roofwatch.service.core.db import make_engine, migrate
from roofwatch.service.core.models import Benchmark, Measurement, Run, TestOutcome
from roofwatch.service.github.payloads import PushEvent
from roofwatch.service.github.signature import sign, verify

JUNIT = """\
import sys

path = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
with open(path, "w") as out:
    out.write('<testsuites><testsuite name="checks" tests="2">'
              '<testcase classname="checks" name="test_scale" time="0.001"/>'
              '<testcase classname="checks" name="test_empty" time="0.001"/></testsuite></testsuites>')
"""
BENCH_JSON = """\
import json
import sys

path = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--benchmark-json="))
stats = {"median": 1e-3, "mean": 1e-3, "min": 9e-4, "iqr": 1e-5, "rounds": 3, "stddev": 1e-5,
         "data": [1e-3, 1.1e-3, 9e-4]}
entry = {"name": "test_scale[4096]", "param": "4096", "group": "scale", "stats": stats,
         "extra_info": {"flops": 4096, "bytes": 32768, "dtype": "fp32", "shape": "4096"}}
with open(path, "w") as out:
    json.dump({"benchmarks": [entry]}, out)
"""
PYPROJECT = """\
[project]
name = "quick-kernels"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python junit.py"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python bench_json.py"
"""
QUICK_FILES = {"pyproject.toml": PYPROJECT, "junit.py": JUNIT, "bench_json.py": BENCH_JSON}


@pytest.fixture
def quick_repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "quick"
    init(repo)
    return repo, commit(repo, "Add quick suites", QUICK_FILES, 1)


@pytest.fixture
def sqlite_engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    migrate(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def test_warm_checkout_fetches_and_removes_every_worktree(quick_repo: tuple[Path, str], tmp_path: Path) -> None:
    repo, sha = quick_repo
    times = warm_checkout(str(repo), tmp_path / "data", sha, repeats=3)
    assert times.cold_clone_s > 0 and len(times.total_s) == 3
    assert all(t > 0 for t in times.fetch_s + times.add_s + times.remove_s)
    assert list((tmp_path / "data" / "worktrees").iterdir()) == []
    assert "| **total** |" in checkout_section(times, 0.1).markdown()


def test_job_overhead_times_run_job_and_stores_its_envelope(quick_repo: tuple[Path, str], tmp_path: Path,
                                                            sqlite_engine) -> None:  # type: ignore[no-untyped-def]
    repo, sha = quick_repo
    timing = job_overhead(str(repo), tmp_path / "data", sha, sqlite_engine, repository="acme/quick")
    assert timing.status == "succeeded", timing
    assert set(timing.suites_s) == {"correctness", "benchmarks"}
    assert (timing.outcomes, timing.measurements) == (2, 1)
    assert timing.total_s > timing.suite_total_s > 0 and timing.ingest_s > 0
    assert {"device probe", "mirror fetch", "worktree add", "worktree remove", "result parsing"} <= set(timing.steps_s)
    # The steps are inside the call: they cannot add up to more than what is not the suites.
    assert sum(timing.steps_s.values()) <= timing.runner_overhead_s
    with Session(sqlite_engine) as session:
        (run,) = session.exec(select(Run)).all()
        assert run.state == "succeeded"
        assert session.exec(select(func.count()).select_from(TestOutcome)).one() == 2
        assert session.exec(select(func.count()).select_from(Measurement)).one() == 1
    assert "overhead (% of Σ suites)" in job_section([timing]).markdown()


def test_ingest_rate_stores_every_measurement_into_a_fresh_run(sqlite_engine) -> None:  # type: ignore[no-untyped-def]
    times = ingest_rate(sqlite_engine, measurements=200, repeats=2, profile=True)
    assert len(times.seconds) == 2 and all(rate > 0 for rate in times.rates)
    assert "ingest_envelope" in times.profile
    with Session(sqlite_engine) as session:
        assert session.exec(select(func.count()).select_from(Run)).one() == 3  # 2 timed + 1 profiled
        assert session.exec(select(func.count()).select_from(Benchmark)).one() == 200  # later runs extend the series
        assert session.exec(select(func.count()).select_from(Measurement)).one() == 600
        samples = session.exec(select(Measurement.samples)).all()
        assert min(map(len, samples)) >= 20 and max(map(len, samples)) <= 200
        fractions = session.exec(select(Measurement.roofline_fraction)).all()
        assert all(f is not None and 0 < f <= 1 for f in fractions)  # realistic: under the roof
    assert "(creates the series)" in ingest_section(times).markdown()


def test_ten_thousand_distinct_series() -> None:
    specs = benchmark_specs(10_000)
    assert len({(s.name, s.dtype) for s in specs}) == 10_000


def test_push_payload_is_a_valid_signed_push() -> None:
    sha = "a" * 40
    payload = push_payload("acme/kernels", "/tmp/kernels", "b" * 40, sha)
    push = PushEvent.model_validate(payload)
    assert push.ref == "refs/heads/main" and push.after == sha and push.repository.full_name == "acme/kernels"
    body = b'{"zen": "x"}'
    assert verify("s3cret", body, sign("s3cret", body))


@pytest.mark.parametrize("received, measuring", [
    ('{"ts": "2025-03-04T05:06:07.089000+00:00", "level": "INFO", "logger": "celery.worker.strategy", '
     '"message": "Task roofwatch.run_commit[roofwatch-run-3] received"}',
     '{"ts": "2025-03-04T05:06:07.123000+00:00", "level": "INFO", "logger": "roofwatch.workers.tasks", '
     '"message": "run 3: measuring acme/kernels@0123456789ab", "run_id": 3}'),
    ("2025-03-04T05:06:07.089Z INFO    celery.worker.strategy: Task roofwatch.run_commit[roofwatch-run-3] received",
     "2025-03-04T05:06:07.123Z INFO    roofwatch.workers.tasks: run 3: measuring acme/kernels@0123456789ab  run=3"),
    ("[2025-03-04 05:06:07,089: INFO/MainProcess] Task roofwatch.run_commit[roofwatch-run-3] received",
     "[2025-03-04 05:06:07,123: INFO/ForkPoolWorker-1] run 3: measuring acme/kernels@0123456789ab"),
], ids=["json", "text", "celery"])
def test_log_events_reads_worker_log_lines(received: str, measuring: str) -> None:
    text = "\n".join([" -------------- [queues]", received, measuring, "a continuation without a timestamp"])
    ((at, message),) = log_events(text, r"^run \d+: measuring ")
    ((before, _),) = log_events(text, r"roofwatch\.run_commit\[.*\] received")
    assert message.startswith("run 3: measuring") and at - before == pytest.approx(0.034, abs=1e-6)


def test_webhook_section_lists_each_stage() -> None:
    section = webhook_section(PushTiming(0.05, 0.06, 0.2), [PushTiming(0.04, 0.05, 0.1)] * 3)
    assert "device worker logged" in section.markdown()
