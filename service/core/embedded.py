"""Embedded mode's executor: work no caller may wait for, on in-process lanes that stand in for queues.

Without a broker a task runs eagerly where it is sent. Two kinds of task must not:

- a webhook's work (``MEASURE``): a pull request's runs and A/Bs take minutes, GitHub wants its
  answer in seconds. One at a time, so the machine's device measures one thing at a time, as a
  Celery GPU worker with concurrency 1 would;
- a GitHub report's delivery (``REPORTS``): inline, it held the run for the client's retries
  (about 15 s a report during an outage). A report is a durable outbox row before anyone asks to
  send it, so a row asked for again before it went out is sent once, with its newest state.

A lane is one daemon thread that runs what it is given in the order it was given. Each piece runs
bound to the database engine of the moment it was submitted (``db.bound_to``): it belongs to
that database even if the process points at another by the time it runs (tests do). ``drain``
waits until everything submitted so far has been tried; at exit a process waits for all of its
measuring (as Python waits for a thread pool's work) and gives its reports ``REPORT_EXIT_WAIT_S``,
the rest staying in the outbox for the next sweep.

Which task goes to which lane is ``service/core/task_queue.py``'s to decide, with the rest of
the embedded-or-broker choice.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Hashable

from roofwatch.service.core.db import bound_to, get_engine

log = logging.getLogger(__name__)

REPORT_EXIT_WAIT_S = 10.0

Work = Callable[[], object]


class Lane:
    """Work in one daemon thread, started on the first ``submit``, in submission order."""

    def __init__(self, name: str, exit_wait_s: float | None) -> None:
        self.name = name
        self._exit_wait_s = exit_wait_s
        # Insertion-ordered: key → (engine, work). Work submitted again under a waiting key runs once.
        self._pending: dict[Hashable, tuple[object, Work]] = {}
        self._busy = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, work: Work, key: Hashable | None = None) -> None:
        """Run ``work`` on this lane; with a ``key`` already waiting (for the same database), only once."""
        engine = get_engine()
        with self._changed:
            # Unkeyed work gets a key of its own, which no caller's key can equal.
            self._pending.setdefault((id(engine), object() if key is None else key), (engine, work))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name=f"roofwatch-{self.name}", daemon=True)
                self._thread.start()
                atexit.register(self.drain, self._exit_wait_s)
            self._changed.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far has been tried once; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _work(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending))
                key = next(iter(self._pending))
                engine, work = self._pending.pop(key)
                self._busy = True
            try:
                with bound_to(engine):  # type: ignore[arg-type]
                    work()
            except Exception:  # one failure must not stop the work after it; the task recorded what it could
                log.exception("%s: embedded work failed", self.name)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()


MEASURE = Lane("embedded", exit_wait_s=None)
REPORTS = Lane("reporter", exit_wait_s=REPORT_EXIT_WAIT_S)


def drain(timeout: float | None = None) -> bool:
    """Wait for both lanes (measuring first: it publishes reports); False when either timed out."""
    return MEASURE.drain(timeout) and REPORTS.drain(timeout)
