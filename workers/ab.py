"""Interleaved A/B of two commits on this device: base and head in alternating fresh processes.

Both commits are checked out side by side once. Round 0 runs every suite of each (so the
comparison also knows which tests fail on which side); each later round runs only the
benchmark suites, base and head each in a new process. Which side goes first is balanced
(every two rounds hold one A B and one B A) so that whatever favours the second process of a
pair — a warm page cache, a clock that has ramped up — falls on both sides equally, and it is
shuffled within each pair (seeded by the comparison, so a rerun repeats it): a strict
A B, B A, A B … puts the head in process slots 2, 3, 6, 7, …, which a neighbour that loads the
machine every fourth process would slow every single round.

Both sides run the suites a normal run of each commit would (``external_suites.prepare_suites``):
the commit's own table, or the repository's stored config the job carries, by the same
precedence, with any ``suites_from`` backfill laid over both worktrees, so a comparison of a
repository tracked from outside measures the same series its runs do.

After ``min_rounds`` the worker asks ``roofwatch.service.analysis.abtest`` (pure numbers, no database)
whether every benchmark has a verdict; inconclusive ones get more rounds up to
``max_rounds``. The result is an ``ABEnvelope``; like every envelope it holds no credentials.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from roofwatch.common.envelope import ABEnvelope, CommitRecord, DeviceInfo, RoundRecord, SuiteResult
from roofwatch.common.errors import CheckoutError, SuiteConfigError
from roofwatch.common.jobs import ABJob
from roofwatch.service.analysis import abtest
from roofwatch.service.analysis.ab_rounds import round_verdicts
from roofwatch.workers import checkout, min_effect, modelled_device
from roofwatch.workers.device import probe
from roofwatch.workers.external_suites import noted, prepare_suites, repository_min_effect_of
from roofwatch.workers.runner import run_suite
from roofwatch.workers.suite_config import SuiteSpec

log = logging.getLogger(__name__)

LATER_ROUND_OUTPUT = 2000  # characters of output kept for rounds after the first




RoundProgress = Callable[[int, str, str, str], None]  # (0-based round, side, suite, "start" or its status)


def round_orders(seed: int, rounds: int) -> list[tuple[str, str]]:
    """Who goes first in each round: one A B and one B A in every pair of rounds, order shuffled."""
    rng = random.Random(seed)
    orders: list[tuple[str, str]] = []
    while len(orders) < rounds:
        pair = [("base", "head"), ("head", "base")]
        rng.shuffle(pair)
        orders += pair
    return orders[:rounds]


def min_effects_for(rounds: list[RoundRecord], specs: list[tuple[SuiteSpec, str]],
                    repository: float | None) -> dict[str, float]:
    """Each measured benchmark's min_effect by ``suite::name``, from the head's suites."""
    by_suite = {spec.name: spec for spec, _ in specs}
    out: dict[str, float] = {}
    for record in rounds:
        for suite in record.suites:
            spec = by_suite.get(suite.name)
            for m in suite.measurements:
                out[f"{suite.name}::{m.name}"] = min_effect.resolve(
                    m.name, spec.min_effects if spec else {}, spec.min_effect if spec else None, repository)
    return out


def _stop_reason(rounds: list[RoundRecord], effect: float, effects: dict[str, float], cap: int) -> str | None:
    """Why no more rounds are needed ("decided", "cannot settle" within ``cap``), or None to go on."""
    found = list(round_verdicts(rounds, effect, effects).values())
    if not found:
        return "decided"  # nothing to compare: more rounds will not change that
    if abtest.needs_more_rounds(found, cap):
        return None
    return "decided" if all(v.direction != "inconclusive" for v in found) else "cannot settle"


def run_ab(job: ABJob, device: DeviceInfo | None = None, progress: RoundProgress | None = None) -> ABEnvelope:
    started = datetime.now(UTC)
    measured_on: DeviceInfo = device or probe()
    data_dir = Path(job.data_dir)
    rounds: list[RoundRecord] = []
    commits: dict[str, CommitRecord | None] = {"base": None, "head": None}
    sources: dict[str, str] = {}
    effects = _Effects()

    def envelope(status: str, reason: str = "") -> ABEnvelope:
        return ABEnvelope(
            comparison_id=job.comparison_id, idempotency_key=job.idempotency_key,
            repository=job.repository, base_sha=job.base_sha, head_sha=job.head_sha,
            status=status, reason=reason, base_commit=commits["base"], head_commit=commits["head"],  # type: ignore[arg-type]
            device=measured_on, rounds=rounds, started_at=started, finished_at=datetime.now(UTC),
            suites_source=suites_source(sources), min_effect=effects.repository,
            min_effects=effects.benchmarks, budget_s=job.budget_s, stop_reason=effects.stop_reason,
        )

    try:
        mirror = checkout.ensure_mirror(data_dir / "mirrors", job.clone_url)
        for side, sha in (("base", job.base_sha), ("head", job.head_sha)):
            if not checkout.has_commit(mirror, sha):
                return envelope("errored", f"{side} commit {sha} does not exist in {job.repository}")
            commits[side] = CommitRecord(**vars(checkout.commit_info(mirror, sha)))
        worktrees = data_dir / "worktrees"
        with checkout.worktree(mirror, job.base_sha, worktrees) as base_tree, \
                checkout.worktree(mirror, job.head_sha, worktrees) as head_tree:
            trees = {"base": base_tree, "head": head_tree}
            specs: dict[str, list[tuple[SuiteSpec, str]]] = {}
            for side, tree in trees.items():
                try:
                    found, sources[side] = prepare_suites(mirror, tree, job.suites_toml, job.suites_label,
                                                          job.suites_from)
                except SuiteConfigError as exc:
                    return envelope("errored", f"{side}: {exc}")
                if not found:
                    where = " or the stored suites" if job.suites_toml else ""
                    return envelope("errored", f"{side}: no [[tool.roofwatch.suites]] in pyproject.toml{where}")
                specs[side] = found
            try:
                declared = repository_min_effect_of(head_tree, job.suites_toml)
            except SuiteConfigError as exc:
                return envelope("errored", f"head: {exc}")
            try:
                # Both sides are measured on the device the base declares: the trusted side's model.
                measured_on = modelled_device.device_for(measured_on, base_tree, job.suites_toml)
            except SuiteConfigError as exc:
                return envelope("errored", f"base: {exc}")
            effects.repository = declared if declared is not None else min_effect.DEFAULT_MIN_EFFECT
            _run_rounds(job, trees, specs, data_dir, rounds, progress, effects)
    except CheckoutError as exc:
        return envelope("errored", str(exc))

    first = [(r.side, s) for r in rounds if r.index == 0 for s in r.suites]
    passed_on_base = {s.name for side, s in first if side == "base" and s.status == "passed"}
    unfinished = [(side, s) for side, s in first if s.status in ("errored", "timeout")
                  # A benchmark suite the head breaks (a crash, an illegal memory access) measures
                  # nothing on the head: without this, the benchmarks that vanished would just be
                  # missing from the verdict. (A correctness suite's failures are compared test by test.)
                  or (side == "head" and s.kind == "benchmark" and s.status == "failed" and s.name in passed_on_base)]
    if unfinished:
        return envelope("failed", unfinished_reason(unfinished))
    return envelope("succeeded")


REASON_TAIL_LINES = 20  # of each unfinished suite's output, in the reason `compare` prints


def unfinished_reason(unfinished: Sequence[tuple[str, SuiteResult]]) -> str:
    """Which suites did not finish, each with its side, its reason and the last lines it printed:
    what a person needs to see in the terminal (or the JSON) without opening the dashboard."""
    names = sorted({s.name for _, s in unfinished})
    parts = [f"suites did not finish: {', '.join(names)}"]
    for side, suite in unfinished:
        tail = "\n".join(suite.output_tail.strip().splitlines()[-REASON_TAIL_LINES:])
        parts.append(f"{side} {suite.name}: {suite.status}: {suite.reason or 'no reason recorded'}"
                     + (f"\n{tail}" if tail else ""))
    return "\n".join(parts)


def suites_source(sources: dict[str, str]) -> str:
    """Where the suites of both sides came from, as a run records it; each side named when they differ."""
    if len(set(sources.values())) <= 1:
        return next(iter(sources.values()), "")
    return "; ".join(f"{side}: {source}" for side, source in sources.items())


@dataclass
class _Effects:
    """What counts (filled once the head's config is read) and why rounds stopped."""

    repository: float = min_effect.DEFAULT_MIN_EFFECT
    benchmarks: dict[str, float] = field(default_factory=dict)
    stop_reason: str = ""


def _run_rounds(job: ABJob, trees: dict[str, Path], specs: dict[str, list[tuple[SuiteSpec, str]]], data_dir: Path,
                rounds: list[RoundRecord], progress: RoundProgress | None, effects: _Effects) -> None:
    orders = round_orders(job.comparison_id, job.max_rounds)
    started = time.monotonic()
    last_round_s = 0.0
    for index in range(job.max_rounds):
        if index >= job.min_rounds and job.budget_s is not None \
                and time.monotonic() - started + last_round_s > job.budget_s:
            effects.stop_reason = "budget"
            log.info("comparison %s: another round would pass the %.0f s budget", job.comparison_id, job.budget_s)
            return
        round_started = time.monotonic()
        order = orders[index]
        for side in order:
            wanted = specs[side] if index == 0 else [(s, n) for s, n in specs[side] if s.kind == "benchmark"]
            results: list[SuiteResult] = []
            for spec, note in wanted:
                report = (lambda suite, event, side=side: progress(index, side, suite, event)) if progress else None
                result = run_suite(spec, trees[side], data_dir, job, report)
                if index:
                    result = result.model_copy(update={"output_tail": result.output_tail[-LATER_ROUND_OUTPUT:]})
                results.append(noted(result, note))
            rounds.append(RoundRecord(side=side, index=index, suites=results))  # type: ignore[arg-type]
        if index == 0:
            effects.benchmarks = min_effects_for(rounds, specs["head"], effects.repository)
        last_round_s = time.monotonic() - round_started
        done = index + 1
        if done >= job.min_rounds:
            reason = _stop_reason(rounds, effects.repository, effects.benchmarks, job.max_rounds)
            if reason is not None:
                effects.stop_reason = reason
                log.info("comparison %s: %s after %d round(s)", job.comparison_id, reason, done)
                return
    effects.stop_reason = "round cap"
    log.info("comparison %s: stopped at the cap of %d rounds", job.comparison_id, job.max_rounds)
