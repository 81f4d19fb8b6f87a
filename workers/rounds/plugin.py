"""The pytest plugin every benchmark suite runs under: which benchmarks run, and in what order.

The runner copies this package into the suite's scratch folder as ``roofwatch_rounds`` (the
sandbox sees no roofwatch installation, and a commit measured in its own environment has none)
and adds ``-p roofwatch_rounds.plugin`` with the options below to a benchmark suite's command.
Standard library and pytest only.

``--roofwatch-keep=FILE``
    A JSON list of benchmark names (pytest's ``item.name``, which pytest-benchmark records as a
    benchmark's ``name``): every other test is deselected. An A/B's later rounds measure only the
    benchmarks whose verdict is still open; a confirmation measures only its candidates.
``--roofwatch-order-seed=N``
    Run the tests in an order drawn from ``N``: modules shuffled, then the tests within each
    module (so a module's fixtures are still set up once). Both sides of an A/B round get the same
    seed, each round another: what ran before a benchmark varies from round to round and falls on
    both sides alike, so it becomes noise instead of bias.
``--roofwatch-calibration=FILE``
    A JSON object ``{name: [iterations, seconds]}``: pytest-benchmark's calibration of those
    benchmarks as an earlier round of the same side measured it (the iterations per timed round
    and what they took). They are not calibrated again: pytest-benchmark's search for an
    iteration count — and, with ``--benchmark-warmup`` on, the warm-up loop it runs inside that
    search — is skipped; the warm-up rounds before timing stay, since a fresh process needs them.
``--roofwatch-ran-root=DIR``
    Record, per benchmark, what it ran: the files under ``DIR`` (the repository) it imported and the
    Triton kernels it launched (``ran.py``), into the record below under ``"ran"``, keyed by the
    benchmark's name.
``--roofwatch-record=FILE``
    Write what was run, in order, as JSON: ``{"seed": N, "order": [nodeid, ...], "calibration":
    {name: [iterations, seconds]}, "ran": {name: {...}}}``, the calibration of every benchmark this
    process calibrated and, with ``--roofwatch-ran-root``, what each benchmark ran.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

KEEP_LIMIT = 100_000  # names one keep file may list
BENCHMARK_FIXTURE = "benchmark"  # pytest-benchmark's; ``kernel_benchmark`` requests it too
_ORDER = pytest.StashKey[list[str]]()
_CALIBRATED = pytest.StashKey[dict[str, list[float]]]()
_RESTORE = pytest.StashKey[object]()
_RAN = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roofwatch-rounds", "which benchmarks an A/B round measures, and in what order")
    group.addoption("--roofwatch-keep", metavar="FILE", default=None,
                    help="run only the tests whose names this JSON list holds")
    group.addoption("--roofwatch-order-seed", metavar="N", type=int, default=None,
                    help="run modules, and the tests within each, in an order drawn from N")
    group.addoption("--roofwatch-calibration", metavar="FILE", default=None,
                    help="reuse these benchmarks' calibrated iteration counts instead of calibrating again")
    group.addoption("--roofwatch-record", metavar="FILE", default=None,
                    help="write the order the tests ran in, and each benchmark's calibration, as JSON")
    group.addoption("--roofwatch-ran-root", metavar="DIR", default=None,
                    help="record the files under DIR each benchmark imported and the Triton kernels it launched")


def calibrations(path: str) -> dict[str, tuple[int, float]]:
    """``{name: (iterations, seconds)}`` from a calibration file; a malformed entry is left out."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or len(data) > KEEP_LIMIT:
        raise pytest.UsageError(f"--roofwatch-calibration: {path} must hold a JSON object of at most {KEEP_LIMIT} names")
    out: dict[str, tuple[int, float]] = {}
    for name, pair in data.items():
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int) and pair[0] >= 1 \
                and isinstance(pair[1], (int, float)) and 0 < pair[1] < float("inf"):
            out[name] = (pair[0], float(pair[1]))
    return out


