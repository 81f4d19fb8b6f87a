"""Structured logs: JSON lines and text lines that carry the run, comparison and task they are about."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from celery import Celery, signals

from roofwatch.workers import logs
from roofwatch.workers.logs import configure_logging, current_context, install_celery_logging, log_context, task_fields

SHA = "3f2a" + "0" * 36


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    """Where roofwatch's handler writes during the test; the root logger is restored afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    yield out
    root.handlers[:] = handlers
    root.setLevel(level)
    signals.setup_logging.disconnect(dispatch_uid="roofwatch-setup-logging")


def json_lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_json_lines_carry_the_context_inside_it_only(stream: io.StringIO) -> None:
    configure_logging("json", "info", stream=stream)
    log = logging.getLogger("roofwatch.test")
    with log_context(run_id=12, repository="acme/kernels", sha=SHA):
        log.info("measuring %s", "benchmarks")
        with log_context(comparison_id=3, sha=None):
            log.warning("nested")
    log.info("after")
    log.debug("below the level")
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("it broke")

    inside, nested, after, failed = json_lines(stream)
    assert inside["message"] == "measuring benchmarks" and inside["level"] == "INFO"
    assert inside["logger"] == "roofwatch.test"
    assert (inside["run_id"], inside["repository"], inside["sha"]) == (12, "acme/kernels", SHA)
    ts = datetime.fromisoformat(inside["ts"])
    assert ts.utcoffset() == timedelta(0) and list(inside)[0] == "ts"
    assert nested["run_id"] == 12 and nested["comparison_id"] == 3 and "sha" not in nested
    assert not {"run_id", "comparison_id", "repository", "sha"} & after.keys()
    assert failed["level"] == "ERROR" and "ZeroDivisionError" in failed["exc_info"]
    assert "Traceback" in failed["exc_info"]
    assert current_context() == {}


def test_celery_task_lines_keep_their_timing_not_their_arguments(stream: io.StringIO) -> None:
    configure_logging("json", "info", stream=stream)
    data = {"id": "t-1", "name": "roofwatch.run_commit", "args": "[{'clone_url': 'https://token@host/x.git'}]",
            "kwargs": "{}", "return_value": "{...}", "runtime": 1.5}
    logging.getLogger("celery.app.trace").info("Task %s succeeded", "roofwatch.run_commit", extra={"data": data})
    logging.getLogger("roofwatch.test").info("own", extra={"data": {"kept": True}})
    celery_line, own = json_lines(stream)
    assert "data" not in celery_line and celery_line["runtime_s"] == 1.5
    assert own["data"] == {"kept": True}


def test_text_lines_show_the_context(stream: io.StringIO) -> None:
    configure_logging("text", "debug", stream=stream)
    log = logging.getLogger("roofwatch.test")
    with log_context(run_id=12, task_name="roofwatch.run_commit", sha=SHA):
        log.debug("measuring")
    log.info("plain")
    first, second = stream.getvalue().splitlines()
    assert first.endswith("roofwatch.test: measuring  run=12 task=roofwatch.run_commit sha=3f2a00000000")
    assert " DEBUG " in first and first[:19].count("T") == 1 and first[23] == "Z"
    assert second.endswith("roofwatch.test: plain")


def test_configure_logging_replaces_its_own_handler(stream: io.StringIO) -> None:
    configure_logging("text", "info", stream=io.StringIO())
    configure_logging("json", "info", stream=stream)
    assert [h.get_name() for h in logging.getLogger().handlers].count("roofwatch") == 1
    logging.getLogger("x").info("once")
    assert len(json_lines(stream)) == 1
    with pytest.raises(ValueError):
        configure_logging("yaml", "info")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        with log_context(user="someone"):
            pass


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("roofwatch.run_commit", [{"run_id": 7, "idempotency_key": "k", "repository": "acme/kernels", "sha": SHA}],
     {"run_id": 7, "comparison_id": None, "repository": "acme/kernels", "sha": SHA}),
    ("roofwatch.run_ab", [{"comparison_id": 4, "run_id": 9, "repository": "acme/kernels", "base_sha": "b" * 40,
                           "head_sha": SHA}],
     {"run_id": 9, "comparison_id": 4, "repository": "acme/kernels", "sha": SHA}),
    ("roofwatch.ingest", [{"schema_version": 1, "run_id": 7, "repository": "acme/kernels", "sha": SHA}],
     {"run_id": 7, "comparison_id": None, "repository": "acme/kernels", "sha": SHA}),
    ("roofwatch.ingest_ab", [{"comparison_id": 4, "repository": "acme/kernels", "head_sha": SHA}],
     {"run_id": None, "comparison_id": 4, "repository": "acme/kernels", "sha": SHA}),
    ("roofwatch.run_started", [7], {"run_id": 7}),
    ("roofwatch.analyze", [7], {"run_id": 7}),
    ("roofwatch.report_run", [7], {"run_id": 7}),
    ("roofwatch.confirm_changes", [4], {"comparison_id": 4}),
    ("roofwatch.finish_pull_request", [4], {"comparison_id": 4}),
    ("roofwatch.handle_github_event", ["push", "d-1", {"repository": {"full_name": "acme/kernels"}}],
     {"delivery_id": "d-1", "repository": "acme/kernels"}),
    ("roofwatch.deliver_report", [5], {}),  # a report id, not a run
    ("roofwatch.analyze", [True], {"run_id": None}),
])
def test_task_fields(name: str, args: list[Any], expected: dict[str, Any]) -> None:
    assert task_fields(name, args, {}) == expected


