"""The embedded reporter: flows hand it report ids and go on; one thread delivers them in order."""

from __future__ import annotations

import threading

from sqlalchemy import Engine, create_engine

from roofwatch.service.github.reporter import Reporter

ENGINE: Engine = create_engine("sqlite://")


class Gate:
    """A delivery function that records what it was asked and blocks until the test opens it."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.started = threading.Event()
        self.delivered: list[int] = []
        self.failing: set[int] = set()

    def __call__(self, report_id: int, engine: Engine) -> bool:
        assert engine is ENGINE
        self.started.set()
        assert self.open.wait(30)
        if report_id in self.failing:
            raise RuntimeError(f"bug while sending {report_id}")
        self.delivered.append(report_id)
        return True


def test_submit_never_waits_for_the_delivery() -> None:
    gate = Gate()
    reporter = Reporter(gate)
    reporter.submit([1], ENGINE)  # returns although the delivery is blocked
    assert gate.started.wait(30)
    assert not reporter.drain(0)  # still delivering
    gate.open.set()
    assert reporter.drain(30)
    assert gate.delivered == [1]


def test_order_is_kept_and_a_row_asked_for_twice_is_sent_once() -> None:
    gate = Gate()
    reporter = Reporter(gate)
    reporter.submit([1], ENGINE)
    assert gate.started.wait(30)  # 1 is in flight: asking for it again sends its newest state once more
    reporter.submit([2, 3, 1], ENGINE)
    reporter.submit([2, 4], ENGINE)
    gate.open.set()
    assert reporter.drain(30)
    assert gate.delivered == [1, 2, 3, 1, 4]


def test_a_failing_delivery_does_not_stop_the_ones_after_it() -> None:
    gate = Gate()
    gate.failing.add(2)
    gate.open.set()
    reporter = Reporter(gate)
    reporter.submit([1, 2, 3], ENGINE)
    assert reporter.drain(30)
    assert gate.delivered == [1, 3]
    reporter.submit([4], ENGINE)  # the thread is still there for the next ones
    assert reporter.drain(30)
    assert gate.delivered == [1, 3, 4]
