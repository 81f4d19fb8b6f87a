"""Kernel histories planted from a declarative plan, whose timings the commits set, not the CPU.

Each planned commit says, per benchmark, how long one call takes, and per correctness test
whether it passes (and which ``max_abs_err`` it reports). The repository built from the plan
is a real git repository with plain pytest / pytest-benchmark suites; every commit's code holds
its own numbers, so whatever checks out commit ``c3`` — a run, a bisection step, either side of
an A/B — measures exactly what the plan set for ``c3``.

A benchmark's work is ``time.sleep(seconds)``: a 20 ms call and a 40 ms call stay 2× apart
however loaded the host is, because sleeping does not compete for a core. ``Busy(n)`` plants a
fixed amount of CPU work instead, for tests that want the real-CPU noise.

Environment shifts: every benchmark process reads the history's *slowdown file* once when it
starts and multiplies all its work by one common factor, as a machine that got slower would.
``PlantedHistory.slow_down`` writes that file; rules name the commits (plan names, or ``*``)
and, optionally, how many benchmark processes of that commit they slow before they lapse.

    history = plant_history(tmp_path / "kernels", [
        PlannedCommit("c0", benchmarks={"test_rmsnorm": 0.02, "test_softmax": 0.02},
                      checks={"test_softmax": Check(max_abs_err=1e-7)}),
        PlannedCommit("c1"),                                          # neutral
        PlannedCommit("c2", benchmarks={"test_rmsnorm": 0.04}),       # 2× slower
        PlannedCommit("c3", checks={"test_softmax": Check(passes=False, max_abs_err=1e-4)}),
        PlannedCommit("c4", checks={"test_softmax": Check(max_abs_err=1e-7)}),  # fixed
    ], dates="same")
    history.shas["c2"]                      # the SHA of commit c2
    history.slow_down(1.5, commits=["c4"], processes=2)   # c4's next 2 benchmark processes
"""

from __future__ import annotations

import json
import keyword
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sqlmodel import Session, col, select

DateMode = Literal["increasing", "same", "backwards"]
BASE_EPOCH = 1_700_000_000
CHECKS_MODULE = "checks.test_planted"
GIT_ENV = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass(frozen=True)
class Busy:
    """A fixed amount of CPU work: ``iterations`` rounds of a small arithmetic loop."""

    iterations: int


@dataclass(frozen=True)
class Check:
    """One correctness test: whether it passes, and the error it reports (``record_property``)."""

    passes: bool = True
    max_abs_err: float | None = None


Work = float | Busy  # seconds of sleep per call, or fixed CPU work


@dataclass(frozen=True)
class PlannedCommit:
    """One commit of the plan. Benchmarks and checks it leaves out keep the previous commit's.

    Benchmark and check names are the pytest function names (``test_…``); a benchmark is
    stored under that name, a check under ``checks.test_planted::<name>`` (see ``check_id``).
    A commit that changes nothing still differs from its parent: its own name is in its code.
    """

    name: str
    benchmarks: Mapping[str, Work] = field(default_factory=dict)
    checks: Mapping[str, Check | bool] = field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class PlantedHistory:
    repo: Path
    shas: dict[str, str]
    slowdown_file: Path
    # What each commit measures, after inheritance: commit name → benchmark → work.
    benchmarks: dict[str, dict[str, Work]]
    checks: dict[str, dict[str, Check]]

    def __getitem__(self, name: str) -> str:
        return self.shas[name]

    def slow_down(self, factor: float, commits: Iterable[str] = ("*",), processes: int | None = None) -> None:
        """Slow every benchmark of the named commits' next ``processes`` benchmark processes
        (all of them when None) by ``factor``; replaces earlier rules."""
        self.set_slowdowns([SlowdownRule(factor, tuple(commits), processes)])

    def set_slowdowns(self, rules: Sequence[SlowdownRule]) -> None:
        """Several rules at once; a process takes the first rule that names its commit and has
        processes left. Counting starts afresh with every call."""
        unknown = {c for rule in rules for c in rule.commits if c != "*" and c not in self.shas}
        if unknown:
            raise ValueError(f"slowdown names commits not in the plan: {sorted(unknown)}")
        for counter in self.slowdown_file.parent.glob(self.slowdown_file.name + ".used.*"):
            counter.unlink()
        payload = [{"factor": r.factor, "commits": list(r.commits), "processes": r.processes} for r in rules]
        self.slowdown_file.write_text(json.dumps({"rules": payload}))

    def clear_slowdowns(self) -> None:
        self.set_slowdowns([])

    def slowed_processes(self, rule_index: int = 0) -> int:
        """How many benchmark processes the rule has slowed so far."""
        counter = self.slowdown_file.parent / f"{self.slowdown_file.name}.used.{rule_index}"
        return int(counter.read_text() or 0) if counter.exists() else 0


