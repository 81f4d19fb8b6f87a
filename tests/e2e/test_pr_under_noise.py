"""A pull request on a loaded host: a slowdown the data proves is a failing check, never a green one.

The benchmark's timing is set by the commit: every process sleeps ``BASE × u`` per call, ``u``
drawn once per process uniformly in [0.75, 1.25], so a round's head/base ratio is off by up to
±50 % — the noise a busy two-core host showed — while the head of the slow pull request sleeps
2.4 × as long. The whole real pipeline runs: a signed webhook, the interleaved A/B in fresh
sandboxed processes, the verdict, the commit status and the comment on a fake GitHub.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from support.fake_github import FakeGitHub
from support.github_support import SECRET, deliver, pull_request_payload
from support.sample_repo import commit, git, init

from roofwatch.service.core import embedded

REPO = "acme/noisy"
PYPROJECT = """\
[project]
name = "noisy-kernels"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=5 --benchmark-max-time=0.02 --benchmark-warmup=off"
"""
KERNEL = """\
import os
import random
import time

# This process's share of a busy host: one draw per process, as a neighbour's load would be.
LOAD = random.Random(os.getpid() ^ time.time_ns()).uniform(0.75, 1.25)
BASE = 0.010


def rmsnorm(work=1.0):
    time.sleep(BASE * work * LOAD)
"""
BENCH = "from kernel import rmsnorm\n\n\ndef test_rmsnorm(benchmark):\n    benchmark(rmsnorm, {work})\n"


@pytest.fixture
def noisy_repo(tmp_path: Path) -> dict[str, str]:
    """main: base; slow: 2.4 × the sleep; docs: the same code, a README."""
    repo = tmp_path / "noisy"
    init(repo)
    shas = {"base": commit(repo, "Add rmsnorm", {"pyproject.toml": PYPROJECT, "kernel.py": KERNEL,
                                                  "bench/test_kernel.py": BENCH.format(work=1.0)}, 1)}
    git(repo, "checkout", "-q", "-b", "slow")
    shas["slow"] = commit(repo, "rmsnorm: a second pass", {"bench/test_kernel.py": BENCH.format(work=2.4)}, 2)
    git(repo, "checkout", "-q", "-b", "docs", "main")
    shas["docs"] = commit(repo, "Document rmsnorm", {"README.md": "rmsnorm\n"}, 3)
    git(repo, "checkout", "-q", "main")
    shas["path"] = str(repo)
    return shas


@pytest.fixture
def client(roofwatch_env: Path, fake_github: FakeGitHub, noisy_repo: dict[str, str],
           monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from support.environment import _reset_caches

    for name, value in {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_TOKEN": FakeGitHub.STATIC_TOKEN,
                        "GITHUB_API_URL": fake_github.url, "AB_MAX_ROUNDS": "12",
                        "PUBLIC_URL": "http://roofwatch.test"}.items():
        monkeypatch.setenv(f"ROOFWATCH_{name}", value)
    _reset_caches()
    from roofwatch.service.api.app import create_app
    from roofwatch.service.core.db import migrate, session_scope
    from roofwatch.service.records.repositories import register

    migrate()
    with session_scope() as session:
        register(session, REPO, noisy_repo["path"], "main")
    with TestClient(create_app()) as test_client:
        yield test_client
    assert embedded.MEASURE.drain(600) and embedded.REPORTS.drain(120)


def _open(client: TestClient, corpus: Path, number: int, head: str, base: str) -> None:
    assert deliver(client, "pull_request", pull_request_payload(corpus, "opened", REPO, number, head, base)
                   ).status_code == 202
    assert embedded.MEASURE.drain(900) and embedded.REPORTS.drain(120)


def test_a_2x_slowdown_under_50_percent_noise_fails_the_check_and_is_named(
        client: TestClient, fake_github: FakeGitHub, noisy_repo: dict[str, str], shared_corpus: Path) -> None:
    _open(client, shared_corpus, 3, noisy_repo["slow"], noisy_repo["base"])
    final = fake_github.statuses(REPO, noisy_repo["slow"])[-1]
    (comment,) = fake_github.comments(REPO, 3)
    assert final["state"] == "failure" and "test_rmsnorm" in final["description"], (final, comment["body"])
    assert "Significant changes" in comment["body"] and "test_rmsnorm" in comment["body"]


def test_the_same_code_under_the_same_noise_is_never_a_regression(
        client: TestClient, fake_github: FakeGitHub, noisy_repo: dict[str, str], shared_corpus: Path) -> None:
    _open(client, shared_corpus, 4, noisy_repo["docs"], noisy_repo["base"])
    final = fake_github.statuses(REPO, noisy_repo["docs"])[-1]
    (comment,) = fake_github.comments(REPO, 4)
    # At ±50 % per round, 12 rounds cannot show a change under 2 %: the honest answer is
    # inconclusive (pending, never green), and never a regression.
    assert final["state"] in ("pending", "success") and "slower" not in final["description"], final
    assert "Significant changes" not in comment["body"]
