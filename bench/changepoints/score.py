"""Scoring detections against known change points: pure functions, no I/O.

A detection counts for a true change when it lies within ``tolerance`` commits of it, and each
true change and each detection is used at most once (one-to-one), so reporting a step three
times around the right commit earns one true positive and two false positives. Pairs are taken
greedily by distance, the closest first, which is optimal for points on a line in all but
contrived ties.

Aggregates are *micro* averages: true/false positives and misses are summed over all series
before precision and recall are computed, so a series with three changes weighs three times a
series with one. False alarms per clean series is the mean number of detections on series whose
truth is empty: the number a user would see as noise on a benchmark that did not change.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DEFAULT_TOLERANCE = 3


def found(detected: Sequence[int], truth: Sequence[int], tolerance: int = DEFAULT_TOLERANCE) -> list[bool]:
    """For each true change, whether a detection was paired with it."""
    pairs = sorted(
        (abs(d - t), i, j)
        for i, d in enumerate(detected)
        for j, t in enumerate(truth)
        if abs(d - t) <= tolerance
    )
    used_detected: set[int] = set()
    used_truth: set[int] = set()
    for _distance, i, j in pairs:
        if i not in used_detected and j not in used_truth:
            used_detected.add(i)
            used_truth.add(j)
    return [j in used_truth for j in range(len(truth))]


def match(detected: Sequence[int], truth: Sequence[int], tolerance: int = DEFAULT_TOLERANCE) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) for one series."""
    tp = sum(found(detected, truth, tolerance))
    return tp, len(detected) - tp, len(truth) - tp


def f1(precision: float, recall: float) -> float:
    """Their harmonic mean; 0 when both are 0."""
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


@dataclass(frozen=True)
class Score:
    """Micro-averaged scores over a set of series."""

    tp: int
    fp: int
    fn: int
    series: int
    clean_series: int
    clean_detections: int

    @property
    def precision(self) -> float:
        # no detections at all: nothing was wrong, by convention 1.0 (recall carries the miss)
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        return f1(self.precision, self.recall)

    @property
    def false_alarms_per_clean(self) -> float:
        """Mean detections on change-free series; NaN when there was none."""
        return self.clean_detections / self.clean_series if self.clean_series else float("nan")


def aggregate(results: Iterable[tuple[Sequence[int], Sequence[int]]], tolerance: int = DEFAULT_TOLERANCE) -> Score:
    """Score ``(detected, truth)`` pairs, one per series."""
    tp = fp = fn = series = clean = clean_detections = 0
    for detected, truth in results:
        a, b, c = match(detected, truth, tolerance)
        tp, fp, fn, series = tp + a, fp + b, fn + c, series + 1
        if not truth:
            clean += 1
            clean_detections += len(detected)
    return Score(tp, fp, fn, series, clean, clean_detections)