@dataclass(frozen=True)
class SlowdownRule:
    factor: float
    commits: tuple[str, ...] = ("*",)
    processes: int | None = None

    def __post_init__(self) -> None:
        if not self.factor > 0:
            raise ValueError(f"a slowdown factor must be positive, got {self.factor}")
        if self.processes is not None and self.processes < 1:
            raise ValueError(f"processes must be at least 1 (or None for all), got {self.processes}")


def check_id(name: str) -> str:
    """The test id roofwatch stores for a planned check."""
    return f"{CHECKS_MODULE}::{name}"


def plant_history(repo: Path, plan: Sequence[PlannedCommit], dates: DateMode | Sequence[int] = "increasing",
                  rounds: int = 5, slowdown_file: Path | None = None, declare_suites: bool = True) -> PlantedHistory:
    """Create a git repository at ``repo`` (branch ``main``) holding ``plan``, oldest first.

    ``dates``: "increasing" (one minute apart), "same" (every commit one committer second),
    "backwards" (each commit a minute *before* its parent), or explicit epoch seconds per commit.
    ``rounds``: pytest-benchmark rounds per benchmark and process (also the minimum).
    ``declare_suites=False``: no commit has a ``[tool.roofwatch]`` table; track it with a stored
    config holding ``suites_table(rounds, with_checks)``.
    """
    _validate(plan)
    stamps = _stamps(len(plan), dates)
    slowdown_file = slowdown_file or repo.parent / f"{repo.name}-slowdown.json"
    repo.mkdir(parents=True, exist_ok=False)
    _git(repo, "init", "-q", "-b", "main")
    benchmarks: dict[str, Work] = {}
    checks: dict[str, Check] = {}
    shas: dict[str, str] = {}
    planned_benchmarks: dict[str, dict[str, Work]] = {}
    planned_checks: dict[str, dict[str, Check]] = {}
    for position, (planned, stamp) in enumerate(zip(plan, stamps, strict=True)):
        benchmarks = {**benchmarks, **planned.benchmarks}
        checks = {**checks, **{k: v if isinstance(v, Check) else Check(passes=v) for k, v in planned.checks.items()}}
        files = {
            "planted_timing.py": _timing_module(planned.name, slowdown_file),
            "bench/test_planted.py": _bench_module(benchmarks),
        }
        if checks:
            files["checks/test_planted.py"] = _checks_module(checks)
        files["pyproject.toml"] = PROJECT + (suites_table(rounds, with_checks=bool(checks)) if declare_suites else "")
        for name, content in files.items():
            path = repo / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        _git(repo, "add", "-A")
        when = f"@{stamp} +0000"  # "@": epoch seconds, however small
        _git(repo, "commit", "-q", "-m", planned.message or f"{planned.name}: planted commit",
             env={"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when})
        shas[planned.name] = _git(repo, "rev-parse", "HEAD")
        planned_benchmarks[planned.name] = dict(benchmarks)
        planned_checks[planned.name] = dict(checks)
    return PlantedHistory(repo=repo, shas=shas, slowdown_file=slowdown_file,
                          benchmarks=planned_benchmarks, checks=planned_checks)


def _validate(plan: Sequence[PlannedCommit]) -> None:
    if not plan:
        raise ValueError("a planted history needs at least one commit")
    names = [c.name for c in plan]
    if len(set(names)) != len(names):
        raise ValueError(f"commit names repeat: {names}")
    if not plan[0].benchmarks:
        raise ValueError("the first commit must plant at least one benchmark")
    for planned in plan:
        for name in [*planned.benchmarks, *planned.checks]:
            if not (name.startswith("test_") and name.isidentifier() and not keyword.iskeyword(name)):
                raise ValueError(f"{planned.name}: {name!r} is not a pytest function name (test_…)")
        for name, work in planned.benchmarks.items():
            amount = work.iterations if isinstance(work, Busy) else work
            if not amount > 0:
                raise ValueError(f"{planned.name}: {name} needs positive work, got {work!r}")


def _stamps(count: int, dates: DateMode | Sequence[int]) -> list[int]:
    if dates == "increasing":
        return [BASE_EPOCH + 60 * i for i in range(count)]
    if dates == "same":
        return [BASE_EPOCH] * count
    if dates == "backwards":
        return [BASE_EPOCH - 60 * i for i in range(count)]
    if isinstance(dates, str):
        raise ValueError(f"dates must be 'increasing', 'same', 'backwards' or epoch seconds, got {dates!r}")
    if len(dates) != count:
        raise ValueError(f"{len(dates)} dates for {count} commits")
    return [int(d) for d in dates]


def _git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=Kernel Dev", "-c", "user.email=dev@example.com", *args],
        cwd=repo, check=True, capture_output=True, text=True, env={**GIT_ENV, **(env or {})},
    ).stdout.strip()


PROJECT = """\
[project]
name = "planted-kernels"
version = "0.0.1"
"""


def suites_table(rounds: int = 5, with_checks: bool = True) -> str:
    """The ``[[tool.roofwatch.suites]]`` tables every planted commit declares (or a stored config holds)."""
    # Plugin autoload off: the host's pytest plugins would add seconds to every suite process.
    # A correctness suite without tests would error ("no tests collected"), so none is declared.
    correctness = """
[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
env = { PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }
timeout = 120
""" if with_checks else ""
    return f"""{correctness}
[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider -p pytest_benchmark.plugin --benchmark-only --benchmark-min-rounds={rounds} --benchmark-max-time=0.000001 --benchmark-warmup=off"
env = {{ PYTEST_DISABLE_PLUGIN_AUTOLOAD = "1" }}
timeout = 120
"""


# The slowdown hook, as each commit carries it. It reads the rules once per process, so every
# benchmark of one process shares one factor; counters are bumped under a lock because A/B
# sides may start at once.
_TIMING_TEMPLATE = '''\
"""Planted timing for commit {commit}: sleeps or fixed work, times the environment's factor."""

import fcntl
import json
import os
import time

COMMIT = {commit!r}
SLOWDOWN_FILE = {slowdown!r}


def _factor():
    try:
        with open(SLOWDOWN_FILE) as handle:
            rules = json.load(handle)["rules"]
    except FileNotFoundError:
        return 1.0
    for index, rule in enumerate(rules):
        if COMMIT not in rule["commits"] and "*" not in rule["commits"]:
            continue
        if rule["processes"] is None:
            return float(rule["factor"])
        counter = f"{{SLOWDOWN_FILE}}.used.{{index}}"
        with open(counter, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            used = int(handle.read() or 0)
            if used >= rule["processes"]:
                continue
            handle.seek(0)
            handle.truncate()
            handle.write(str(used + 1))
        return float(rule["factor"])
    return 1.0


FACTOR = _factor()


def pause(seconds):
    time.sleep(seconds * FACTOR)


def spin(iterations):
    total = 0
    for i in range(int(iterations * FACTOR)):
        total += i * i
    return total
'''


def _timing_module(commit: str, slowdown_file: Path) -> str:
    return _TIMING_TEMPLATE.format(commit=commit, slowdown=str(slowdown_file))


def _bench_module(benchmarks: Mapping[str, Work]) -> str:
    lines = ["from planted_timing import pause, spin", ""]
    for name, work in sorted(benchmarks.items()):
        call = f"spin, {work.iterations}" if isinstance(work, Busy) else f"pause, {work!r}"
        lines += ["", f"def {name}(benchmark):", f"    benchmark({call})", ""]
    return "\n".join(lines)


def _checks_module(checks: Mapping[str, Check]) -> str:
    lines = []
    for name, check in sorted(checks.items()):
        lines += ["", f"def {name}(record_property):"]
        if check.max_abs_err is not None:
            lines.append(f"    record_property('max_abs_err', {check.max_abs_err!r})")
        lines += [f"    assert {check.passes!r}, 'planted failure'", ""]
    return "\n".join(lines)


# Reading back what roofwatch stored, keyed the way the plan speaks: by SHA and by test name.

def stored_medians(database_url: str) -> dict[tuple[str, str], float]:
    """(commit SHA, benchmark name) → the stored median (seconds), over every run of it."""

    from roofwatch.service.core.models import Benchmark, Commit, Measurement, Run

    with _session(database_url) as session:
        rows = session.exec(
            select(Commit.sha, Benchmark.name, Measurement.median)
            .join(Run, col(Run.commit_id) == col(Commit.id))
            .join(Measurement, col(Measurement.run_id) == col(Run.id))
            .join(Benchmark, col(Benchmark.id) == col(Measurement.benchmark_id))
            .order_by(col(Run.id))
        ).all()
    return {(sha, name): median for sha, name, median in rows}  # the latest run wins


def stored_outcomes(database_url: str) -> dict[tuple[str, str], tuple[str, float | None]]:
    """(commit SHA, test id) → (outcome, max_abs_err) as stored for its latest run."""

    from roofwatch.service.core.models import Commit, Run, TestOutcome

    with _session(database_url) as session:
        rows = session.exec(
            select(Commit.sha, TestOutcome.test_id, TestOutcome.outcome, TestOutcome.max_abs_err)
            .join(Run, col(Run.commit_id) == col(Commit.id))
            .join(TestOutcome, col(TestOutcome.run_id) == col(Run.id))
            .order_by(col(Run.id))
        ).all()
    return {(sha, test_id): (outcome, err) for sha, test_id, outcome, err in rows}


@contextmanager
def _session(database_url: str) -> Iterator[Session]:
    from roofwatch.service.core.db import make_engine

    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            yield session
    finally:
        engine.dispose()  # no pooled connection left to hold a test database open
