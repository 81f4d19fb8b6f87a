"""``roofwatch serve`` in a process of its own, as deployed: its logging, its uvicorn, its event loop."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from support.tests_support import ROOFWATCH, child_env


@contextmanager
def roofwatch_serving(env: dict[str, str], log: Path, start_timeout: float = 90) -> Iterator[str]:
    """Start ``roofwatch serve`` with ``env`` (its output to ``log``); yield its base URL; stop it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as out:
        process = subprocess.Popen([str(ROOFWATCH), "serve", "--port", str(port)], env=child_env(env),
                                   stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + start_timeout  # only turns a hang into a failure
            while True:
                try:
                    if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"roofwatch serve did not start: {log.read_text()[-2000:]}")
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