def pytest_configure(config: pytest.Config) -> None:
    """Start recording what each benchmark runs; reuse the given calibrations, and note each one this
    process makes for the record."""
    root = config.getoption("--roofwatch-ran-root")
    if root:
        from .ran import Recorder

        config.stash[_RAN] = {"recorder": Recorder(root), "records": {}}
    try:
        from pytest_benchmark.fixture import BenchmarkFixture
    except ImportError:  # a suite without pytest-benchmark has nothing to calibrate
        return
    calibrate = getattr(BenchmarkFixture, "_calibrate_timer", None)
    if calibrate is None:  # a pytest-benchmark that calibrates otherwise: it does so every round
        return
    given_file = config.getoption("--roofwatch-calibration")
    given = calibrations(given_file) if given_file else {}
    made: dict[str, list[float]] = {}
    config.stash[_CALIBRATED], config.stash[_RESTORE] = made, calibrate

    def calibrate_once(fixture: object, runner: object) -> tuple[float, int, range]:
        name = getattr(fixture, "name", None)
        if isinstance(name, str) and name in given:
            iterations, seconds = given[name]
            return seconds, iterations, range(iterations)
        seconds, iterations, loops = calibrate(fixture, runner)
        if isinstance(name, str):
            made[name] = [iterations, seconds]
        return seconds, iterations, loops

    setattr(BenchmarkFixture, "_calibrate_timer", calibrate_once)  # a private name: checked above


def pytest_unconfigure(config: pytest.Config) -> None:
    calibrate = config.stash.get(_RESTORE, None)
    if calibrate is not None:
        from pytest_benchmark.fixture import BenchmarkFixture

        setattr(BenchmarkFixture, "_calibrate_timer", calibrate)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    state = item.config.stash.get(_RAN, None)
    if state is None or BENCHMARK_FIXTURE not in getattr(item, "fixturenames", ()):
        yield
        return
    state["recorder"].begin()
    try:
        yield
    finally:
        record = state["recorder"].end(item)
        kept = state["records"].get(item.name)
        # Two tests of one name (in two modules) are one benchmark to pytest-benchmark's JSON: both count.
        state["records"][item.name] = record if kept is None else _merged(kept, record)


def _merged(first: dict, second: dict) -> dict:
    kernels = first["kernels"] + [k for k in second["kernels"] if k not in first["kernels"]]
    notes = first.get("notes", []) + second.get("notes", [])
    merged = {"files": {**first["files"], **second["files"]}, "kernels": kernels,
              "complete": first["complete"] and second["complete"]}
    return {**merged, "notes": notes} if notes else merged


def keep_names(path: str) -> set[str]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list) or not all(isinstance(n, str) for n in data) or len(data) > KEEP_LIMIT:
        raise pytest.UsageError(f"--roofwatch-keep: {path} must hold a JSON list of at most {KEEP_LIMIT} names")
    return set(data)


def seeded_order(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """``items`` with their modules shuffled, then the tests within each module, by ``seed``."""
    rng = random.Random(seed)
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    names = sorted(modules)
    rng.shuffle(names)
    ordered: list[pytest.Item] = []
    for name in names:
        tests = list(modules[name])
        rng.shuffle(tests)
        ordered += tests
    return ordered


@pytest.hookimpl(trylast=True)  # after -k, -m and --deselect: select among what the suite itself kept
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep = config.getoption("--roofwatch-keep")
    if keep:
        wanted = keep_names(keep)
        dropped = [item for item in items if item.name not in wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if item.name in wanted]
    seed = config.getoption("--roofwatch-order-seed")
    if seed is not None:
        items[:] = seeded_order(items, seed)
    config.stash[_ORDER] = [item.nodeid for item in items]


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = session.config.getoption("--roofwatch-record")
    if not target:
        return
    record = {"seed": session.config.getoption("--roofwatch-order-seed"),
              "order": session.config.stash.get(_ORDER, []),
              "calibration": session.config.stash.get(_CALIBRATED, {})}
    ran = session.config.stash.get(_RAN, None)
    if ran is not None:
        record["ran"] = ran["records"]
    Path(target).write_text(json.dumps(record), encoding="utf-8")
