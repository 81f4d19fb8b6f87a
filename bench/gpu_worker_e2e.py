"""The production shape on one host: webhook → Redis → ``roofwatch worker --gpu 0`` → ingest → a confirmed change.

    python -m bench.gpu_worker_e2e --out DIR [--planted 1.0] [--spin-ms 2] [--timeout-s 300] [--no-kill]
    python -m bench.gpu_worker_e2e --screenshot DIR/roofwatch.db --out DIR   (here, with Chromium)

Everything runs on this host, as on a GPU box with no network: a private ``redis-server``, a
SQLite database, ``roofwatch serve`` (API, dashboard, webhook), a GPU worker (``--gpu 0``, the
device queue only, no database credentials) and a CPU worker (``cpu,ingest``, the database).
A small repository gets two commits on ``main``: a pytest-benchmark of a fixed-length spin
(``torch.cuda._sleep`` on a GPU, a sleep on the host elsewhere), and the same with the spin
``--planted`` longer (1.0 = twice as long). Each is pushed by a signed ``push`` webhook, one
after the other, as GitHub would send them. The second run is *detected* (its step against
the first), *confirmed* by the A/B the service schedules (both commits, interleaved fresh
processes) and stored as a change; during the second run the GPU worker is SIGKILLed (its
whole process group, as a host losing power) and restarted under its name, and the run must
end once, measured once.

Written to ``--out``: ``e2e.json`` (every step's time, the runs, the change, the SIGKILL's
outcome, pass or fail per check), ``e2e.md`` (the same as tables), ``roofwatch.db`` (the SQLite
database, for a dashboard screenshot elsewhere), ``dashboard.tar.gz`` (the HTML of the
overview, changes, runs, benchmark and roofline pages) and ``logs.tar.gz``. Exit status 1 when
a check fails.

``--screenshot DB`` serves a copy of that database here and saves PNGs of the same pages
through headless Chromium (Playwright), for the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.service_overhead import (
    Logs,
    _git,
    _healthy,
    free_port,
    log_events,
    private_redis,
    push_payload,
    stop,
)
from roofwatch.common.device import probe
from roofwatch.common.task_names import queue_name
from roofwatch.service.github.signature import sign

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = "kernels/spin"
PAGES = ("/", "/changes", "/roofline")

PYPROJECT = """\
[project]
name = "spin"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python3 -m pytest bench_spin.py -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=20 --benchmark-max-time=0.5"
timeout = 300
"""
# A spin of fixed length: GPU clock cycles where there is a GPU (the time then follows the
# card, on both commits alike); elsewhere a sleep, which a busy host delays by its wake-up
# latency only, where a busy-wait would lose whole time slices to other processes.
BENCHMARK = """\
import time

SPIN_S = {spin_s!r}


def spin(device):
    if device is not None:
        import torch

        torch.cuda._sleep(int(SPIN_S * device))
        torch.cuda.synchronize()
        return
    time.sleep(SPIN_S)


