"""The cause of each benchmark's A/B verdict, and the rule that identical code is an interaction.

Pure: an A/B's rounds (with each process's record of what it ran and its benchmark order), the
files the commit changed and each suite's environment changes in; per benchmark a JSON-ready
cause out (``attribution`` for the why, ``interactions`` for the evidence), and the verdict as it
is stored and reported (``judged``).

**Identical code is an interaction.** A move (``moved``: a regression or improvement, or an
inconclusive verdict whose estimate lies beyond the change that counts) of a benchmark whose
imported files, launched kernels and environment are identical on both sides, in every process,
while the commit changed nothing else that could reach it, is stored with direction
``interaction``: at any size, it is never a regression or improvement of that benchmark and never
decides a check. What
ran before it in its process, or the machine, moved it — and the evidence (its modes, which side
sat in which, per round, and the benchmark whose running earlier decides its mode, when one does)
is kept beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from roofwatch.ab import abtest
from roofwatch.ab.interactions import evidence
from roofwatch.ab.rounds import account, processes_of
from roofwatch.common.envelope import CompiledArtifactRecord, RoundRecord
from roofwatch.common.metrics import measuring_suite
from roofwatch.service.analysis.attribution import INTERACTION as INTERACTION_WHY
from roofwatch.service.analysis.attribution import attribute
from roofwatch.service.analysis.compiled import binary_verdict, for_tests

MOVED = ("regression", "improvement")
INTERACTION = "interaction"


def causes(rounds: list[RoundRecord], verdicts: Mapping[str, abtest.ABVerdict],
           renames: Mapping[str, str] | None = None, changed_files: Sequence[str] | None = None,
           environment_changes: Mapping[str, Sequence[str]] | None = None,
           units: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Per benchmark (``suite::name`` of the base), why it moved: ``attribution.Attribution.as_json()``,
    plus ``evidence`` (its modes, per round) for a benchmark that moved or whose processes split."""
    out: dict[str, dict[str, Any]] = {}
    base_binaries, head_binaries = compiled_sides(rounds)
    paired = account(rounds, renames).paired
    for key, measured in processes_of(rounds, renames).items():
        suite = measuring_suite(key.split("::", 1)[0])
        names = [key.split("::", 1)[-1], paired.get(key, key).split("::", 1)[-1]]
        # The compile suite names the tests that launched each binary: this benchmark's, on either side.
        binaries = binary_verdict(for_tests(base_binaries, names), for_tests(head_binaries, names)).diffs
        found = attribute([ran for p, ran in measured if p.side == "base"],
                          [ran for p, ran in measured if p.side == "head"],
                          list((environment_changes or {}).get(suite, [])), changed_files, binaries).as_json()
        verdict = verdicts.get(key)
        if found["cause"] == "identical" and verdict is not None and moved(verdict):
            found["why"] = INTERACTION_WHY
        shown = evidence([p for p, _ in measured], (units or {}).get(key, "s"))
        if shown and (verdict is not None and moved(verdict) or "modes" in shown):
            found["evidence"] = shown
        out[key] = found
    return out


def compiled_sides(rounds: Sequence[RoundRecord]) -> tuple[list[CompiledArtifactRecord], list[CompiledArtifactRecord]]:
    """The base's and the head's compiled binaries (a compile suite runs in round 0 only)."""
    base, head = (
        [a for r in rounds if r.side == side and r.index == 0 for s in r.suites if s.kind == "compile"
         for a in s.artifacts] for side in ("base", "head"))
    return base, head


def moved(verdict: abtest.ABVerdict) -> bool:
    """Did the benchmark move by the numbers: a regression or improvement, or an inconclusive one whose
    estimate lies beyond the change that counts (its rounds disagree, but not about whether it moved)?"""
    if verdict.direction in MOVED:
        return True
    return verdict.direction == "inconclusive" and math.isfinite(verdict.threshold_pct) \
        and abs(verdict.change_pct) > verdict.threshold_pct


def judged(verdict: abtest.ABVerdict, cause: Mapping[str, Any] | None) -> abtest.ABVerdict:
    """``verdict`` as stored: a move of identical code (``moved``) is an interaction, whatever its size."""
    if cause is None or cause.get("cause") != "identical" or not moved(verdict):
        return verdict
    evidence_line = (cause.get("evidence") or {}).get("line", "")
    reason = f"interaction ({verdict.direction} by the numbers, {verdict.change_pct:+.1f} %): " + \
        "nothing it imports or launches changed, nor its environment" + (f"; {evidence_line}" if evidence_line else "")
    return replace(verdict, direction=INTERACTION, reason=reason)  # type: ignore[arg-type]
