"""Events on a series whose suite runs files from outside the measured commit.

A suite with ``suites_from`` or ``suites_repo`` runs benchmark files that are not the commit's own;
each run records where they came from and a digest of their content
(``roofwatch.suite_config.external.SuiteFiles``). The series stays one — its identity is the
suite's and the benchmark's name, never the files' content — and a point whose digest differs
from the point before it is an *event* on the series: the benchmark changed there, not
(necessarily) the kernel. So change detection reads each stretch of one digest on its own
(``stretch_around``), and a step across an event is never a candidate change; the chart marks the
event, the series API lists it. A suite that stops (or starts) taking files from outside is an
event too: before and after then differ between the commit's own files ({}) and a digest.

Pure: points in, events out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

KIND = "benchmark-files"  # what an event is called in the API and on the chart


def digest(record: Mapping[str, Any] | None) -> str:
    """The content digest a ``suite_files`` record names; "" for the commit's own files."""
    return str((record or {}).get("digest") or "")


@dataclass(frozen=True)
class FilesEvent:
    """The suite's files changed between the point before and this one."""

    position: int | None
    sha: str
    run_id: int
    before: Mapping[str, Any]  # the previous point's record ({}: the commit's own files)
    after: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"kind": KIND, "position": self.position, "sha": self.sha, "run_id": self.run_id,
                "before": dict(self.before), "after": dict(self.after)}

    def said(self) -> str:
        """``benchmark files 1a2b3c4d5e → 6f7a8b9c0d``, as the chart labels it."""
        return f"benchmark files {digest(self.before) or 'of the commit'} → {digest(self.after) or 'of the commit'}"


@dataclass(frozen=True)
class FilesPoint:
    """A point of a series, oldest first: where it is, the run that measured it, its suite's files record."""

    position: int | None
    sha: str
    run_id: int
    files: Mapping[str, Any]


def events(points: Sequence[FilesPoint], before: Mapping[str, Any] | None = None) -> list[FilesEvent]:
    """Each point whose files' digest differs from the point before it's, oldest first.

    ``before``: the record of the point just before ``points`` (a page of a longer series), if any.
    """
    found: list[FilesEvent] = []
    previous = before
    for point in points:
        if previous is not None and digest(point.files) != digest(previous):
            found.append(FilesEvent(point.position, point.sha, point.run_id, previous, point.files))
        previous = point.files
    return found


Keyed = TypeVar("Keyed")


def stretch_around(points: Sequence[Keyed], keys: Sequence[str], index: int) -> list[Keyed]:
    """The points around ``points[index]`` whose key (files digest) is its own, with no other key between.

    ``points`` in branch order. The whole series when every key is the same.
    """
    key = keys[index]
    start = index
    while start > 0 and keys[start - 1] == key:
        start -= 1
    end = index + 1
    while end < len(points) and keys[end] == key:
        end += 1
    return list(points[start:end])