def _cycles_per_s():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    # The SM clock's rate of torch.cuda._sleep, at the clock it runs at now (both commits alike).
    torch.cuda._sleep(1000000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(20000000)
    end.record()
    torch.cuda.synchronize()
    return 20000000 / (start.elapsed_time(end) / 1e3)


DEVICE = _cycles_per_s()


def test_spin(benchmark):
    benchmark(spin, DEVICE)
"""


@dataclass
class Outcome:
    """What the run found: steps with their times (s), checks with pass/fail and why."""

    device: str
    steps: list[tuple[str, float]] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)

    def step(self, name: str, seconds: float) -> None:
        self.steps.append((name, round(seconds, 2)))
        print(f"  {name}: {seconds:.1f} s", flush=True)

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        self.checks.append((name, ok, detail))
        print(f"  {'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)


def make_repo(path: Path, spin_s: float, planted: float) -> tuple[str, str]:
    """The two commits: ``(base, slow)`` SHAs; the slow one spins ``1 + planted`` times as long."""
    path.mkdir(parents=True)
    (path / "pyproject.toml").write_text(PYPROJECT)
    (path / "bench_spin.py").write_text(BENCHMARK.format(spin_s=spin_s))
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "A spin of fixed length")
    base = _git(path, "rev-parse", "HEAD").strip()
    (path / "bench_spin.py").write_text(BENCHMARK.format(spin_s=round(spin_s * (1 + planted), 9)))
    _git(path, "commit", "-q", "-am", "Spin longer")
    return base, _git(path, "rev-parse", "HEAD").strip()


def roofwatch_argv(*args: str) -> list[str]:
    """``roofwatch ARGS`` through this interpreter: the console script need not be installed."""
    return [sys.executable, "-c", "from roofwatch.service.cli.main import main; main()", *args]


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


class Database:
    """Read-only looks at the SQLite file the service writes (plain sqlite3: nothing to configure)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30) as connection:
            return list(connection.execute(sql, params))

    def run_of(self, sha: str, trigger: str = "push") -> tuple[int, str, str | None] | None:
        found = self.rows("SELECT run.id, run.state, run.error FROM run JOIN \"commit\" c ON run.commit_id = c.id "
                          "WHERE c.sha = ? AND run.trigger = ? ORDER BY run.id", sha, trigger)
        return found[-1] if found else None  # type: ignore[return-value]

    def finished(self, sha: str) -> tuple[int, str, str | None] | None:
        run = self.run_of(sha)
        return run if run and run[1] not in ("queued", "running") else None


