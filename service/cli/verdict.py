"""``roofwatch verdict``: the A/B decision on result files a team already has.

``--base B1.json B2.json … --head H1.json H2.json …``: file i of each side is round i (one
process each), paired in the order given. The files go through the readers ``upload`` uses
(pytest-benchmark, Google Benchmark, nvbench, asv), are laid out as the rounds of an A/B
envelope, and are decided by ``roofwatch.ab.rounds.round_verdicts`` — the very function the
service applies to a worker's rounds — so a verdict here is the verdict a pull request gets.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from roofwatch.ab import abtest
from roofwatch.ab.rounds import account, paired_rounds, round_verdicts
from roofwatch.common.envelope import RoundRecord, SuiteResult
from roofwatch.result_files.uploads import read_results
from roofwatch.service.core.errors import VerdictInputError
from roofwatch.service.core.reports import BenchmarkVerdictRow, ComparisonReport, MissingBenchmark
from roofwatch.service.core.verdict_rows import GATED, verdict_row
from roofwatch.suite_config.min_effect import parse_min_effect

SUITE = "results"


def split_sides(args: list[str]) -> tuple[list[Path], list[Path]]:
    """``--base`` and ``--head`` file lists from the words after the command's own options."""
    sides: dict[str, list[Path]] = {"--base": [], "--head": []}
    current: list[Path] | None = None
    for word in args:
        if word in sides:
            current = sides[word]
        elif word.startswith("-"):
            raise VerdictInputError(f"unknown option {word!r}")
        elif current is None:
            raise VerdictInputError(f"{word!r} comes before --base or --head")
        else:
            current.append(Path(word))
    base, head = sides["--base"], sides["--head"]
    if not base or not head:
        raise VerdictInputError("give result files of both sides: --base B1 B2 … --head H1 H2 …")
    if len(base) != len(head):
        raise VerdictInputError(f"rounds are paired in order: {len(base)} base file(s) but {len(head)} head file(s)")
    return base, head


def rounds_of(base: list[Path], head: list[Path], fmt: str = "auto") -> list[RoundRecord]:
    rounds: list[RoundRecord] = []
    for index, (b, h) in enumerate(zip(base, head)):
        for side, path in (("base", b), ("head", h)):
            parsed = read_results(path, fmt)  # UploadFormatError names the file and what is wrong
            suite = SuiteResult(name=SUITE, kind="benchmark", status="passed", measurements=parsed.measurements)
            rounds.append(RoundRecord(side=side, index=index, suites=[suite]))  # type: ignore[arg-type]
    return rounds


def decide(base: list[Path], head: list[Path], min_effect: str = "2%", fmt: str = "auto") -> ComparisonReport:
    """A report shaped like ``roofwatch compare --format json``'s, for these files."""
    try:
        effect = parse_min_effect(min_effect)
    except ValueError as exc:
        raise VerdictInputError(str(exc)) from exc
    rounds = rounds_of(base, head, fmt)
    decided = round_verdicts(rounds, effect, {})
    if not decided:
        raise VerdictInputError("no benchmark appears on both sides of every round")
    pairs = paired_rounds(rounds)
    rows = [_row(key, verdict, pairs[key]) for key, verdict in decided.items()]
    verdicts = list(decided.values())
    mdes = [v.mde_pct for v in verdicts if math.isfinite(v.mde_pct)]
    # As in a pull request: every benchmark of the base is accounted for, and one the head lost is
    # never a quiet pass.
    found = account(rounds)
    perf = abtest.overall(verdicts)
    missing: list[MissingBenchmark] = [{"suite": SUITE, "benchmark": key.split("::", 1)[1], "reason": reason}
                                       for key, reason in found.missing.items()]
    return {"verdict": "missing" if missing and perf in GATED else perf, "rounds": len(base),
            "min_effect_pct": 100 * effect, "mde_pct": max(mdes) if mdes else None, "benchmarks": rows,
            "new_failures": [], "error": "", "suites_source": "", "missing_on_head": missing,
            "new_on_head": [{"suite": SUITE, "benchmark": key.split("::", 1)[1]} for key in found.new]}


def _row(key: str, v: abtest.ABVerdict, values: tuple[list[float], list[float]]) -> BenchmarkVerdictRow:
    return verdict_row(v, name=key.split("::", 1)[1], suite=SUITE, base_median=statistics.median(values[0]),
                       head_median=statistics.median(values[1]), rounds=v.rounds)
