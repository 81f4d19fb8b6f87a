"""Suites kept outside the measured repository, and today's suite laid over old commits.

A stored config (``roofwatch repo add --suites FILE``, ``repo set-suites``, ``run --suites FILE``)
is TOML holding the same ``[[tool.roofwatch.suites]]`` tables a ``pyproject.toml`` would.
Precedence: the commit's own table wins; the stored config is used when the commit has none,
or always when it says ``override = true`` under ``[tool.roofwatch]``.

Backfill (asv's model): a suite with ``suites_from = "REF"`` and ``suite_paths = ["bench/"]``
runs with those paths taken from REF instead of the commit, so the current benchmark suite
measures old kernel code. The suite's results are stored under ``<name>@<content hash>``: a
change of the suite's own files starts a new series (a changed benchmark must not read as a
kernel regression), and the same files at another REF keep the series.
"""

from __future__ import annotations

import hashlib
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from roofwatch.workers import checkout
from roofwatch.workers.errors import SuiteConfigError, UnknownRevision
from roofwatch.workers.suite_config import SuiteSpec, load_suites, roofwatch_table, suites_in


@dataclass(frozen=True)
class StoredSuites:
    suites: list[SuiteSpec]
    override: bool


def parse_suites_file(text: str) -> StoredSuites:
    """A stored config's suites and its ``override`` flag; ``SuiteConfigError`` says what is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SuiteConfigError(f"the suites file is not valid TOML: {exc}") from exc
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
    return StoredSuites(suites, override)


def choose_suites(tree: Path, stored_toml: str, stored_label: str) -> tuple[list[SuiteSpec] | None, str]:
    """The suites to run on ``tree`` and where they came from (recorded with the run)."""
    own = load_suites(tree)
    if not stored_toml:
        return own, "pyproject.toml of the commit" if own is not None else ""
    stored = parse_suites_file(stored_toml)
    if stored.override:
        return stored.suites, f"{stored_label} (override = true)"
    if own is not None:
        return own, f"pyproject.toml of the commit (wins over {stored_label})"
    return stored.suites, f"{stored_label} (the commit declares no suites)"


def lay_over(mirror: Path, tree: Path, spec: SuiteSpec, suites_from: str = "") -> tuple[SuiteSpec, str]:
    """Apply ``spec``'s backfill to ``tree``; the spec to run (renamed by content) and a note for the record.

    ``suites_from`` (a SHA from ``roofwatch run --suites-from``) replaces the suite's own REF.
    """
    ref = suites_from or spec.suites_from
    if not ref:
        return spec, ""
    if not spec.suite_paths:
        raise SuiteConfigError(f"suite {spec.name!r}: --suites-from needs suite_paths (the folders that hold the suite)")
    try:
        sha = checkout.resolve(mirror, ref)
    except UnknownRevision as exc:
        raise SuiteConfigError(f"suite {spec.name!r}: suites_from {ref!r} is not a commit of the repository") from exc
    content = hashlib.sha256()
    for raw in spec.suite_paths:
        path = raw.strip("/")
        if not path or path.startswith("..") or "/../" in f"/{path}/":
            raise SuiteConfigError(f"suite {spec.name!r}: suite_paths must stay inside the repository, got {raw!r}")
        try:
            # The tree id of the path at REF is a hash of its whole content.
            content.update(f"{path}\0{checkout.git('rev-parse', f'{sha}:{path}', cwd=mirror).strip()}\n".encode())
        except checkout.CheckoutError as exc:
            raise SuiteConfigError(f"suite {spec.name!r}: {raw!r} does not exist at {ref} ({sha[:12]})") from exc
        target = tree / path
        if target.is_dir():
            shutil.rmtree(target)  # files the suite deleted since must not linger
        elif target.exists():
            target.unlink()
        checkout.git("checkout", sha, "--", path, cwd=tree)
    digest = content.hexdigest()[:10]
    origin = sha if ref == sha else f"{ref} ({sha})"
    note = f"suite files {', '.join(spec.suite_paths)} from {origin}, content {digest}"
    return spec.model_copy(update={"name": f"{spec.name}@{digest}"}), note