def _worker(label: str, argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = open(log, "ab")
    try:
        # Its own process group: SIGKILL then takes the worker and its pool children at once.
        return subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        handle.close()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def _push(client: httpx.Client, url: str, secret: str, clone_url: str, before: str, after: str) -> float:
    body = json.dumps(push_payload(REPOSITORY, clone_url, before, after)).encode()
    headers = {"X-GitHub-Event": "push", "X-GitHub-Delivery": str(uuid.uuid4()),
               "X-Hub-Signature-256": sign(secret, body), "Content-Type": "application/json",
               "User-Agent": "GitHub-Hookshot/e2e"}
    sent = time.monotonic()
    response = client.post(url + "/webhooks/github", content=body, headers=headers)
    if response.status_code != 202 or response.json().get("outcome") != "accepted":
        raise RuntimeError(f"the push was not accepted: {response.status_code} {response.text}")
    return time.monotonic() - sent


def run_e2e(out: Path, work: Path, planted: float, spin_s: float, timeout_s: float, kill: bool) -> Outcome:
    device = probe()
    outcome = Outcome(f"{device.device_class} ({device.name})" if hasattr(device, "name") else device.device_class)
    print(f"device {outcome.device}; work in {work}", flush=True)
    started = time.monotonic()
    repo = work / "spin"
    base, slow = make_repo(repo, spin_s, planted)
    db_path = work / "roofwatch.db"
    database = Database(db_path)
    secret = uuid.uuid4().hex
    device_queue = queue_name(device.device_class)
    logs_dir = work / "logs"
    logs_dir.mkdir()
    with private_redis() as redis_url, ExitStack() as stack:
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")} | {
            "ROOFWATCH_BROKER_URL": redis_url, "ROOFWATCH_LOG_FORMAT": "json", "COLUMNS": "200",
            # No bubblewrap on a bare GPU host; the suites are this script's own.
            "ROOFWATCH_SANDBOX": os.environ.get("ROOFWATCH_SANDBOX", "unconfined"),
        }
        service_env = base_env | {
            "ROOFWATCH_DATA_DIR": str(work / "service"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{db_path}",
            "ROOFWATCH_GITHUB_WEBHOOK_SECRET": secret, "ROOFWATCH_PR_DEVICE_CLASS": device.device_class,
        }
        # The GPU worker gets the broker only: no database, no GitHub credentials.
        gpu_env = base_env | {"ROOFWATCH_DATA_DIR": str(work / "gpu0")}
        t = time.monotonic()
        subprocess.run(roofwatch_argv("db", "upgrade"), env=service_env, check=True, capture_output=True)
        subprocess.run(roofwatch_argv("repo", "add", REPOSITORY, "--clone-url", str(repo), "--default-branch", "main"),
                       env=service_env, check=True, capture_output=True)
        outcome.step("database migrated, repository registered", time.monotonic() - t)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        logs = {name: Logs(logs_dir / f"{name}.log") for name in ("serve", "cpu", "gpu0")}
        for log in logs.values():
            log.path.touch()
        processes: dict[str, subprocess.Popen[bytes]] = {}
        gpu_argv = roofwatch_argv("worker", "--gpu", "0", "--name", "gpu0", "--queues", device_queue,
                                  "--loglevel", "info")
        t = time.monotonic()
        processes["serve"] = _worker("serve", roofwatch_argv("serve", "--port", str(port)), service_env,
                                     logs["serve"].path)
        processes["cpu"] = _worker("cpu", roofwatch_argv("worker", "--name", "cpu", "--queues", "cpu,ingest",
                                                         "--loglevel", "info"), service_env, logs["cpu"].path)
        processes["gpu0"] = _worker("gpu0", gpu_argv, gpu_env, logs["gpu0"].path)

        def stop_all() -> None:
            for process in processes.values():
                stop(process)

        stack.callback(stop_all)
        try:
            wait_for(lambda: _healthy(url), 120, "roofwatch serve")
            for name in ("cpu", "gpu0"):
                wait_for(lambda: logs[name].shows(" ready."), 180, f"the {name} worker")  # called before `name` moves on
            outcome.step("serve and two workers up (the GPU worker calibrates its device first)",
                         time.monotonic() - t)
            with httpx.Client(timeout=60) as client:
                # First push: the base commit.
                t = time.monotonic()
                answered = _push(client, url, secret, str(repo), "0" * 40, base)
                first = wait_for(lambda: database.finished(base), timeout_s, "the base commit's run")
                outcome.step(f"push 1 (base {base[:10]}): webhook answered in {answered * 1e3:.0f} ms, run "
                             f"{first[0]} {first[1]}", time.monotonic() - t)
                outcome.check("base run succeeded", first[1] == "succeeded", str(first[2] or ""))
                # Second push: the slow commit; the GPU worker is killed while measuring it.
                t = time.monotonic()
                logs["gpu0"].mark()
                _push(client, url, secret, str(repo), base, slow)
                if kill:
                    wait_for(lambda: log_events(logs["gpu0"].since_mark(), r"^run \d+: measuring "), timeout_s,
                             "the GPU worker to start measuring the slow commit")
                    # Into the suite: the spin is being timed when the power goes.
                    time.sleep(2.0)
                    killed_at = time.monotonic()
                    _kill_group(processes["gpu0"])
                    outcome.step("GPU worker SIGKILLed mid-run", killed_at - t)
                    processes["gpu0"] = _worker("gpu0", gpu_argv, gpu_env, logs["gpu0"].path)
                    wait_for(lambda: logs["gpu0"].shows("requeued what it held"), 120,
                             "the restarted worker to requeue what it held")
                    outcome.step("restarted worker requeued what it held", time.monotonic() - killed_at)
                second = wait_for(lambda: database.finished(slow), timeout_s, "the slow commit's run")
                outcome.step(f"push 2 (slow {slow[:10]}): run {second[0]} {second[1]}", time.monotonic() - t)
                outcome.check("slow run succeeded", second[1] == "succeeded", str(second[2] or ""))
                # Detected (a candidate step), then confirmed by the A/B the service schedules.
                t = time.monotonic()
                query = ("SELECT ch.id, ch.kind, ch.change_pct, ch.ci_low, ch.ci_high, ch.p_value, ch.phase "
                         "FROM change ch JOIN \"commit\" c ON ch.first_bad_commit_id = c.id WHERE c.sha = ?")
                wait_for(lambda: database.rows(query, slow), timeout_s, "the candidate change")
                outcome.step("step detected (a candidate) after the slow run", time.monotonic() - t)
                t = time.monotonic()
                change = wait_for(lambda: [row for row in database.rows(query, slow)
                                           if row[6] in ("confirmed", "rejected")], timeout_s,
                                  "the A/B to confirm or reject the candidate")
                outcome.step(f"candidate {change[0][6]} by A/B", time.monotonic() - t)
        except (TimeoutError, RuntimeError, subprocess.CalledProcessError) as exc:
            outcome.check("the flow finished", False, str(exc))
            change = []
        finally:
            for log in logs.values():
                shutil.copy(log.path, logs_dir / log.path.name) if log.path.parent != logs_dir else None
        _record(outcome, database, base, slow, planted, change, kill, logs)
        if _healthy(url):
            _save_pages(url, database, out / "dashboard.tar.gz")
    outcome.step("total", time.monotonic() - started)
    if db_path.exists():
        # Through SQLite's backup: a plain copy of the file would miss what is still in its WAL.
        with sqlite3.connect(db_path) as source, sqlite3.connect(out / "roofwatch.db") as target:
            source.backup(target)
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        tar.add(logs_dir, arcname="logs")
    return outcome


def _record(outcome: Outcome, database: Database, base: str, slow: str, planted: float, change: list[Any],
            kill: bool, logs: dict[str, Logs]) -> None:
    if not database.path.exists():
        return
    runs = database.rows("SELECT run.id, c.sha, run.trigger, run.state, run.error FROM run "
                         "JOIN \"commit\" c ON run.commit_id = c.id ORDER BY run.id")
    outcome.runs = [{"id": r[0], "sha": r[1], "trigger": r[2], "state": r[3], "error": r[4]} for r in runs]
    for sha, label in ((base, "base"), (slow, "slow")):
        pushed = [r for r in runs if r[1] == sha and r[2] == "push"]
        if not pushed:
            continue
        run_id = pushed[0][0]
        executions = database.rows("SELECT count(*) FROM suiteexecution WHERE run_id = ?", run_id)[0][0]
        measurements = database.rows("SELECT count(*) FROM measurement WHERE run_id = ?", run_id)[0][0]
        outcome.check(f"{label} commit: one push run, one suite execution, one measurement",
                      len(pushed) == 1 and executions == 1 and measurements == 1,
                      f"{len(pushed)} runs, {executions} suite executions, {measurements} measurements")
    if kill:
        outcome.check("the SIGKILLed delivery was requeued by the restarted worker",
                      "requeued what it held" in logs["gpu0"].path.read_text())
    if change:
        change_id, kind, size, low, high, p, phase = change[0]
        outcome.changes = [{"id": change_id, "kind": kind, "phase": phase, "change_pct": size, "ci_low": low,
                            "ci_high": high, "p_value": p, "planted_pct": 100 * planted}]
        shown = "–" if None in (size, low, high) else f"{size:+.1f}% [{low:+.1f}, {high:+.1f}]"
        outcome.check("a confirmed perf-regression on the slow commit, its interval above min_effect",
                      phase == "confirmed" and kind == "perf-regression" and low is not None and low > 2.0,
                      f"{phase} {kind} {shown}, planted +{100 * planted:.0f}% of the spin")
    ab = database.rows("SELECT c.state, c.verdict, c.rounds, c.details FROM comparison c WHERE c.purpose = 'confirm'")
    outcome.check("one confirmation A/B, decided", len(ab) == 1 and ab[0][0] == "succeeded",
                  "; ".join(f"{state}, {verdict}, {rounds} rounds in {json.loads(details).get('spent_s', 0):.0f} s"
                            for state, verdict, rounds, details in ab))


def _save_pages(url: str, database: Database, target: Path) -> None:
    paths = list(PAGES)
    paths += [f"/runs/{row[0]}" for row in database.rows("SELECT id FROM run ORDER BY id")]
    paths += [f"/benchmarks/{row[0]}" for row in database.rows("SELECT id FROM benchmark ORDER BY id")]
    with tempfile.TemporaryDirectory() as scratch, httpx.Client(timeout=60) as client:
        folder = Path(scratch) / "dashboard"
        folder.mkdir()
        for path in paths:
            response = client.get(url + path)
            name = (path.strip("/").replace("/", "-") or "overview") + ".html"
            (folder / name).write_text(f"<!-- GET {path}: {response.status_code} -->\n{response.text}")
        with tarfile.open(target, "w:gz") as tar:
            tar.add(folder, arcname="dashboard")


def markdown(outcome: Outcome) -> str:
    lines = [f"# A Celery GPU worker end to end on {outcome.device}", "", "| step | s |", "|---|---:|"]
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in outcome.steps]
    lines += ["", "| check | result | detail |", "|---|---|---|"]
    lines += [f"| {name} | {'pass' if ok else '**fail**'} | {detail} |" for name, ok, detail in outcome.checks]
    lines += ["", "| run | commit | trigger | state |", "|---:|---|---|---|"]
    lines += [f"| {r['id']} | {r['sha'][:10]} | {r['trigger']} | {r['state']} |" for r in outcome.runs]
    return "\n".join(lines) + "\n"


