"""A hostile repository through `roofwatch run`: each attack fails in the sandbox, and worked without it.

The unconfined runs are the "before" of the same attacks (what ``ROOFWATCH_SANDBOX=unconfined``
still allows): they show the attacks are real, so the sandboxed runs failing them means something.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.environment import engine_for
from support.hostile_repo import ATTACK, Bait, attack_report, attacker_repo, daemons, suites, victim_repo, victim_report
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.workers import bubblewrap

MIB = 1 << 20
SECRETS = {"ROOFWATCH_GITHUB_TOKEN": "ghp_hostileTestToken0123456789abcdefABCD",
           "ROOFWATCH_API_TOKEN": "api-token-the-suite-must-not-see-4f1c",
           "ROOFWATCH_GITHUB_WEBHOOK_SECRET": "webhook-secret-the-suite-must-not-see-9e2a"}


class Listener:
    """A TCP port on loopback standing for roofwatch's own API: who reached it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            with connection:
                self.received.append(connection.recv(100))


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.socket.close()


def suite_outputs(database: Path) -> list[tuple[str, str]]:
    """(suite name, output) of every suite run, in order."""
    with sqlite3.connect(database) as connection:
        return connection.execute("SELECT name, output_tail FROM suiteexecution ORDER BY id").fetchall()


def run_attack(tmp_path: Path, listener: Listener, sandbox: str) -> dict[str, object]:
    data = tmp_path / "data"
    bait = Bait(secrets=list(SECRETS.values()), markers=tmp_path / "markers", port=listener.port,
                daemon=f"3600.{random.randrange(10**8):08d}", fill_bytes=64 * MIB, own_name="attacker")
    bait.markers.mkdir()
    attacker, victim = tmp_path / "attacker", tmp_path / "victim"
    attacker_repo(attacker, bait)
    victim_repo(victim, bait)
    env = {"ROOFWATCH_DATA_DIR": str(data), "ROOFWATCH_SANDBOX": sandbox,
           "ROOFWATCH_SUITE_FILE_SIZE_LIMIT": str(32 * MIB), "ROOFWATCH_SUITE_PRIVATE_SIZE": str(48 * MIB),
           **SECRETS}
    roofwatch(["db", "upgrade"], env)
    for repo in (victim, attacker, victim):  # the victim's mirror exists before the attack
        roofwatch(["run", "--repo", str(repo), "--rev", "main", "--force"], env, check=False)
    outputs = suite_outputs(data / "roofwatch.db")
    [attack] = [out for name, out in outputs if name == "attack"]
    [flood] = [out for name, out in outputs if name == "flood"]
    victims = [out for name, out in outputs if name == "victim"]
    survivors = daemons(bait.daemon)
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    with sqlite3.connect(data / "roofwatch.db") as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    return {"attack": attack_report(attack), "flood": flood, "victim_after": victim_report(victims[-1]),
            "survivors": survivors, "planted_table": "planted" in tables, "received": listener.received}


def test_every_attack_fails_in_the_sandbox(tmp_path: Path, listener: Listener) -> None:
    bubblewrap.check()  # a host without a working bubblewrap fails here, loudly
    found = run_attack(tmp_path, listener, "bubblewrap")

    assert found["attack"] == {
        "parent-environ": "blocked", "every-environ": "blocked", "database-read": "blocked",
        "database-write": "blocked", "mirror-objects": "blocked", "mirror-hook": "blocked",
        "foreign-home": "blocked", "home-persists": "blocked", "daemon-started": "succeeded",
        "network": "blocked", "fill-tmpdir": "blocked", "fill-home": "blocked",
    }
    assert found["survivors"] == [], "a daemon outlived its suite"
    assert found["received"] == []
    assert not found["planted_table"]
    assert found["victim_after"] == {"planted": [], "hooks": []}
    flood = str(found["flood"])
    assert "bytes of output dropped" in flood and len(flood) < 25_000


def test_without_the_sandbox_the_same_attacks_succeed(tmp_path: Path, listener: Listener) -> None:
    found = run_attack(tmp_path, listener, "unconfined")
    attack = found["attack"]
    assert isinstance(attack, dict)

    # What the unconfined opt-in still allows: this is why it is for a single trusted user only.
    succeeded = {name for name, verdict in attack.items() if verdict == "succeeded"}
    assert {"parent-environ", "database-read", "database-write", "mirror-objects", "mirror-hook",
            "daemon-started", "network"} <= succeeded
    assert found["survivors"], "the daemon should have outlived the unconfined suite"
    assert found["received"] == [b"exfiltrated\n"]
    assert found["planted_table"]
    # The hook lands in the victim's mirror, but hardened git (core.hooksPath) never runs it.
    assert found["victim_after"] == {"planted": [], "hooks": []}


