"""Compare compiled kernels exactly: what changed between two commits' binaries, and what it means.

Pure: artifacts in (anything with the fields of ``Artifact``), differences and verdicts out.
No statistics are needed: the same source compiled by the same toolchain gives the same SASS,
so any difference is the commit's, and no difference means a timing move is the machine's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

# Instruction classes whose presence defines a kernel's hardware path (see roofwatch.workers.compiled.sass).
TENSOR_CORE_CLASSES = ("mma", "wgmma", "tcgen05_mma")
NARROW_MATH_CLASSES = ("fp16", "bf16")
# Classes shown in a change line, in this order, when their count changed.
SHOWN_CLASSES = ("wgmma", "mma", "tcgen05_mma", "tma", "async_copy", "global_load", "global_store",
                 "shared_load", "shared_store", "local_load", "local_store", "barrier", "fp32", "fp16", "bf16")
MAX_CLASSES_IN_LINE = 4
# A timing move on identical binaries is believed only when it is this many times the A/B threshold.
IDENTICAL_BINARY_FACTOR = 2.0


class Artifact(Protocol):
    """What the comparison reads of an artifact (a stored row or an envelope record)."""

    @property
    def kernel(self) -> str: ...
    @property
    def specialization(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def registers(self) -> int | None: ...
    @property
    def spill_bytes(self) -> int | None: ...
    @property
    def shared_bytes(self) -> int | None: ...
    @property
    def instructions(self) -> dict[str, int]: ...
    @property
    def sass_hash(self) -> str: ...
    @property
    def toolchain(self) -> str: ...
    @property
    def tests(self) -> list[str]: ...


Key = tuple[str, str, str]  # kernel, specialization, target


def key_of(artifact: Artifact) -> Key:
    return artifact.kernel, artifact.specialization, artifact.target


@dataclass(frozen=True)
class ArtifactDiff:
    """One specialization × target whose binary differs (or appeared, vanished, started failing)."""

    kernel: str
    specialization: str
    target: str
    kind: str  # changed | added | removed | now-fails | compiles-again
    changes: tuple[tuple[str, int | None, int | None], ...] = ()  # (field, before, after)
    flags: tuple[str, ...] = ()  # why it matters before any GPU has timed it
    reason: str = ""  # the compiler's message when it now fails
    toolchain_changed: bool = False

    @property
    def matters(self) -> bool:
        return bool(self.flags)

    def line(self) -> str:
        """``matmul[bf16, BLOCK_M=128 ..., w8 s3] sm_90: registers 168 → 232, spills 0 → 96 B, wgmma 64 → 0``."""
        return f"{short_kernel(self.kernel)}[{self.specialization}] {self.target}: {self.what()}"

    def brief(self) -> str:
        """``matmul sm_90: registers 168 → 232, …``: the line without the specialization, for a "why" beside a
        benchmark that names its launch already."""
        return f"{short_kernel(self.kernel)} {self.target}: {self.what()}"

    def what(self) -> str:
        """What happened to the binary: ``registers 168 → 232, spills 0 → 96 B``, ``new``, ``no longer compiles: …``."""
        if self.kind == "added":
            return "new"
        if self.kind == "removed":
            return "no longer launched"
        if self.kind == "now-fails":
            return f"no longer compiles: {self.reason}"
        if self.kind == "compiles-again":
            return "compiles again"
        parts = [f"{_label(f)} {_value(f, before)} → {_value(f, after)}" for f, before, after in self.changes]
        text = ", ".join(parts) if parts else "same counts, different SASS"
        return text + " (toolchain changed)" if self.toolchain_changed else text

    def as_dict(self) -> dict[str, object]:
        return {"kernel": self.kernel, "specialization": self.specialization, "target": self.target,
                "kind": self.kind, "changes": [list(c) for c in self.changes], "flags": list(self.flags),
                "reason": self.reason, "toolchain_changed": self.toolchain_changed, "line": self.line()}


def short_kernel(kernel: str) -> str:
    """``kernels.matmul._matmul_kernel`` → ``_matmul_kernel``: the name a kernel engineer reads."""
    return kernel.rsplit(".", 1)[-1]


def _label(name: str) -> str:
    return {"registers": "registers", "spill_bytes": "spills", "shared_bytes": "shared"}.get(name, name)


def _value(name: str, value: int | None) -> str:
    if value is None:
        return "–"
    return f"{value} B" if name in ("spill_bytes", "shared_bytes") else str(value)


def diff(base: Iterable[Artifact], head: Iterable[Artifact]) -> list[ArtifactDiff]:
    """Every specialization × target whose binary is not the same on both sides, sorted by name.

    A specialization's name includes its constexprs, so a commit that changes a block size
    removes one specialization and adds another. Those are paired (same kernel, target and
    launching tests, one for one) and compared as one changed binary named ``old → new``.
    """
    before = {key_of(a): a for a in base}
    after = {key_of(a): a for a in head}
    pairs: list[tuple[Key, Artifact | None, Artifact | None]] = [
        (key, before.get(key), after.get(key)) for key in before.keys() & after.keys()]
    gone = _by_site(before[k] for k in before.keys() - after.keys())
    new = _by_site(after[k] for k in after.keys() - before.keys())
    for site in gone.keys() | new.keys():
        olds, news = gone.get(site, []), new.get(site, [])
        if len(olds) == len(news):
            pairs += [((o.kernel, f"{o.specialization} → {n.specialization}", o.target), o, n)
                      for o, n in zip(olds, news, strict=True)]
        else:
            pairs += [(key_of(o), o, None) for o in olds] + [(key_of(n), None, n) for n in news]
    found = [d for key, old, new_ in sorted(pairs, key=lambda p: p[0]) if (d := _compare(key, old, new_))]
    return found


def _by_site(artifacts: Iterable[Artifact]) -> dict[tuple[str, str, tuple[str, ...]], list[Artifact]]:
    """Artifacts grouped by where they come from: kernel, target and the tests that launch them."""
    sites: dict[tuple[str, str, tuple[str, ...]], list[Artifact]] = {}
    for artifact in sorted(artifacts, key=key_of):
        sites.setdefault((artifact.kernel, artifact.target, tuple(sorted(artifact.tests))), []).append(artifact)
    return sites


def _compare(key: Key, old: Artifact | None, new: Artifact | None) -> ArtifactDiff | None:
    if old is None:
        assert new is not None
        if new.status != "compiled":
            return ArtifactDiff(*key, kind="now-fails", reason=new.reason, flags=("does not compile",))
        return ArtifactDiff(*key, kind="added")
    if new is None:
        return ArtifactDiff(*key, kind="removed")
    if old.status == "compiled" and new.status != "compiled":
        return ArtifactDiff(*key, kind="now-fails", reason=new.reason, flags=("no longer compiles",))
    if old.status != "compiled" and new.status == "compiled":
        return ArtifactDiff(*key, kind="compiles-again")
    if old.status == "compiled" and old.sass_hash != new.sass_hash:
        return _changed(key, old, new)
    return None


def _changed(key: Key, old: Artifact, new: Artifact) -> ArtifactDiff:
    changes: list[tuple[str, int | None, int | None]] = [
        (name, getattr(old, name), getattr(new, name)) for name in ("registers", "spill_bytes", "shared_bytes")
        if getattr(old, name) != getattr(new, name)]
    moved = [(name, old.instructions.get(name, 0), new.instructions.get(name, 0)) for name in SHOWN_CLASSES
             if old.instructions.get(name, 0) != new.instructions.get(name, 0)]
    changes += moved[:MAX_CLASSES_IN_LINE]
    return ArtifactDiff(*key, kind="changed", changes=tuple(changes), flags=tuple(_flags(old, new)),
                        toolchain_changed=old.toolchain != new.toolchain)


def _flags(old: Artifact, new: Artifact) -> list[str]:
    """The differences a kernel engineer would act on before any timing: they change what the kernel is."""
    flags: list[str] = []
    if (new.spill_bytes or 0) > 0 and not old.spill_bytes:
        flags.append(f"spills appeared ({new.spill_bytes} B per thread)")
    for name in TENSOR_CORE_CLASSES:
        if old.instructions.get(name, 0) > 0 and new.instructions.get(name, 0) == 0:
            flags.append(f"{name} instructions disappeared")
    narrow_before = sum(old.instructions.get(n, 0) for n in NARROW_MATH_CLASSES)
    narrow_after = sum(new.instructions.get(n, 0) for n in NARROW_MATH_CLASSES)
    if narrow_before == 0 and narrow_after > 0 and new.instructions.get("fp32", 0) < old.instructions.get("fp32", 0):
        flags.append("math moved from fp32 to a narrower type")
    return flags


def for_tests(artifacts: Iterable[Artifact], tests: Sequence[str]) -> list[Artifact]:
    """The artifacts launched by any of ``tests`` (benchmark names)."""
    wanted = set(tests)
    return [a for a in artifacts if wanted.intersection(a.tests)]


@dataclass(frozen=True)
class BinaryVerdict:
    """Whether the kernels behind a timing series changed between two commits.

    ``identical`` is None when there is nothing to compare (no compile suite, or no artifact
    launched by the series on one side).
    """

    identical: bool | None
    diffs: list[ArtifactDiff] = field(default_factory=list)
    targets: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        if self.identical is None:
            return ""
        if self.identical:
            return (f"compiled code identical on both sides ({', '.join(self.targets)}): "
                    "a timing move here is the machine, not the code")
        return "compiled code changed: " + "; ".join(d.line() for d in self.diffs[:3])


def binary_verdict(base: Sequence[Artifact], head: Sequence[Artifact]) -> BinaryVerdict:
    if not base or not head:
        return BinaryVerdict(None)
    if {a.toolchain for a in base} != {a.toolchain for a in head}:
        return BinaryVerdict(None)  # another compiler: identical or not says nothing about the commit
    found = diff(base, head)
    return BinaryVerdict(not found, found, tuple(sorted({a.target for a in head})))


@dataclass(frozen=True)
class Decision:
    report: bool
    note: str


def confirm_timing_change(verdict: BinaryVerdict, change_pct: float | None, threshold_pct: float | None) -> Decision:
    """Should a confirmed timing change be reported, given what the compiled code says?

    Identical binaries for every target make a timing move a property of the machine (clocks,
    neighbours, thermals), so it must be at least ``IDENTICAL_BINARY_FACTOR`` × the A/B
    threshold to be believed; otherwise it is held back with the reason.
    """
    if not verdict.identical:
        return Decision(True, verdict.note)
    needed = IDENTICAL_BINARY_FACTOR * (threshold_pct or 0.0)
    if change_pct is not None and abs(change_pct) >= needed > 0:
        return Decision(True, verdict.note + f"; reported anyway: {abs(change_pct):.1f} % ≥ {needed:.1f} %")
    return Decision(False, verdict.note + f"; held back: {abs(change_pct or 0.0):.1f} % < {needed:.1f} % "
                                          f"({IDENTICAL_BINARY_FACTOR:g} × the A/B threshold)")
