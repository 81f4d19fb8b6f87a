"""Send a Celery task by its registered name: the service's one way onto the queue.

Nothing in the service imports a task module to send work; a task is named (``roofwatch.*``),
and ``roofwatch.service.tasks`` — the one module that implements them — imports the flows, not the other
way round. Embedded (no broker), the task runs eagerly in this process.
"""

from __future__ import annotations

from celery import Signature

from roofwatch.common.celery_app import app


def signature(name: str, *args: object, immutable: bool = False) -> Signature:
    if app.conf.task_always_eager:
        # An eager signature runs the registered task object: make sure every module that
        # registers one (the app's ``include``) has been imported in this process.
        app.loader.import_default_modules()
    # A plain str: Celery reads a ``.name`` off anything that has one, and an enum member does.
    return app.signature(str(name), args=args, immutable=immutable)


def send(name: str, *args: object) -> None:
    signature(name, *args).apply_async()
