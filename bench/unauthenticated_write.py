"""What a write without a token costs the server: ``PATCH /api/changes/1`` with a 160 MB JSON body.

Prints the answer, the seconds until it came, and the growth of the process's peak RSS (client and
server share the process; the client's body is allocated before the first reading). Run from the
repository root: ``python bench/unauthenticated_write.py``.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import tempfile
import time
from pathlib import Path

BODY_BYTES = 160 * 1024 * 1024


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    os.environ["ROOFWATCH_DATA_DIR"] = tempfile.mkdtemp(prefix="roofwatch-bench-")
    os.environ.pop("ROOFWATCH_DATABASE_URL", None)
    os.environ["ROOFWATCH_API_TOKEN"] = "bench-token-" + "x" * 32
    from support.live_server import serving

    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate

    migrate()
    body = b'{"state": "invalid", "note": "' + b"a" * BODY_BYTES + b'"}'
    with serving(create_app()) as base:
        host, port = base.removeprefix("http://").split(":")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.monotonic()
        with socket.create_connection((host, int(port))) as connection:
            connection.sendall(f"PATCH /api/changes/1 HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                               f"Content-Length: {len(body)}\r\n\r\n".encode())
            view = memoryview(body)
            try:
                for start in range(0, len(body), 1 << 20):
                    connection.sendall(view[start:start + (1 << 20)])
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server answered and closed: what is left is never sent
            status = connection.recv(200).split(b"\r\n")[0].decode()
        seconds = time.monotonic() - started
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    print("| request | answer | s | peak RSS growth (MiB) |\n|---|---|---|---|")
    print(f"| PATCH /api/changes/1, {BODY_BYTES // 2**20} MiB, no token | {status} | {seconds:.2f} | {grown:.0f} |")


if __name__ == "__main__":
    main()
