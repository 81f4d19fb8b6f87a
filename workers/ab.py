"""Interleaved A/B of two commits on this device: base and head in alternating fresh processes.

Both commits are checked out side by side once. Round 0 runs every suite of each (so the
comparison also knows which tests fail on which side); each later round runs only the
benchmark suites, base and head each in a new process. Which side goes first is balanced
(every two rounds hold one A B and one B A) so that whatever favours the second process of a
pair — a warm page cache, a clock that has ramped up — falls on both sides equally, and it is
shuffled within each pair (seeded by the comparison, so a rerun repeats it): a strict
A B, B A, A B … puts the head in process slots 2, 3, 6, 7, …, which a neighbour that loads the
machine every fourth process would slow every single round.

Both sides run the suites of the side that judges (``workers/judging.py``): the repository's
stored config the job carries, else the **base** commit's table — never the head's, whose own
settings are listed as changes that take effect after merge — with any ``suites_from`` backfill
laid over both worktrees, so a comparison of a repository tracked from outside measures the
same series its runs do, and a pull request cannot change the command, timer, rounds,
``min_effect`` or device it is judged by.

After ``min_rounds`` the worker asks ``roofwatch.ab.abtest`` (pure numbers, no database)
whether every benchmark has a verdict; inconclusive ones get more rounds up to
``max_rounds``. The result is an ``ABEnvelope``; like every envelope it holds no credentials.
"""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from roofwatch.ab import abtest
from roofwatch.ab.rounds import account, round_selection, round_verdicts, still_open, stop_reason
from roofwatch.common.device import probe
from roofwatch.common.envelope import ABEnvelope, CommitRecord, DeviceInfo, RoundRecord, SettingChange, SuiteResult
from roofwatch.common.errors import CheckoutError, SuiteConfigError
from roofwatch.common.jobs import ABJob
from roofwatch.common.metrics import is_memory_suite
from roofwatch.git import checkout
from roofwatch.suite_config import min_effect
from roofwatch.suite_config.declared import SuiteSpec
from roofwatch.suite_config.external import SuiteFiles, noted
from roofwatch.workers import judging, modelled_device
from roofwatch.workers.backfill import lay_over
from roofwatch.workers.memory_suites import with_memory_suites
from roofwatch.workers.rounds.install import Selection
from roofwatch.workers.runner import run_suite

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


def min_effects_for(rounds: list[RoundRecord], specs: list[tuple[SuiteSpec, SuiteFiles | None]],
                    repository: float | None, memory: float = min_effect.DEFAULT_MEMORY_MIN_EFFECT) -> dict[str, float]:
    """Each measured benchmark's min_effect by ``suite::name``, from the judging side's suites; a peak-memory
    benchmark's is ``memory`` (``[tool.roofwatch] memory_min_effect``)."""
    by_suite = {spec.name: spec for spec, _ in specs}
    out: dict[str, float] = {}
    for record in rounds:
        for suite in record.suites:
            spec = by_suite.get(suite.name)
            for m in suite.measurements:
                if is_memory_suite(suite.name):
                    out[f"{suite.name}::{m.name}"] = memory
                    continue
                out[f"{suite.name}::{m.name}"] = min_effect.resolve(
                    m.name, spec.min_effects if spec else {}, spec.min_effect if spec else None, repository)
    return out


@dataclass(frozen=True)
class RoundStatus:
    """After a round: the benchmarks (``suite::name``) the next one measures, and what it cost."""

    index: int  # 0-based
    open: tuple[str, ...]
    round_s: float  # wall time of the round just finished
    eta_s: float  # rounds the open ones still need, at the measured round time (0: done)


RoundListener = Callable[[RoundStatus], None]


def _first_round(specs: dict[str, list[tuple[SuiteSpec, SuiteFiles | None]]], wanted: set[str] | None,
                 pairing: dict[str, str]) -> dict[str, dict[str, set[str]]] | None:
    """Round one measures every benchmark, or a confirmation's candidates (the head's renamed names too)."""
    if wanted is None:
        return None
    return round_selection(wanted, {k: renamed for k in wanted
                                    if (renamed := _renamed(k, pairing)) is not None})


def _renamed(key: str, pairing: dict[str, str]) -> str | None:
    suite, name = key.split("::", 1)
    new = pairing.get(key, pairing.get(name))
    return None if new is None else (new if "::" in new else f"{suite}::{new}")


def _suites_of_round(specs: list[tuple[SuiteSpec, SuiteFiles | None]], index: int,
                     chosen: dict[str, dict[str, set[str]]] | None, side: str) -> list[tuple[SuiteSpec, SuiteFiles | None]]:
    """Round one runs every suite (correctness is compared test by test, compiled code once); later
    rounds the benchmark suites that still hold an open benchmark (all of them, when ``chosen`` is None)."""
    if index == 0:
        return [(s, n) for s, n in specs if s.kind != "benchmark" or chosen is None or s.name in chosen[side]]
    return [(s, n) for s, n in specs if s.kind == "benchmark" and (chosen is None or s.name in chosen[side])]


