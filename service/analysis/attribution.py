"""Why a benchmark moved: what differs between what it ran on the two sides of an A/B.

Pure: each side's records of what the benchmark ran (one per process, as the rounds plugin wrote
them: ``workers/rounds/ran.py``), the suite's environment changes (``dependencies``) and the files
the commit changed in; one ``Attribution`` out. Its ``why`` is the one line every place that shows
a change prints beside it.

The cause, most specific first:

- ``kernels``: a Triton kernel it launched differs — its source, its launch (``num_warps``,
  ``num_stages``, a ``tl.constexpr``, the dtypes it was given), the config its autotuner chose,
  or, where a compile suite compiled the kernels it launches on both sides with one toolchain,
  their binaries (the compiled diff joins the line: ``compiled _rms_norm_fwd sm_90: registers
  64 → 40``, so nobody has to match a benchmark row with a kernel row by hand);
- ``environment``: its suite's own environment differs (a torch or triton pin, Python);
- ``files``: a repository file it imported changed;
- ``untraced``: none of the above, but the commit changed files roofwatch cannot follow into a
  benchmark (data, C++/CUDA sources, configuration): the move is reported as the benchmark's own;
- ``identical``: every process on both sides recorded the same files, kernels and environment,
  and the commit changed nothing else that could reach it. A move of such a benchmark is an
  *interaction* — something that ran before it in the process, or the machine — and never a
  regression or improvement of its own (Mytkowicz et al., "Producing wrong data without doing
  anything obviously wrong", ASPLOS 2009);
- ``unknown``: a side did not record (an upload, an older worker, a record cut at its bounds).
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from roofwatch.service.analysis.compiled import ArtifactDiff

Cause = Literal["kernels", "environment", "files", "untraced", "identical", "unknown"]

SHOWN = 3  # kernels or files named in the one line; the rest are counted
LISTED = 20  # kept in the details
# Files a commit may change without changing what any benchmark runs: its documentation and the
# repository's housekeeping. Anything else that is not a Python file could be read by a benchmark.
INERT = ("*.md", "*.rst", "*.txt", "docs/*", "doc/*", ".github/*", ".gitignore", ".gitattributes",
         "LICENSE*", "COPYING*", "AUTHORS*", "CHANGELOG*", "*.png", "*.jpg", "*.jpeg", "*.svg", "*.gif")
LAUNCH_IDENTITY = ("kernel", "source", "autotuned")
IDENTICAL = "nothing it imports or launches changed, nor its environment"
# The why of a move of identical code (``causes.judged``): what moved it, since its code did not.
INTERACTION = f"interaction: {IDENTICAL} — what ran before it in the process, or the machine, moved it"


@dataclass(frozen=True)
class SideRan:
    """What one side's processes recorded for one benchmark."""

    files: dict[str, str]
    launches: list[dict[str, Any]]  # distinct over the side's processes
    autotuned: dict[str, Counter[str]]  # kernel → chosen config → processes that chose it
    complete: bool  # every process recorded, within its bounds, and they agree on the files
    processes: int

    @classmethod
    def of(cls, records: Sequence[Mapping[str, Any]]) -> SideRan:
        files: dict[str, str] = {}
        launches: dict[str, dict[str, Any]] = {}
        autotuned: dict[str, Counter[str]] = {}
        complete = bool(records)
        for index, record in enumerate(records):
            if not record or not record.get("complete"):
                complete = False
            recorded = dict(record.get("files") or {})
            if index and recorded != files:
                complete = False  # a file that changed while the side ran: nothing to say about it
            files = files or recorded
            for launch in record.get("kernels") or []:
                chosen = launch.get("autotuned")
                if chosen is not None:
                    autotuned.setdefault(str(launch.get("kernel")), Counter())[str(chosen)] += 1
                launches.setdefault(repr(sorted(launch.items())), dict(launch))
        return cls(files, list(launches.values()), autotuned, complete, len(records))


@dataclass(frozen=True)
class Attribution:
    """Why one benchmark moved between base and head (see the module docstring)."""

    cause: Cause
    why: str  # one line; "" for unknown
    kernels: list[str] = field(default_factory=list)  # one phrase per differing kernel
    files: list[str] = field(default_factory=list)  # repository files it imported that differ
    environment: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)  # one brief line per differing binary it launches
    untraced: list[str] = field(default_factory=list)  # files the commit changed that no record follows
    notes: list[str] = field(default_factory=list)  # why a side's record is incomplete

    @property
    def identical(self) -> bool:
        return self.cause == "identical"

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cause": self.cause, "why": self.why}
        for name in ("kernels", "compiled", "files", "environment", "untraced", "notes"):
            if value := getattr(self, name):
                out[name] = value[:LISTED]
        return out


