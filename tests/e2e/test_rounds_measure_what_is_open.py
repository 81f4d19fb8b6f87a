"""An A/B's later rounds measure only the benchmarks still undecided, read back from the stored rounds.

The repository's timings are set by the commit: three benchmarks sleep 30 ms on both sides (decided
"no change" at the first verdict the host's noise allows), one sleeps three times as long on the head
(a regression, decided once four rounds agree), and one is made undecidable for a while — the head's
process sleeps 30 ms times a factor that cycles 1.4, 0.714, 1 round by round (a counter file the suite
keeps in its worktree; out of step with which side runs first, which the paired test would take out),
so its rounds disagree until six of them average out. Whatever the host, every later
process must have run exactly what the rounds before it left open.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import Session, create_engine, select
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.ab.rounds import round_verdicts, still_open
from roofwatch.common.envelope import MeasurementRecord, RoundRecord, SuiteResult

PYPROJECT = """\
[project]
name = "rounds"
version = "0.0.1"

[tool.roofwatch]
min_effect = "100%"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=3 --benchmark-max-time=0.01 --benchmark-warmup=off"
"""
KERNELS = """\
import pathlib
import time

# Which round this process is: the suite's own count, kept in its worktree across rounds.
_COUNT = pathlib.Path(".round")
ROUND = int(_COUNT.read_text()) if _COUNT.exists() else 0
_COUNT.write_text(str(ROUND + 1))
FACTORS = {factors}


def quiet():
    time.sleep(0.03)


def slow():
    time.sleep({slow})


def wobbly():
    time.sleep(0.03 * FACTORS[ROUND % len(FACTORS)])
"""
BENCH = """\
from kernels import quiet, slow, wobbly


def test_quiet_a(benchmark):
    benchmark(quiet)


def test_quiet_b(benchmark):
    benchmark(quiet)


def test_quiet_c(benchmark):
    benchmark(quiet)


def test_slow(benchmark):
    benchmark(slow)


def test_wobbly(benchmark):
    benchmark(wobbly)
"""


def _rounds_from_details(rounds_run: list[dict], results: dict[str, tuple[list[float], list[float]]]) -> None:
    """Every later process ran exactly what the verdicts on the rounds before it left open.

    The rounds are rebuilt in the order the processes ran (which side went first decides the paired
    test's order term) from the values stored per benchmark; a benchmark's ``i``-th value is from
    the ``i``-th round that measured it.
    """
    ran: dict[int, dict[str, set[str]]] = {}
    for process in rounds_run:
        ran.setdefault(process["index"], {})[process["side"]] = set(process["suites"][0].get("names") or ())
    seen: dict[tuple[str, str], int] = {}
    records: list[RoundRecord] = []
    for process in rounds_run:
        index, side = process["index"], process["side"]
        if index and side == rounds_run[2 * index]["side"]:  # the first process of a later round
            expected = {k.split("::", 1)[1] for k in still_open(round_verdicts(records, 1.0, {}), index, 3, 8)}
            assert ran[index]["base"] == ran[index]["head"] == expected, (index, ran[index], expected)
        names = sorted(results) if index == 0 else sorted(ran[index][side])
        measurements = []
        for name in names:
            at = seen.get((side, name), 0)
            seen[(side, name)] = at + 1
            value = results[name][side == "head"][at]
            measurements.append(MeasurementRecord(name=name, median=value, iqr=0, min=value, mean=value, n=1))
        records.append(RoundRecord(side=side, index=index, suites=[SuiteResult(  # type: ignore[arg-type]
            name="benchmarks", kind="benchmark", status="passed", measurements=measurements)]))


def test_later_rounds_measure_only_the_open_benchmarks(tmp_path: Path) -> None:
    repo = tmp_path / "rounds"
    init(repo)
    base = commit(repo, "kernels", {"pyproject.toml": PYPROJECT, "bench/test_k.py": BENCH,
                                    "kernels.py": KERNELS.format(factors="[1.0]", slow=0.03)}, 1)
    head = commit(repo, "slow down one, wobble another", {
        "kernels.py": KERNELS.format(factors="[1.4, 0.714, 1.0]", slow=0.09)}, 2)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{tmp_path / 'rw.db'}",
           "ROOFWATCH_AB_MIN_ROUNDS": "3", "ROOFWATCH_AB_MAX_ROUNDS": "8"}
    done = roofwatch(["compare", base, head, "--repo", str(repo), "--format", "json"], env, check=False)
    report = json.loads(done.stdout)
    directions = {row["benchmark"]: row["direction"] for row in report["benchmarks"]}
    assert directions["test_slow"] == "regression" and done.returncode == 1, report
    assert {directions[f"test_quiet_{x}"] for x in "abc"} == {"none"}, directions

    from roofwatch.service.core.models import Benchmark, Comparison, ComparisonResult

    engine = create_engine(f"sqlite:///{tmp_path / 'rw.db'}")
    with Session(engine) as session:
        comparison = session.exec(select(Comparison)).one()
        results = {b.name: (r.base_values, r.head_values) for r, b in session.exec(
            select(ComparisonResult, Benchmark).where(ComparisonResult.benchmark_id == Benchmark.id))}
    engine.dispose()
    rounds_run = comparison.details["rounds_run"]
    measured = {(p["index"], p["side"]): p["suites"][0]["measured"] for p in rounds_run}
    assert measured[(0, "base")] == measured[(0, "head")] == 5
    # Each was measured in the rounds its verdict needed (a loaded host may make a quiet one need
    # more than three); the wobbly one in every round, after the others were decided.
    assert comparison.rounds > 4 and len(results["test_wobbly"][0]) == comparison.rounds, (comparison.rounds, results["test_wobbly"])
    assert len(results["test_slow"][0]) >= 4 and min(len(values[0]) for values in results.values()) == 3
    assert min(measured[(i, "base")] for i in range(1, comparison.rounds)) == 1
    _rounds_from_details(rounds_run, results)
    # What the API and the check said while it ran: the last round's progress, nothing left open.
    progress = comparison.details["progress"]
    assert progress["round"] == comparison.rounds and progress["open_count"] == 0 and progress["eta_s"] == 0
    # Both sides of a round ran their benchmarks in the round's seeded order, another each round.
    seeds = {(p["index"], p["side"]): p["suites"][0]["order_seed"] for p in rounds_run}
    assert all(seeds[(i, "base")] == seeds[(i, "head")] for i in range(comparison.rounds))
    assert len({seeds[(i, "base")] for i in range(comparison.rounds)}) == comparison.rounds
    # Round one calibrated every benchmark; no later process searched for an iteration count again.
    reused = {(p["index"], p["side"]): p["suites"][0].get("calibrations_reused", 0) for p in rounds_run}
    assert reused[(0, "base")] == reused[(0, "head")] == 0
    assert all(reused[key] == measured[key] for key in reused if key[0]), (reused, measured)