def _time_left(verdicts: dict[str, abtest.ABVerdict], still: set[str], done: int, job: ABJob,
               round_s: float) -> float:
    """Seconds the open benchmarks still need: their rounds needed at the last round's wall time."""
    if not still:
        return 0.0
    needed = max(max(job.min_rounds, verdicts[k].rounds_needed or job.max_rounds) for k in still)
    return max(0, min(needed, job.max_rounds) - done) * round_s


def _compile_caches(data_dir: Path, job: ABJob) -> dict[str, Path]:
    """A compile cache per side for the rounds of this job: what Triton compiled in round one is not
    compiled again, and one commit never reads another's (or another job's) cache."""
    stem = hashlib.sha256(job.idempotency_key.encode()).hexdigest()[:16]
    caches = {side: data_dir / "compile-caches" / f"{stem}-{side}-{sha[:12]}"
              for side, sha in (("base", job.base_sha), ("head", job.head_sha))}
    for cache in caches.values():
        shutil.rmtree(cache, ignore_errors=True)  # a redelivered job starts from nothing it did not make
        cache.mkdir(parents=True)
    return caches


def run_ab(job: ABJob, device: DeviceInfo | None = None, progress: RoundProgress | None = None,
           on_round: RoundListener | None = None) -> ABEnvelope:
    started = datetime.now(UTC)
    measured_on: DeviceInfo = device or probe()
    data_dir = Path(job.data_dir)
    rounds: list[RoundRecord] = []
    commits: dict[str, CommitRecord | None] = {"base": None, "head": None}
    sources: dict[str, str] = {}
    effects = _Effects()
    changed: list[str] | None = None

    def envelope(status: str, reason: str = "") -> ABEnvelope:
        return ABEnvelope(
            comparison_id=job.comparison_id, idempotency_key=job.idempotency_key,
            repository=job.repository, base_sha=job.base_sha, head_sha=job.head_sha,
            status=status, reason=reason, base_commit=commits["base"], head_commit=commits["head"],  # type: ignore[arg-type]
            device=measured_on, rounds=rounds, started_at=started, finished_at=datetime.now(UTC),
            suites_source=suites_source(sources), min_effect=effects.repository,
            min_effects=effects.benchmarks, budget_s=job.budget_s, stop_reason=effects.stop_reason,
            judged_by=effects.judged_by, settings_changes=effects.settings_changes, renamed=effects.renamed,
            head_renamed=effects.head_renamed, missing_policy=effects.missing_policy,  # type: ignore[arg-type]
            left_open=effects.left_open if effects.stop_reason in ("budget", "round cap") else [],
            max_rounds=job.max_rounds, changed_files=changed,
        )

    try:
        mirror = checkout.ensure_mirror(data_dir / "mirrors", job.clone_url)
        for side, sha in (("base", job.base_sha), ("head", job.head_sha)):
            if not checkout.has_commit(mirror, sha):
                return envelope("errored", f"{side} commit {sha} does not exist in {job.repository}")
            commits[side] = CommitRecord(**vars(checkout.commit_info(mirror, sha)))
        changed = checkout.changed_paths(mirror, job.base_sha, job.head_sha)
        worktrees = data_dir / "worktrees"
        with checkout.worktree(mirror, job.base_sha, worktrees) as base_tree, \
                checkout.worktree(mirror, job.head_sha, worktrees) as head_tree:
            trees = {"base": base_tree, "head": head_tree}
            try:
                judged = judging.judging_of(base_tree, job.suites_toml, job.suites_label)
            except SuiteConfigError as exc:
                return envelope("errored", f"base: {exc}")
            if not judged.suites:
                where = " or the stored suites" if job.suites_toml else ""
                return envelope("errored", f"base: no [[tool.roofwatch.suites]] in pyproject.toml{where} "
                                "(suites a pull request adds are measured once it is merged)")
            try:
                head = judging.judging_of(head_tree, job.suites_toml, job.suites_label)
                effects.settings_changes = judging.changes(judged, head)
                effects.head_renamed = judging.pending_renames(judged, head)
            except SuiteConfigError as exc:
                effects.settings_changes = [judging.invalid_head(exc)]
            specs: dict[str, list[tuple[SuiteSpec, SuiteFiles | None]]] = {}
            for side, tree in trees.items():
                try:
                    specs[side] = [lay_over(mirror, tree, spec, job.suites_from) for spec in judged.suites]
                except SuiteConfigError as exc:
                    return envelope("errored", f"{side}: {exc}")
                sources[side] = judged.source
            # Both sides are measured on the device the judging side declares, by its rules.
            if judged.device is not None:
                measured_on = modelled_device.on_model(measured_on, judged.device)
            effects.judged_by = judged.source
            effects.repository = judged.min_effect if judged.min_effect is not None else min_effect.DEFAULT_MIN_EFFECT
            effects.renamed = judged.renamed
            effects.missing_policy = judged.missing_policy
            if judged.budget_s is not None:
                job = replace(job, budget_s=judged.budget_s)  # the repository's own word on its time
            job = judging.rounds_of(job, judged)
            effects.memory = judged.memory_min_effect or min_effect.DEFAULT_MEMORY_MIN_EFFECT
            _run_rounds(job, trees, specs, data_dir, rounds, progress, effects, on_round)
    except CheckoutError as exc:
        return envelope("errored", str(exc))

    # A derived memory suite shares its parent's process and status: the parent speaks for both.
    first = [(r.side, s) for r in rounds if r.index == 0 for s in r.suites if not is_memory_suite(s.name)]
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
    """What counts and what judges (filled from the judging side's config), and why rounds stopped."""

    repository: float = min_effect.DEFAULT_MIN_EFFECT
    memory: float = min_effect.DEFAULT_MEMORY_MIN_EFFECT  # of the peak-memory benchmarks
    benchmarks: dict[str, float] = field(default_factory=dict)
    stop_reason: str = ""
    judged_by: str = ""
    settings_changes: list[SettingChange] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    head_renamed: dict[str, str] = field(default_factory=dict)
    missing_policy: str = judging.DEFAULT_MISSING_POLICY
    left_open: list[str] = field(default_factory=list)  # benchmarks still undecided when rounds stopped

    @property
    def pairing(self) -> dict[str, str]:
        """Every declared rename pairs names while deciding; the head's own count as missing later."""
        return {**self.renamed, **self.head_renamed}