def attribute(base: Sequence[Mapping[str, Any]], head: Sequence[Mapping[str, Any]],
              environment: Sequence[str] = (), changed_files: Sequence[str] | None = None,
              compiled: Sequence[ArtifactDiff] = ()) -> Attribution:
    """Why the benchmark whose processes recorded ``base`` and ``head`` moved.

    ``environment``: how the head's environment of its suite differs (``dependencies.environment_changes``);
    ``changed_files``: the paths the commit changed between base and head, None when not known;
    ``compiled``: the compile suite's differing binaries among the kernels this benchmark launches.
    """
    before, after = SideRan.of(base), SideRan.of(head)
    kernels = kernel_changes(before, after) if before.processes and after.processes else []
    files = sorted(path for path in set(before.files) | set(after.files)
                   if before.files.get(path) != after.files.get(path)) if before.processes and after.processes else []
    notes = [note for side, ran, records in (("base", before, base), ("head", after, head))
             for note in _incomplete(side, ran, records)]
    binaries = list(dict.fromkeys(d.brief() for d in compiled))
    parts: list[str] = []
    if kernels:
        parts.append(("kernel " if len(kernels) == 1 else "kernels ") + _listed(kernels, "; "))
    if binaries:
        parts.append("compiled " + _listed(binaries, "; "))
    if environment:
        parts.append("environment: " + ", ".join(environment[:SHOWN])
                     + (f" and {len(environment) - SHOWN} more" if len(environment) > SHOWN else ""))
    if files:
        parts.append(("imported file changed: " if len(files) == 1 else "imported files changed: ") + _listed(files))
    if parts:
        cause: Cause = "kernels" if kernels or binaries else "environment" if environment else "files"
        return Attribution(cause, " · ".join(parts), kernels[:LISTED], files[:LISTED], list(environment),
                           binaries[:LISTED], notes=notes)
    if notes:
        return Attribution("unknown", "", notes=notes)
    untraced = untraced_files(changed_files, before.files) if changed_files is not None else None
    if untraced is None:
        return Attribution("unknown", "", notes=["the files the commit changed are not known"])
    if untraced:
        return Attribution("untraced", "changed files roofwatch cannot trace into it: " + _listed(untraced),
                           untraced=untraced[:LISTED])
    return Attribution("identical", IDENTICAL)


def untraced_files(changed: Sequence[str], imported: Mapping[str, str]) -> list[str]:
    """The changed paths that could reach a benchmark without being a Python file it imported.

    A Python file it did not import cannot (the record holds every repository module it could
    reach); documentation cannot (``INERT``); anything else — data, C++/CUDA sources, a
    ``pyproject.toml`` whose pytest options the head's processes read — might.
    """
    out = []
    for path in changed:
        if path.endswith((".py", ".pyi")) and path not in imported:
            continue
        if path in imported or not any(fnmatch.fnmatch(path, pattern) for pattern in INERT):
            out.append(path)
    return sorted(out)


def kernel_changes(before: SideRan, after: SideRan) -> list[str]:
    """One phrase per kernel whose source, launch or autotune choice differs between the sides."""
    names = sorted({str(launch.get("kernel")) for launch in [*before.launches, *after.launches]})
    phrases = []
    for name in names:
        old = [launch for launch in before.launches if launch.get("kernel") == name]
        new = [launch for launch in after.launches if launch.get("kernel") == name]
        short = _short(name)
        if not old:
            phrases.append(f"{short}: newly launched")
        elif not new:
            phrases.append(f"{short}: no longer launched")
        elif {launch.get("source") for launch in old} != {launch.get("source") for launch in new}:
            phrases.append(f"{short}: source changed")
        elif (chosen := _autotune_change(before.autotuned.get(name), after.autotuned.get(name))) is not None:
            phrases.append(f"{short}: autotuned to {chosen}")
        elif launch_change := _launch_change(old, new):
            phrases.append(f"{short}: {launch_change}")
    return phrases


def _launch_change(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    """How the launch values differ: ``num_warps 4 → 8`` (each value that differs; sets when several)."""
    keys = sorted({k for launch in [*old, *new] for k in launch} - set(LAUNCH_IDENTITY))
    parts = []
    for key in keys:
        was = sorted({_text(launch.get(key)) for launch in old})
        now = sorted({_text(launch.get(key)) for launch in new})
        if was != now:
            parts.append(f"{key} {'/'.join(was)} → {'/'.join(now)}")
    return ", ".join(parts)


def _autotune_change(old: Counter[str] | None, new: Counter[str] | None) -> str | None:
    """The autotuner's choice on the head with the base's, when the choices differ; None when they agree."""
    if not old or not new or set(old) == set(new):
        return None
    return f"{_choices(new)} (was {_choices(old)})"


def _choices(counts: Counter[str]) -> str:
    if len(counts) == 1:
        return next(iter(counts))
    total = sum(counts.values())
    return " / ".join(f"{config} in {n} of {total}" for config, n in counts.most_common())


def _incomplete(side: str, ran: SideRan, records: Sequence[Mapping[str, Any]]) -> list[str]:
    if not records or not any(records):
        return [f"the {side} did not record what it ran"]
    if ran.complete:
        return []
    notes = [f"{side}: {note}" for record in records for note in record.get("notes") or []]
    return sorted(set(notes))[:5] or [f"the {side}'s processes did not all record the same files"]


def _listed(items: Sequence[str], separator: str = ", ") -> str:
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return separator.join(items[:SHOWN]) + more


def _short(kernel: str) -> str:
    return kernel.rsplit(".", 1)[-1]


def _text(value: Any) -> str:
    return "unset" if value is None else str(value)
