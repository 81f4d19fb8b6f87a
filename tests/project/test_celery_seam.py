"""Every task leaves through one module: ``roofwatch/common/celery_app.py`` sends, by the task's enum name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEAM = ROOT / "roofwatch" / "common" / "celery_app.py"
PRODUCT = ("service", "workers", "dashboard", "roofwatch")
SENDING = {"apply_async", "delay", "send_task", "signature", "s", "si"}  # what puts a task on the queue
CELERY_SENDERS = {"chain", "group", "chord", "signature"}  # celery's own constructors of something to send


def _sending_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "celery":
            found += [f"{name}:{node.lineno} imports celery.{a.name}" for a in node.names if a.name in CELERY_SENDERS]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in SENDING:
            # ``celery_app.signature``/``task_queue.signature`` are the seam's own, not a task's method
            owner = func.value.id if isinstance(func.value, ast.Name) else ""
            if owner not in {"celery_app", "task_queue"}:
                found.append(f"{name}:{node.lineno} .{func.attr}(…)")
    return found


def _modules() -> list[Path]:
    paths = []
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.resolve() != SEAM.resolve() and "migrations" not in path.parts and "templates" not in path.parts:
                paths.append(path)
    return paths


def test_nothing_but_the_seam_sends_a_task() -> None:
    offenders = [line for path in _modules() for line in _sending_calls(path)]
    assert offenders == []


def test_the_guard_sees_a_task_sent_around_the_seam(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from celery import chain\n\ndef go(task, app):\n    task.delay(1)\n"
                       "    app.send_task('roofwatch.analyze')\n    chain(task.s(), task.si()).apply_async()\n")
    found = _sending_calls(planted)
    assert len(found) == 6, found


@pytest.mark.parametrize("sender", ["send", "send_chain", "signature"])
def test_the_seam_takes_task_names_from_the_enum(sender: str) -> None:
    tree = ast.parse(SEAM.read_text())
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == sender)
    annotations = [ast.unparse(a.annotation) for a in function.args.args if a.annotation is not None]
    assert sender == "send_chain" or annotations[0] == "TaskName"
