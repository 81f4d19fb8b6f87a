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
from dataclasses import dataclass
from pathlib import Path

from roofwatch.common.envelope import SuiteResult
from roofwatch.common.errors import SuiteConfigError, UnknownRevision
from roofwatch.common.redaction import redact
from roofwatch.workers import checkout
from roofwatch.workers.suite_config import (
    SuiteSpec,
    load_suites,
    parse_toml,
    repository_min_effect,
    roofwatch_table,
    stored_or_own,
    suites_in,
)
from roofwatch.workers.tree_files import relative_parts

# The keys of [tool.roofwatch] a suites file may set.
ROOFWATCH_KEYS = ("override", "suites")


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


def choose(own: list[SuiteSpec] | None, stored_toml: str, stored_label: str) -> tuple[list[SuiteSpec] | None, str]:
    """Between the suites a commit declares (``own``) and a stored config, the ones that run, and why."""
    # A commit (a pull request's included) must not make the worker fetch from a URL or path it names.
    if own is not None and any(spec.suites_repo for spec in own):
        raise SuiteConfigError("suites_repo is allowed only in a stored config, not in a commit's pyproject.toml")
    if not stored_toml:
        return own, "pyproject.toml of the commit" if own is not None else ""
    stored = parse_suites_file(stored_toml)
    if stored.override:
        return stored.suites, f"{stored_label} (override = true)"
    if own is not None:
        return own, f"pyproject.toml of the commit (wins over {stored_label})"
    return stored.suites, f"{stored_label} (the commit declares no suites)"


def repository_min_effect_of(tree: Path, stored_toml: str) -> float | None:
    """``[tool.roofwatch] min_effect``: the stored config's when it sets one, else the commit's."""
    return stored_or_own(tree, stored_toml, repository_min_effect)


def prepare_suites(mirror: Path, tree: Path, stored_toml: str, stored_label: str,
                   suites_from: str = "") -> tuple[list[tuple[SuiteSpec, str]] | None, str]:
    """Choose ``tree``'s suites and lay each one's backfill over it: (spec, note) pairs and their source.

    The one selection every job makes, a run's commit and each side of an A/B alike, so both
    measure the same suites under the same series names. None: neither the commit nor a stored
    config declares suites.
    """
    specs, source = choose_suites(tree, stored_toml, stored_label)
    if specs is None:
        return None, source
    return [lay_over(mirror, tree, spec, suites_from) for spec in specs], source


def noted(result: SuiteResult, note: str) -> SuiteResult:
    """The suite's result with where its files came from (backfill), kept in its recorded reason."""
    if not note:
        return result
    return result.model_copy(update={"reason": f"{result.reason}; {note}" if result.reason else note})


def clear_path(tree: Path, path: str) -> None:
    """Remove what the commit has at ``path`` (files the suite deleted since must not linger).

    The commit owns the tree: any folder on the way may be a link out of it. A link is removed
    itself, never followed, and so is a file where REF has a folder; git then lays REF's files.
    """
    here = tree
    parts = relative_parts(path)
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            here.unlink()
            return
        if not here.exists():
            return
    target = here / parts[-1]
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)  # rmtree removes links inside, never what they point at


def lay_over(mirror: Path, tree: Path, spec: SuiteSpec, suites_from: str = "") -> tuple[SuiteSpec, str]:
    """Apply ``spec``'s backfill to ``tree``; the spec to run (renamed by content) and a note for the record.

    ``suites_from`` (a SHA from ``roofwatch run --suites-from``) replaces the suite's own REF,
    except for a suite with ``suites_repo``, whose REF names a commit of that other repository.
    """
    if spec.suites_repo:
        ref = spec.suites_from or "HEAD"
        data_dir = mirror.parent.parent.resolve()
        if checkout.is_local_path(spec.suites_repo) and data_dir in [Path(spec.suites_repo).resolve(),
                                                                     *Path(spec.suites_repo).resolve().parents]:
            # Another repository's mirror (or anything else of this worker's) is never a suite's source.
            raise SuiteConfigError(f"suite {spec.name!r}: suites_repo may not point inside this worker's data dir")
        try:
            source = checkout.ensure_mirror(mirror.parent, spec.suites_repo)
        except checkout.CheckoutError as exc:
            raise SuiteConfigError(f"suite {spec.name!r}: suites_repo: {exc}") from exc
    else:
        ref, source = suites_from or spec.suites_from or "", mirror
    if not ref:
        return spec, ""
    if not spec.suite_paths:
        raise SuiteConfigError(f"suite {spec.name!r}: --suites-from needs suite_paths (the folders that hold the suite)")
    try:
        sha = checkout.resolve(source, ref)
    except UnknownRevision as exc:
        where = "suites_repo" if spec.suites_repo else "the repository"
        raise SuiteConfigError(f"suite {spec.name!r}: suites_from {ref!r} is not a commit of {where}") from exc
    content = hashlib.sha256()
    for raw in spec.suite_paths:
        path = raw.strip("/")
        if not path or path.startswith("..") or "/../" in f"/{path}/":
            raise SuiteConfigError(f"suite {spec.name!r}: suite_paths must stay inside the repository, got {raw!r}")
        try:
            # The tree id of the path at REF is a hash of its whole content.
            content.update(f"{path}\0{checkout.git('rev-parse', f'{sha}:{path}', cwd=source).strip()}\n".encode())
        except checkout.CheckoutError as exc:
            raise SuiteConfigError(f"suite {spec.name!r}: {raw!r} does not exist at {ref} ({sha[:12]})") from exc
        clear_path(tree, path)
        if source == mirror:
            checkout.git("checkout", sha, "--", path, cwd=tree)
        else:
            # Files only: the other repository's objects stay in its own mirror, and no index is written.
            checkout.git(f"--git-dir={source}", f"--work-tree={tree}", "restore", f"--source={sha}", "--worktree",
                         "--", path)
    digest = content.hexdigest()[:10]
    origin = sha if ref == sha else f"{ref} ({sha})"
    if spec.suites_repo:
        origin = f"{redact(spec.suites_repo)} at {origin}"
    note = f"suite files {', '.join(spec.suite_paths)} from {origin}, content {digest}"
    return spec.model_copy(update={"name": f"{spec.name}@{digest}"}), note