def screenshot(db: Path, out: Path) -> int:
    """Serve a copy of ``db`` here and save PNGs of the dashboard's pages (Chromium via Playwright)."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("no chromium on this host")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "roofwatch.db"
        shutil.copy(db, copy)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("ROOFWATCH_")} | {
            "ROOFWATCH_DATABASE_URL": f"sqlite:///{copy}", "ROOFWATCH_DATA_DIR": scratch}
        serve = subprocess.Popen(roofwatch_argv("serve", "--port", str(port)), env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(lambda: _healthy(url), 60, "roofwatch serve")
            paths = list(PAGES) + [f"/benchmarks/{row[0]}" for row in Database(copy).rows("SELECT id FROM benchmark")]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, headless=True,
                                                     args=["--no-sandbox", "--disable-gpu"])
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                for path in paths:
                    page.goto(url + path, wait_until="networkidle")
                    name = (path.strip("/").replace("/", "-") or "overview") + ".png"
                    page.screenshot(path=str(out / name), full_page=True)
                    print(f"written {out / name}")
                browser.close()
        finally:
            stop(serve)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_worker_e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--planted", type=float, default=1.0, help="the slow commit's extra spin, a fraction")
    parser.add_argument("--spin-ms", type=float, default=2.0)
    parser.add_argument("--timeout-s", type=float, default=300.0, help="for each wait")
    parser.add_argument("--no-kill", action="store_true", help="leave the GPU worker alone")
    parser.add_argument("--screenshot", type=Path, metavar="DB", help="PNGs of the dashboard over this database")
    args = parser.parse_args(argv)
    if args.screenshot:
        return screenshot(args.screenshot, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="roofwatch-e2e-") as scratch:
        outcome = run_e2e(args.out, Path(scratch), args.planted, args.spin_ms / 1e3, args.timeout_s, not args.no_kill)
    (args.out / "e2e.json").write_text(json.dumps({
        "device": outcome.device, "steps": outcome.steps, "checks": outcome.checks, "runs": outcome.runs,
        "changes": outcome.changes, "passed": outcome.passed}, indent=1))
    (args.out / "e2e.md").write_text(markdown(outcome))
    print(f"{'passed' if outcome.passed else 'FAILED'}; written {args.out}")
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
