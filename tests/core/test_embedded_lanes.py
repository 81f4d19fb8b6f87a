"""Embedded mode's lanes: work no caller waits for runs in order on one thread, bound to its database."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import Engine, create_engine

from roofwatch.common import celery_app
from roofwatch.common.task_names import TaskName
from roofwatch.service.core import embedded, task_queue
from roofwatch.service.core.db import bound_to, get_engine

ENGINE: Engine = create_engine("sqlite://")
OTHER: Engine = create_engine("sqlite://")


class Gate:
    """Work that records what ran, and against which database, and waits until the test opens it."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.started = threading.Event()
        self.done: list[int] = []
        self.engines: list[Engine] = []
        self.failing: set[int] = set()

    def work(self, item: int) -> Callable[[], None]:
        def run() -> None:
            self.engines.append(get_engine())
            self.started.set()
            assert self.open.wait(30)
            if item in self.failing:
                raise RuntimeError(f"bug in {item}")
            self.done.append(item)
        return run


def _submit(lane: embedded.Lane, gate: Gate, items: list[int], keyed: bool = True, engine: Engine = ENGINE) -> None:
    with bound_to(engine):
        for item in items:
            lane.submit(gate.work(item), key=item if keyed else None)


def test_submit_never_waits_for_the_work() -> None:
    gate, lane = Gate(), embedded.Lane("test", exit_wait_s=1.0)
    _submit(lane, gate, [1])  # returns although the work is blocked
    assert gate.started.wait(30)
    assert not lane.drain(0)  # still running
    gate.open.set()
    assert lane.drain(30)
    assert gate.done == [1]


def test_order_is_kept_and_keyed_work_asked_for_twice_runs_once() -> None:
    gate, lane = Gate(), embedded.Lane("test", exit_wait_s=1.0)
    _submit(lane, gate, [1])
    assert gate.started.wait(30)  # 1 is running: asking for it again runs it once more, afterwards
    _submit(lane, gate, [2, 3, 1])
    _submit(lane, gate, [2, 4])
    gate.open.set()
    assert lane.drain(30)
    assert gate.done == [1, 2, 3, 1, 4]


def test_work_without_a_key_always_runs() -> None:
    gate, lane = Gate(), embedded.Lane("test", exit_wait_s=1.0)
    gate.open.set()
    _submit(lane, gate, [1, 1, 1], keyed=False)
    assert lane.drain(30)
    assert gate.done == [1, 1, 1]


def test_work_runs_against_the_database_it_was_submitted_in() -> None:
    gate, lane = Gate(), embedded.Lane("test", exit_wait_s=1.0)
    gate.open.set()
    _submit(lane, gate, [1])
    _submit(lane, gate, [1], engine=OTHER)  # the same key in another database is other work
    assert lane.drain(30)
    assert gate.done == [1, 1] and gate.engines == [ENGINE, OTHER]


def test_a_failure_does_not_stop_the_work_after_it() -> None:
    gate, lane = Gate(), embedded.Lane("test", exit_wait_s=1.0)
    gate.failing.add(2)
    gate.open.set()
    _submit(lane, gate, [1, 2, 3])
    assert lane.drain(30)
    assert gate.done == [1, 3]
    _submit(lane, gate, [4])  # the thread is still there for the next ones
    assert lane.drain(30)
    assert gate.done == [1, 3, 4]


@pytest.mark.parametrize(("task", "lane", "key"), [
    (TaskName.HANDLE_GITHUB_EVENT, "MEASURE", None),  # minutes of measuring: GitHub wants its answer now
    (TaskName.DELIVER_REPORT, "REPORTS", (TaskName.DELIVER_REPORT, 7)),  # one row, sent once however often asked
])
def test_embedded_sends_work_no_caller_waits_for_to_its_lane(monkeypatch: pytest.MonkeyPatch, task: TaskName,
                                                             lane: str, key: object) -> None:
    submitted: list[tuple[str, object]] = []
    for name in ("MEASURE", "REPORTS"):
        monkeypatch.setattr(getattr(embedded, name), "submit",
                            lambda work, key=None, name=name: submitted.append((name, key)))
    monkeypatch.setitem(celery_app.app.conf, "task_always_eager", True)
    args = ("push", "delivery-1", {}) if task == TaskName.HANDLE_GITHUB_EVENT else (7,)
    task_queue.send(task, *args)
    assert submitted == [(lane, key)]


def test_every_other_task_runs_where_it_is_sent() -> None:
    assert set(task_queue.LANE_OF) == {TaskName.HANDLE_GITHUB_EVENT, TaskName.DELIVER_REPORT}
    assert task_queue.KEYED <= set(task_queue.LANE_OF)