def round_seed(comparison_id: int, index: int) -> int:
    """The seed of round ``index``'s benchmark order: the same on both sides, another each round."""
    return int.from_bytes(hashlib.sha256(f"{comparison_id}:{index}".encode()).digest()[:4], "big")


def _run_rounds(job: ABJob, trees: dict[str, Path], specs: dict[str, list[tuple[SuiteSpec, SuiteFiles | None]]], data_dir: Path,
                rounds: list[RoundRecord], progress: RoundProgress | None, effects: _Effects,
                on_round: RoundListener | None = None) -> None:
    orders = round_orders(job.comparison_id, job.max_rounds)
    started = time.monotonic()
    last_round_s = 0.0
    wanted = set(job.only) if job.only else None
    chosen = _first_round(specs, wanted, effects.pairing)  # None: every benchmark
    caches = _compile_caches(data_dir, job)
    # Round one's calibration of each benchmark, per side and suite: later rounds do not search for
    # an iteration count again (the paired design is untouched: each side keeps its own).
    calibrated: dict[str, dict[str, dict[str, tuple[int, float]]]] = {"base": {}, "head": {}}
    try:
        for index in range(job.max_rounds):
            if index >= job.min_rounds and job.budget_s is not None \
                    and time.monotonic() - started + last_round_s > job.budget_s:
                effects.stop_reason = "budget"
                log.info("comparison %s: another round would pass the %.0f s budget", job.comparison_id, job.budget_s)
                return
            round_started = time.monotonic()
            seed = round_seed(job.comparison_id, index)
            for side in orders[index]:
                results: list[SuiteResult] = []
                for spec, files in _suites_of_round(specs[side], index, chosen, side):
                    report = (lambda suite, event, side=side: progress(index, side, suite, event)) if progress else None
                    names = None if chosen is None else chosen[side].get(spec.name)
                    selection = Selection(frozenset(names) if names is not None else None, seed,
                                          calibrated[side].get(spec.name, {}))
                    result = run_suite(spec, trees[side], data_dir, job, report, selection, caches.get(side))
                    if not index:
                        calibrated[side][spec.name] = result.calibration
                    elif selection.calibration:
                        result = result.model_copy(update={"calibrations_reused": sum(
                            1 for m in result.measurements if m.name in selection.calibration)})
                    if index:
                        result = result.model_copy(update={"output_tail": result.output_tail[-LATER_ROUND_OUTPUT:]})
                    results.append(noted(result, files))
                rounds.append(RoundRecord(side=side, index=index, suites=with_memory_suites(results)))  # type: ignore[arg-type]
            if index == 0:
                effects.benchmarks = min_effects_for(rounds, specs["base"], effects.repository, effects.memory)
            last_round_s = time.monotonic() - round_started
            done = index + 1
            verdicts = round_verdicts(rounds, effects.repository, effects.benchmarks, renames=effects.pairing)
            still = still_open(verdicts, done, job.min_rounds, job.max_rounds, wanted, to_cap=job.max_rounds_asked)
            effects.left_open = sorted(still)
            if on_round is not None:
                on_round(RoundStatus(index, tuple(sorted(still)), last_round_s,
                                     _time_left(verdicts, still, done, job, last_round_s)))
            reason = stop_reason(verdicts, still, wanted) if done >= job.min_rounds else None
            if reason is not None:
                effects.stop_reason = reason
                log.info("comparison %s: %s after %d round(s)", job.comparison_id, reason, done)
                return
            if job.later_rounds == "open":
                chosen = round_selection(still, account(rounds, effects.pairing).paired)
    finally:
        for cache in caches.values():
            shutil.rmtree(cache, ignore_errors=True)
    effects.stop_reason = "round cap"
    log.info("comparison %s: stopped at the cap of %d rounds", job.comparison_id, job.max_rounds)
