"""A series read in branch order: where a test started and stopped failing, where timing stepped.

Pure: points in (ordered by first-parent position, never by dates), episodes and steps out.
Each call looks at the whole series, so measuring a history in order, out of order, twice or
in two halves gives the same answer once the same commits are measured.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np

from roofwatch.service.analysis import changepoints, compare

ADJACENT_ALPHA = 0.01  # candidates only: every one is confirmed by A/B before it is a change
RUN_NOISE_HISTORY = 30  # latest points whose run-to-run spread sizes the adjacent comparison
LEVEL_POINTS = 5  # earlier commits whose median is the level a point is held against


@dataclass(frozen=True)
class Outcome:
    """One test's outcome at one commit (the latest run's)."""

    position: int
    sha: str
    failing: bool


@dataclass(frozen=True)
class Episode:
    """A stretch of measured commits on which a test fails.

    The test broke after ``last_good`` (``None``: it never passed before) and at or before
    ``first_bad``; ``fixed_at`` is the first measured commit after it on which it passes again.
    """

    last_good: Outcome | None
    first_bad: Outcome
    fixed_at: Outcome | None


def failure_episodes(outcomes: Sequence[Outcome]) -> list[Episode]:
    """Every failing stretch of one test, oldest first; ``outcomes`` one per commit."""
    ordered = sorted(outcomes, key=lambda o: o.position)
    episodes: list[Episode] = []
    last_good: Outcome | None = None
    first_bad: Outcome | None = None
    for outcome in ordered:
        if outcome.failing and first_bad is None:
            first_bad = outcome
        elif not outcome.failing:
            if first_bad is not None:
                episodes.append(Episode(last_good, first_bad, outcome))
                first_bad = None
            last_good = outcome
    if first_bad is not None:
        episodes.append(Episode(last_good, first_bad, None))
    return episodes


@dataclass(frozen=True)
class Point:
    """One benchmark's measurement at one commit: the median, and the samples it came from.

    ``files``: the content digest of the suite's files where they came from outside the commit
    (``suites_from``, ``suites_repo``); "" for the commit's own. A step is read only between points
    of one digest (``roofwatch.service.analysis.suite_files``).
    """

    position: int
    sha: str
    median: float
    samples: tuple[float, ...] = ()
    files: str = ""


@dataclass(frozen=True)
class Step:
    """The series moved between two consecutive measured commits, from ``before`` to ``after``.

    ``shift`` says what moved in a bimodal series (``changepoints.ChangePoint.shift``): the
    modes' ``location`` or their ``mix``; ``modes`` and ``slow_share`` describe the two modes.
    ``placed``: found by the change-point search, which places a step to within a few commits (its
    confirmation looks at the neighbours when the pair shows nothing, ``neighbours``; a bisection by
    single runs marks its changes so too); else seen between these very two commits.
    """

    good: Point
    bad: Point
    before: float
    after: float
    shift: str = "location"
    modes: tuple[float, float] | None = None
    slow_share: tuple[float, float] | None = None
    placed: bool = False

    def details(self) -> dict[str, object]:
        """What a candidate change records of this step (``Change.details``)."""
        out: dict[str, object] = {"before": self.before, "after": self.after, "shift": self.shift}
        if self.placed:
            out["placed"] = True
        if self.modes is not None:
            out["modes"] = list(self.modes)
        if self.slow_share is not None:
            out["slow_share"] = list(self.slow_share)
        return out

    def direction(self, higher_is_better: bool) -> str:
        worse = self.after > self.before if not higher_is_better else self.after < self.before
        return "regression" if worse else "improvement"


def steps(points: Sequence[Point], *, newly_measured: set[int], higher_is_better: bool,
          confirmed_at: Collection[int] = ()) -> list[Step]:
    """Candidate steps of one series: its change points, and moves next to newly measured commits.

    Change points see a slow drift and a step hidden in a noisy stretch; the adjacent test sees a
    step as soon as both its sides are measured, before a change-point test has enough points.
    A candidate costs an A/B of exactly its two commits, so none is raised twice for one step:
    ``confirmed_at`` holds the first bad commits of this series' confirmed changes, and the level
    a point is held against starts at the latest of them (the commits after a confirmed 2x
    slowdown are not each 2x slower than the level before it). Only confirmed steps restart it:
    a candidate may still be rejected as one slow run, and the level before it is then the right one.
    """
    ordered = sorted(points, key=lambda p: p.position)
    found: dict[tuple[int, int], Step] = {}
    for cp in changepoints.detect([p.median for p in ordered]):
        good, bad = ordered[cp.index - 1], ordered[cp.index]
        found[(good.position, bad.position)] = Step(good, bad, cp.before, cp.after, cp.shift, cp.modes,
                                                    cp.slow_share, placed=True)
    for i, point in enumerate(ordered):
        if point.position not in newly_measured:
            continue
        for j in (i, i + 1):
            if 0 < j < len(ordered) and (ordered[j - 1].position, ordered[j].position) not in found:
                step = _adjacent(ordered, j, higher_is_better, level_test=j == i, confirmed_at=confirmed_at)
                if step is not None:
                    found[(step.good.position, step.bad.position)] = step
    return sorted(found.values(), key=lambda s: s.bad.position)


def _adjacent(ordered: Sequence[Point], j: int, higher_is_better: bool, level_test: bool,
              confirmed_at: Collection[int] = ()) -> Step | None:
    """Does ``ordered[j]`` differ from ``ordered[j - 1]`` beyond the series' run-to-run noise?

    Two tests, either enough for a candidate: the samples against the previous commit's, and —
    for a newly measured ``ordered[j]`` — its median against the level of the last few commits,
    so that one previous run that happened to be slow cannot hide a real slowdown behind it.
    (The level of the commits before a newly measured *good* side would include the old level
    across an earlier step.)
    """
    good, bad = ordered[j - 1], ordered[j]
    history = [p.median for p in ordered[:j]]
    noise = compare.run_to_run_noise(history[-RUN_NOISE_HISTORY:])
    if len(good.samples) and len(bad.samples):
        verdict = compare.compare(list(good.samples), list(bad.samples), higher_is_better=higher_is_better,
                                  alpha=ADJACENT_ALPHA, run_noise=noise)
        if verdict.direction != "none":
            return Step(good, bad, good.median, bad.median)
    if not level_test:
        return None
    # A median against a level of medians: the threshold is the spread of medians from run to run, not the two
    # commits' spread of samples. Two of five runs that a loaded host slowed by 80 % put the samples' threshold at
    # ±179 % and hid a 2x slowdown behind it, while the median of the five was not moved by them.
    threshold = 100 * compare.run_noise_floor(noise)
    since = max((p for p in confirmed_at if p <= good.position), default=None)
    level_points = [p.median for p in ordered[:j] if since is None or p.position >= since]
    level = float(np.median(level_points[-LEVEL_POINTS:]))
    if level > 0 and bad.median > 0 and not compare.within(bad.median / level, threshold):
        return Step(good, bad, level, bad.median)
    return None
