"""The life of a change on the main branch, and what makes two sightings one change.

    candidate ──▶ narrowing ──▶ confirming ──▶ confirmed ──▶ triage (new, acknowledged, …, fixed)
        │   (unmeasured commits    (A/B of the two         ▲
        │    in the range: bisect)  adjacent commits;     │
        │                           a change point they   │
        │                           show nothing at: its  │
        │                           neighbours, by A/B)   │
        └──────────── no unmeasured commits ──────────────┘ (correctness: no A/B needed)
                                       └────────▶ rejected (the A/B did not confirm it)

A change's identity is (repository, series, epoch, direction, location): the series is the
benchmark (or test), the epoch the device fingerprint, the direction its kind, the location the
range of first-parent positions ``(last good, first bad]`` it lies in. A sighting whose range
overlaps a known change of the same series and direction *is* that change.
"""

from __future__ import annotations

from roofwatch.common.vocabulary import CORRECTNESS_KINDS

CANDIDATE, NARROWING, CONFIRMING, CONFIRMED, REJECTED = (
    "candidate", "narrowing", "confirming", "confirmed", "rejected")


def overlaps(start: int | None, end: int, other_start: int | None, other_end: int) -> bool:
    """Do the position ranges ``(start, end]`` and ``(other_start, other_end]`` share a commit?

    ``None`` as a start means "from the first commit on".
    """
    low, other_low = -1 if start is None else start, -1 if other_start is None else other_start
    return low < other_end and other_low < end


def narrowed(start: int | None, end: int) -> bool:
    """Is the first bad commit known: nothing unmeasured between the last good and the first bad?"""
    return start is None or end - start <= 1


def phase_after_narrowing(kind: str) -> str:
    """A test outcome is certain; a timing step is confirmed by an interleaved A/B first."""
    return CONFIRMED if kind in CORRECTNESS_KINDS else CONFIRMING