def test_task_fields_from_keyword_arguments() -> None:
    assert task_fields("roofwatch.analyze", [], {"run_id": 7}) == {"run_id": 7}
    assert task_fields("roofwatch.run_commit", [], {"job": {"run_id": 7}})["run_id"] == 7


def test_task_signals_set_and_clear_the_context(stream: io.StringIO) -> None:
    configure_logging("json", "info", stream=stream)
    class FakeTask:  # what the signals get: the task object (hashable), whose name matters
        name = "roofwatch.run_commit"

    task = FakeTask()
    job = {"run_id": 7, "repository": "acme/kernels", "sha": SHA}
    with log_context(delivery_id="d-1"):
        signals.task_prerun.send(sender=task, task_id="t-1", task=task, args=[job], kwargs={})
        assert current_context() == {"delivery_id": "d-1", "run_id": 7, "repository": "acme/kernels", "sha": SHA,
                                     "task_id": "t-1", "task_name": "roofwatch.run_commit"}
        signals.task_postrun.send(sender=task, task_id="t-1", task=task, args=[job], kwargs={}, retval=None,
                                  state="SUCCESS")
        assert current_context() == {"delivery_id": "d-1"}
    assert current_context() == {}
    assert logs._task_tokens == {}


def test_an_eager_task_logs_with_its_run_id(stream: io.StringIO) -> None:
    configure_logging("json", "info", stream=stream)
    app = Celery("logs-test", set_as_current=False)
    app.conf.update(task_always_eager=True, task_eager_propagates=True)

    @app.task(name="roofwatch.analyze", shared=False)  # shared tasks would join every app made later
    def analyze(run_id: int) -> None:
        logging.getLogger("roofwatch.service.tasks").info("run %s: analysing", run_id)

    @app.task(name="roofwatch.finish_pull_request", shared=False)
    def finish(comparison_id: int) -> None:
        logging.getLogger("roofwatch.service.tasks").info("comparison %s: finishing", comparison_id)
        analyze.delay(5)  # eager inside eager: its own run id, then back to the comparison
        logging.getLogger("roofwatch.service.tasks").info("comparison %s: done", comparison_id)

    finish.delay(3)
    logging.getLogger("roofwatch.service.tasks").info("outside")
    lines = [line for line in json_lines(stream) if line["logger"] == "roofwatch.service.tasks"]
    assert [line["message"] for line in lines] == [
        "comparison 3: finishing", "run 5: analysing", "comparison 3: done", "outside"]
    start, inner, done, outside = lines
    assert start["comparison_id"] == 3 and start["task_name"] == "roofwatch.finish_pull_request"
    assert inner["run_id"] == 5 and inner["task_name"] == "roofwatch.analyze" and inner["task_id"] != start["task_id"]
    assert done["task_id"] == start["task_id"] and "run_id" not in done
    assert not {"run_id", "comparison_id", "task_id", "task_name"} & outside.keys()


def test_install_celery_logging_keeps_celery_off_the_root_logger(stream: io.StringIO) -> None:
    install_celery_logging("json", "warning")
    receivers = signals.setup_logging.send(sender=None, loglevel=logging.INFO, logfile=None, format="", colorize=False)
    assert receivers, "Celery configures its own handlers only when nobody answers setup_logging"
    root = logging.getLogger()
    ours = [h for h in root.handlers if h.get_name() == "roofwatch"]
    assert len(ours) == 1 and isinstance(ours[0].formatter, logs.JsonLineFormatter)
    assert root.level == logging.WARNING
