"""Suites kept outside the measured repository, and which suites a commit runs.

A stored config (``roofwatch repo add --suites FILE``, ``repo set-suites``, ``run --suites FILE``)
is TOML holding the same ``[[tool.roofwatch.suites]]`` tables a ``pyproject.toml`` would.
Precedence: the commit's own table wins; the stored config is used when the commit has none,
or always when it says ``override = true`` under ``[tool.roofwatch]``.

Backfill (asv's model): a suite with ``suites_from = "REF"`` and ``suite_paths = ["bench/"]``
runs with those paths taken from REF instead of the commit (or from a commit of another
repository, ``suites_repo``), so the current benchmark suite measures old kernel code. The
suite's results keep the suite's own name, so its series is the same whatever files it ran:
where they came from and a content hash of them travel with the result (``SuiteFiles``,
``SuiteResult.suite_files``), and a hash that differs from the previous point's is an *event* on
the series. Change detection never reads a step across such an event as a change of the kernel
(``roofwatch.service.analysis.suite_files``); the chart and the series API show it. Laying the
files over a checkout is the worker's (``roofwatch.workers.backfill``): this module only reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from roofwatch.common.envelope import SuiteResult
from roofwatch.common.errors import SuiteConfigError
from roofwatch.suite_config.declared import (
    SuiteSpec,
    load_suites,
    parse_toml,
    repository_min_effect,
    roofwatch_table,
    stored_or_own,
    suites_in,
)

# The keys of [tool.roofwatch] a suites file may set.
ROOFWATCH_KEYS = ("override", "suites")
DIGEST_CHARS = 10  # of the SHA-256 of a suite's laid-over files: what names their content


@dataclass(frozen=True)
class SuiteFiles:
    """Where a suite's files came from when not from the measured commit, and a hash of their content."""

    paths: tuple[str, ...]
    commit: str  # the full SHA they were taken at
    ref: str  # the REF that was resolved to it, as written ("" when a SHA was given)
    repository: str  # the suites_repo they came from, credentials redacted ("" for the measured repository)
    digest: str  # SHA-256 of each path's git tree id at that commit, DIGEST_CHARS hex digits

    def note(self) -> str:
        """What the suite's recorded reason says: ``suite files bench/ from <origin>, content <digest>``."""
        origin = self.commit if not self.ref else f"{self.ref} ({self.commit})"
        if self.repository:
            origin = f"{self.repository} at {origin}"
        return f"suite files {', '.join(self.paths)} from {origin}, content {self.digest}"

    def record(self) -> dict[str, object]:
        """``SuiteResult.suite_files``, stored per suite execution."""
        return {"paths": list(self.paths), "repository": self.repository, "ref": self.ref, "commit": self.commit,
                "digest": self.digest}


@dataclass(frozen=True)
class StoredSuites:
    suites: list[SuiteSpec]
    override: bool


def parse_suites_file(text: str) -> StoredSuites:
    """A stored config's suites and its ``override`` flag; ``SuiteConfigError`` says what is wrong."""
    data = parse_toml(text, "the suites file")
    # Only [tool.roofwatch] is read, as in a pyproject.toml (whose other tables may be there
    # too). roofwatch's own keys outside it (`override = true` at the top of the file) would be
    # ignored without a word, and the commit's suites would quietly win over the forced ones.
    stray = sorted(key for key in data if key in ROOFWATCH_KEYS)
    if stray:
        raise SuiteConfigError(
            f"the suites file sets {', '.join(stray)} outside [tool.roofwatch], where nothing is read; "
            "write them under [tool.roofwatch] (e.g. [tool.roofwatch] then override = true)")
    suites = suites_in(data)
    if suites is None:
        raise SuiteConfigError("the suites file has no [[tool.roofwatch.suites]] tables")
    table = roofwatch_table(data) or {}
    override = table.get("override", False)
    if not isinstance(override, bool):
        raise SuiteConfigError(f"[tool.roofwatch] override must be true or false, got {override!r}")
    for suite in suites:
        if suite.suites_from and not suite.suite_paths:
            raise SuiteConfigError(f"suite {suite.name!r} sets suites_from but no suite_paths to take from it")
        if suite.suites_repo and not suite.suite_paths:
            raise SuiteConfigError(f"suite {suite.name!r} sets suites_repo but no suite_paths to take from it")
    return StoredSuites(suites, override)


def choose_suites(tree: Path, stored_toml: str, stored_label: str) -> tuple[list[SuiteSpec] | None, str]:
    """The suites to run on ``tree`` and where they came from (recorded with the run)."""
    return choose(load_suites(tree), stored_toml, stored_label)


def choose(own: list[SuiteSpec] | None, stored_toml: str, stored_label: str,
           commit: str = "the commit") -> tuple[list[SuiteSpec] | None, str]:
    """Between the suites a commit declares (``own``) and a stored config, the ones that run, and why
    (``commit`` names the commit in that reason: "the base commit" for an A/B)."""
    # A commit (a pull request's included) must not make the worker fetch from a URL or path it names.
    if own is not None and any(spec.suites_repo for spec in own):
        raise SuiteConfigError("suites_repo is allowed only in a stored config, not in a commit's pyproject.toml")
    if not stored_toml:
        return own, f"pyproject.toml of {commit}" if own is not None else ""
    stored = parse_suites_file(stored_toml)
    if stored.override:
        return stored.suites, f"{stored_label} (override = true)"
    if own is not None:
        return own, f"pyproject.toml of {commit} (wins over {stored_label})"
    return stored.suites, f"{stored_label} ({commit} declares no suites)"


def repository_min_effect_of(tree: Path, stored_toml: str) -> float | None:
    """``[tool.roofwatch] min_effect``: the stored config's when it sets one, else the commit's."""
    return stored_or_own(tree, stored_toml, repository_min_effect)


def noted(result: SuiteResult, files: SuiteFiles | None) -> SuiteResult:
    """The suite's result with where its files came from (backfill): in its recorded reason, and as a record."""
    if files is None:
        return result
    note = files.note()
    return result.model_copy(update={"reason": f"{result.reason}; {note}" if result.reason else note,
                                     "suite_files": files.record()})
