"""Real processes for the distributed tests: a private Redis, roofwatch workers, a TCP proxy.

Each test gets its own ``redis-server`` (on a free port, with an append-only file so a
restart keeps the queues, as in production) so that killing or restarting it touches no
other test, and workers are started, SIGKILLed and restarted as whole process groups.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

from support.tests_support import ROOFWATCH, child_env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.2) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class PrivateRedis:
    """``redis-server`` on a free port that a test may stop and start again; ``password`` sets ``requirepass``."""

    def __init__(self, directory: Path, password: str | None = None) -> None:
        self.directory = directory
        self.password = password
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             *(["--requirepass", self.password] if self.password else [])],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self._answers, 10, "redis-server to answer")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=20)
            self.process = None

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                if self.password:
                    sock.sendall(f"AUTH {self.password}\r\n".encode())
                    if not sock.recv(16).startswith(b"+OK"):
                        return False
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class WorkerProcess:
    """``roofwatch worker`` in its own process group, so SIGKILL takes all of it at once."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        full_env = child_env(self.env)
        handle = open(self.log, "ab")
        self.process = subprocess.Popen([str(ROOFWATCH), "worker", "--loglevel", "info", *self.args],
                                        env=full_env, stdout=handle, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        handle.close()
        wait_for(lambda: b"ready." in self.log.read_bytes(), 60, f"worker {self.args} to be ready")
        return self

    def kill(self) -> None:
        """SIGKILL the worker and its pool children, as a host losing power would."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=20)
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=20)
            except ProcessLookupError:
                pass
            self.process = None


class OutageProxy:
    """A TCP proxy to PostgreSQL that can refuse and cut every connection for a while."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_port()
        self.down = threading.Event()
        self.refused = 0  # connection attempts refused during the current outage
        self._connections: list[socket.socket] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def outage(self, seconds: float, until_refused: int = 0, timeout: float = 180.0,
               begun: Callable[[], None] | None = None) -> None:
        """Cut every open connection and refuse new ones for ``seconds``, and on until ``until_refused``
        connection attempts were refused (or ``timeout``): the outage is then certain to have been met,
        however long the work before it took on a busy host. ``begun`` is called once the database is
        away (to let the work that must meet the outage go on); only refusals after it count."""
        self.refused = 0
        self.down.set()
        with self._lock:
            for conn in self._connections:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self._connections.clear()
        if begun is not None:
            begun()
            self.refused = 0
        time.sleep(seconds)
        deadline = time.monotonic() + timeout
        while self.refused < until_refused and time.monotonic() < deadline:
            time.sleep(0.1)
        self.down.clear()

    def _accept(self) -> None:
        while True:
            client, _ = self._listener.accept()
            if self.down.is_set():
                self.refused += 1
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass


def suite_repo(path: Path, suites: dict[str, str], tests: dict[str, str]) -> str:
    """A one-commit repository whose ``[[tool.roofwatch.suites]]`` are ``suites`` (name → TOML body)."""
    path.mkdir(parents=True)
    pyproject = '[project]\nname = "suites-under-test"\nversion = "0"\n'
    for name, body in suites.items():
        pyproject += f'\n[[tool.roofwatch.suites]]\nname = "{name}"\n{textwrap.dedent(body).strip()}\n'
    (path / "pyproject.toml").write_text(pyproject)
    for name, text in tests.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(textwrap.dedent(text))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.email=t@example.com", "-c", "user.name=T", "commit", "-q", "-m", "suites"]):
        subprocess.run(["git", *args], cwd=path, check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, check=True, capture_output=True,
                          text=True).stdout.strip()