DISTRIBUTED_SECRETS = {"ROOFWATCH_GITHUB_TOKEN": "ghp_distributedHostileToken0123456789abcd",
                       "ROOFWATCH_API_TOKEN": "api-token-the-worker-holds-7b3d",
                       "ROOFWATCH_GITHUB_WEBHOOK_SECRET": "webhook-secret-the-worker-holds-5c8e"}


@pytest.fixture
def postgres_with_password() -> Iterator[tuple[str, str]]:
    """A fresh PostgreSQL database and its URL carrying a password (the secret the suite hunts for)."""
    from sqlalchemy.engine import make_url
    from support.environment import POSTGRES_ADMIN_URL, fresh_postgres_database

    password = make_url(POSTGRES_ADMIN_URL).password or "pg-password-the-suite-must-not-see-2d7f"
    with fresh_postgres_database("roofwatch_hostile", "the distributed hostile test", password) as url:
        yield url, str(password)


@pytest.mark.redis
@pytest.mark.postgres
def test_every_attack_fails_in_a_worker_on_redis_and_postgres(tmp_path: Path, listener: Listener,
                                                              postgres_with_password: tuple[str, str]) -> None:
    """The attacker's suite, twice, through a real worker that holds every credential (a single-host
    worker serves ingest, so it has the database): the second run shows what the first left behind."""
    from sqlalchemy import text
    from support.worker_support import PrivateRedis, WorkerProcess

    bubblewrap.check()
    database_url, database_password = postgres_with_password
    redis = PrivateRedis(tmp_path / "redis", password="redis-password-the-suite-must-not-see-8a1b")
    redis.start()
    bait = Bait(secrets=[*DISTRIBUTED_SECRETS.values(), str(redis.password), database_password],
                markers=tmp_path / "markers", port=listener.port,
                daemon=f"3600.{random.randrange(10**8):08d}", fill_bytes=16 * MIB, own_name="attacker")
    bait.markers.mkdir()
    repo = tmp_path / "attacker"
    init(repo)
    first = commit(repo, "Add the attack", {"attack.py": ATTACK, "bait.json": bait.json(),
                                            "pyproject.toml": suites(("attack", "python attack.py"))}, 1)
    second = commit(repo, "Attack again", {"NOTES.md": "again\n"}, 2)
    service = {"ROOFWATCH_DATA_DIR": str(tmp_path / "service"), "ROOFWATCH_BROKER_URL": redis.url,
               "ROOFWATCH_DATABASE_URL": database_url}
    worker_data = tmp_path / "worker"
    worker = WorkerProcess([], {**service, **DISTRIBUTED_SECRETS, "ROOFWATCH_DATA_DIR": str(worker_data),
                                "ROOFWATCH_SUITE_FILE_SIZE_LIMIT": str(32 * MIB),
                                "ROOFWATCH_SUITE_PRIVATE_SIZE": str(8 * MIB)}, tmp_path / "worker.log")
    engine = engine_for(database_url)
    survivors: list[int] = []
    try:
        roofwatch(["db", "upgrade"], service)
        worker.start()
        roofwatch(["run", "--repo", str(repo), "--rev", first, "--rev", second], service, check=False, timeout=300)
        # The worker is still running: only the sandbox's PID namespace can have ended the daemon.
        survivors = daemons(bait.daemon)
        with engine.connect() as connection:
            outputs = [row.output_tail for row in connection.execute(text(
                "SELECT output_tail FROM suiteexecution WHERE name = 'attack' ORDER BY id"))]
    finally:
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        worker.stop()
        redis.stop()
        engine.dispose()

    assert len(outputs) == 2, (tmp_path / "worker.log").read_text()[-3000:]
    for output in outputs:
        assert attack_report(output) == {
            "parent-environ": "blocked", "every-environ": "blocked", "database-read": "blocked",
            "database-write": "blocked", "mirror-objects": "blocked", "mirror-hook": "blocked",
            "foreign-home": "blocked", "home-persists": "blocked", "daemon-started": "succeeded",
            "network": "blocked", "fill-tmpdir": "blocked", "fill-home": "blocked",
        }, output
        assert not any(secret in output for secret in bait.secrets)
    assert survivors == [], "a daemon outlived its suite while the worker ran on"
    assert listener.received == []
    # Nothing of the first run reached the second, nor the worker's data dir: no hook ran, no
    # usercustomize.py was left anywhere, the mirror holds no planted hook.
    assert list(bait.markers.iterdir()) == []
    assert list(worker_data.rglob("usercustomize.py")) == []
    assert list(worker_data.glob("mirrors/*/hooks/post-checkout")) == []
