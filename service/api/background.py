"""Work a request starts but must not wait for, in embedded mode.

Without a broker, webhook-triggered runs execute in the ``roofwatch serve`` process. They go
to one worker thread, so the machine's device measures one thing at a time (as a Celery GPU
worker with concurrency 1 would) and the webhook is answered at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

log = logging.getLogger(__name__)

_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="roofwatch-embedded")
_pending: set[Future[Any]] = set()


def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    future = _executor.submit(_logged, fn, *args)
    _pending.add(future)
    future.add_done_callback(_pending.discard)
    return future


def _logged(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        log.exception("background work %s failed", getattr(fn, "__name__", fn))
        raise


def drain(timeout: float | None = None) -> bool:
    """Wait until everything submitted so far has finished; False on timeout."""
    _, not_done = wait(list(_pending), timeout=timeout)
    return not not_done
