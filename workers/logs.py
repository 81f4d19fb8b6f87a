"""Log lines that say which run, comparison or task they are about, as text or as JSON lines.

``configure_logging`` installs one handler on the root logger. A filter on it copies the current
context — set with ``log_context(run_id=12)``, and by Celery's ``task_prerun`` / ``task_postrun``
for every task — onto each record, so a line logged anywhere below (the runner, the sandbox,
SQLAlchemy) carries it without being passed ids. Another takes secrets out of every line,
message and traceback alike (``roofwatch.common.redaction``: credentials in URLs, token shapes, the
configured secrets). The context lives in a ``contextvars`` variable:
it follows the code through calls and eager tasks, never leaks across threads or past its block.

``ROOFWATCH_LOG_FORMAT=json`` gives one object per line for a log shipper::

    {"ts": "2025-05-01T12:00:03.412000+00:00", "level": "INFO", "logger": "roofwatch.workers.tasks",
     "message": "run 12: measuring acme/kernels@3f2a…", "run_id": 12, "task_name": "roofwatch.run_commit", …}

so ``jq 'select(.run_id == 12)'`` over the logs of every host follows one run from the webhook to
the verdict. Text lines show the same fields at the end (``run=12 task=roofwatch.run_commit``).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import IO, Any, Literal

from celery import signals
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from roofwatch.common.redaction import RedactingFilter
from roofwatch.common.task_names import TaskName

LogFormat = Literal["text", "json"]

# The fields a context may hold, with the label text lines give them, in the order they show.
CONTEXT_FIELDS: Mapping[str, str] = MappingProxyType({
    "run_id": "run", "comparison_id": "comparison", "task_name": "task", "task_id": "task_id",
    "delivery_id": "delivery", "repository": "repo", "sha": "sha",
})

# Tasks whose first argument is an id (service/tasks.py); the others take a dict (a Job, an
# ABJob, a result envelope) that names its run or comparison itself.
RUN_ID_TASKS = frozenset({TaskName.RUN_STARTED, TaskName.ANALYZE, TaskName.REPORT_RUN})
COMPARISON_ID_TASKS = frozenset({TaskName.CONFIRM_CHANGES, TaskName.FINISH_PULL_REQUEST, TaskName.COMPARISON_STARTED})
GITHUB_EVENT_TASK = TaskName.HANDLE_GITHUB_EVENT  # (event, delivery_id, payload)

HANDLER_NAME = "roofwatch"
_EMPTY: Mapping[str, Any] = MappingProxyType({})
_context: ContextVar[Mapping[str, Any]] = ContextVar("roofwatch_log_context", default=_EMPTY)
# task id → context tokens to restore when it ends (a stack: an eager task may run inside itself).
_task_tokens: dict[str, list[Token[Mapping[str, Any]]]] = {}


def current_context() -> Mapping[str, Any]:
    return _context.get()


def _merged(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise TypeError(f"unknown log context field(s): {', '.join(sorted(unknown))}")
    merged = {**_context.get(), **fields}
    return MappingProxyType({k: v for k, v in merged.items() if v is not None})


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` to every record logged inside the block (``None`` removes a field)."""
    token = _context.set(_merged(fields))
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Copies the current log context onto each record; a field passed with ``extra=`` wins."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in _context.get().items():
            record.__dict__.setdefault(key, value)
        return True


# A message is one line: a newline or an ANSI escape inside a value (a suite name, a commit
# title from an upload) must not forge a line of its own or recolour a terminal.
_CONTROL = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))} | {0x0A: "\\n"}


def one_line(text: str) -> str:
    return text.translate(_CONTROL)


class TextFormatter(logging.Formatter):
    """``2025-05-01T12:00:03.412Z INFO    roofwatch.workers.tasks: run 12: measuring …  run=12 task=roofwatch.run_commit``."""

    converter = time.gmtime  # type: ignore[assignment]  # hosts in several time zones: their lines line up in UTC
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = one_line(record.message)
        fields = [(label, record.__dict__.get(key)) for key, label in CONTEXT_FIELDS.items()]
        shown = " ".join(f"{label}={one_line(str(v)[:12] if label == 'sha' else str(v))}"
                         for label, v in fields if v is not None)
        line = super().formatMessage(record)
        return f"{line}  {shown}" if shown else line


