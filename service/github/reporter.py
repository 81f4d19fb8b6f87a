"""Embedded mode's reporter: one thread delivers GitHub reports, so that no run waits on GitHub.

Without a broker there is no queue to hand a report to, and delivering it inline held the run
for the GitHub client's retries (about 15 s a report during an outage). A report is a durable
row of the outbox before anyone asks to send it, so a flow only needs to say "this row
changed": ``submit`` notes the row and returns at once, this thread sends the row's newest
version, and what GitHub refused stays due for ``outbox.deliver_due`` (the sweep).

One thread, so reports reach GitHub in the order they were asked for; a row asked for again
before it went out is sent once, with its newest state. ``drain`` waits until everything
asked for so far has been tried: tests call it before reading the fake GitHub, and
``roofwatch serve`` on shutdown (bounded, the rest is in the outbox for the next start).
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Iterable

from sqlalchemy import Engine

from roofwatch.service.core.db import get_engine, session_scope
from roofwatch.service.github import outbox

log = logging.getLogger(__name__)

Deliver = Callable[[int, Engine], bool]
# At exit a process gives its last reports this long; the rest wait in the outbox for a sweep.
EXIT_WAIT_S = 10.0


class Reporter:
    """Deliveries in one daemon thread, started on the first ``submit``."""

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        # Insertion-ordered set of (engine, report id): a report belongs to the database it was
        # published in, even if the process points at another one by the time it is sent (tests).
        self._pending: dict[tuple[Engine, int], None] = {}
        self._busy = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def submit(self, report_ids: Iterable[int], engine: Engine | None = None) -> None:
        target = engine or get_engine()
        with self._changed:
            for report_id in report_ids:
                self._pending.setdefault((target, report_id))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._work, name="roofwatch-reporter", daemon=True)
                self._thread.start()
                atexit.register(self.drain, EXIT_WAIT_S)
            self._changed.notify_all()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every report submitted so far has been tried once; False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _work(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._pending))
                engine, report_id = next(iter(self._pending))
                del self._pending[(engine, report_id)]
                self._busy = True
            try:
                self._deliver(report_id, engine)
            except Exception:  # a bug in one delivery must not stop the ones after it
                log.exception("report %s: delivery failed; the sweep tries again", report_id)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()


_reporter = Reporter(lambda report_id, engine: outbox.deliver(report_id, engine=engine))


def submit(report_ids: Iterable[int]) -> None:
    """Have these outbox rows delivered soon, without waiting for GitHub."""
    _reporter.submit(report_ids)


def submit_due() -> None:
    """Queue every report whose backoff has passed: the embedded stand-in for ``deliver_reports``."""
    with session_scope() as session:
        due = outbox.due(session)
    _reporter.submit(due)


def drain(timeout: float | None = None) -> bool:
    """Wait until every report submitted so far has been tried once; False on timeout."""
    return _reporter.drain(timeout)