class JsonLineFormatter(JsonFormatter):
    """One JSON object per line: ts (ISO-8601, UTC), level, logger, message, context, exc_info."""

    def __init__(self) -> None:
        super().__init__(
            "{levelname}{name}{message}", style="{", timestamp="ts",
            rename_fields={"levelname": "level", "name": "logger"},
            # uvicorn adds an ANSI-coloured copy of some messages; it is noise in JSON.
            reserved_attrs=[*RESERVED_ATTRS, "color_message"],
        )

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        # Celery attaches ``data`` to its task lines: reprs of the arguments and the return value
        # (a job's clone URL, a webhook payload). The message names the task; keep the timing only.
        data = log_data.pop("data", None) if str(log_data.get("logger", "")).startswith("celery") else None
        if isinstance(data, dict) and isinstance(data.get("runtime"), int | float):
            log_data["runtime_s"] = data["runtime"]
        return {"ts": log_data.pop("ts"), **log_data}  # ts first: easier to read and to sort


def configure_logging(fmt: LogFormat = "text", level: str = "info", stream: IO[str] | None = None) -> None:
    """Send every log record to ``stream`` (stderr) in ``fmt``, with the run/task context on each line.

    Idempotent: a second call replaces the handler the first one installed. Also sets the
    context from Celery task signals, so tasks executed in this process (a worker, or eager
    tasks in embedded mode) are covered.
    """
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', not {fmt!r}")
    # The process's real stderr: a Celery worker may later swap sys.stderr for a logging proxy.
    handler = logging.StreamHandler(stream or sys.__stderr__ or sys.stderr)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(JsonLineFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    connect_task_signals()


# --- Celery ----------------------------------------------------------------------------------------

def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def task_fields(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """What a task's arguments say about the run, comparison or delivery it works on."""
    named = ("job", "envelope", "run_id", "comparison_id")
    first = args[0] if args else next((kwargs[k] for k in named if k in kwargs), None)
    if isinstance(first, Mapping):  # Job, ABJob, Envelope, ABEnvelope
        return {"run_id": _int(first.get("run_id")), "comparison_id": _int(first.get("comparison_id")),
                "repository": _str(first.get("repository")),
                "sha": _str(first.get("sha")) or _str(first.get("head_sha"))}
    if name in RUN_ID_TASKS:
        return {"run_id": _int(first)}
    if name in COMPARISON_ID_TASKS:
        return {"comparison_id": _int(first)}
    if name == GITHUB_EVENT_TASK:
        delivery = args[1] if len(args) > 1 else kwargs.get("delivery_id")
        payload = args[2] if len(args) > 2 else kwargs.get("payload")
        repository = payload.get("repository") if isinstance(payload, Mapping) else None
        return {"delivery_id": _str(delivery),
                "repository": _str(repository.get("full_name")) if isinstance(repository, Mapping) else None}
    return {}


def _task_prerun(task_id: str | None = None, task: Any = None, args: Sequence[Any] | None = None,
                 kwargs: Mapping[str, Any] | None = None, **_: Any) -> None:
    name = str(getattr(task, "name", "") or "")
    fields = {k: v for k, v in task_fields(name, args or (), kwargs or {}).items() if v is not None}
    token = _context.set(_merged({**fields, "task_id": task_id, "task_name": name or None}))
    _task_tokens.setdefault(str(task_id), []).append(token)


def _task_postrun(task_id: str | None = None, **_: Any) -> None:
    tokens = _task_tokens.get(str(task_id))
    if not tokens:
        return
    token = tokens.pop()
    if not tokens:
        del _task_tokens[str(task_id)]
    try:
        _context.reset(token)
    except ValueError:  # ended in another context than it began: do not leave its fields behind
        _context.set(_EMPTY)


def connect_task_signals() -> None:
    """Set the log context for each Celery task executed in this process (idempotent)."""
    signals.task_prerun.connect(_task_prerun, weak=False, dispatch_uid="roofwatch-log-context-prerun")
    signals.task_postrun.connect(_task_postrun, weak=False, dispatch_uid="roofwatch-log-context-postrun")


_celery_logging: tuple[LogFormat, str] = ("text", "info")


def _celery_setup_logging(**_: Any) -> None:
    configure_logging(*_celery_logging)


def install_celery_logging(fmt: LogFormat, level: str) -> None:
    """Log in roofwatch's format in a Celery worker: call before ``worker_main``.

    A receiver of ``setup_logging`` stops Celery from installing its own handlers (and from
    redirecting stdout/stderr into them); the receiver installs ours instead, in the worker and
    in any process that sets logging up again.
    """
    global _celery_logging
    _celery_logging = (fmt, level)
    configure_logging(fmt, level)
    signals.setup_logging.connect(_celery_setup_logging, weak=False, dispatch_uid="roofwatch-setup-logging")
