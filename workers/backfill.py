"""Today's suite laid over old commits (backfill, asv's model): a suite's ``suite_paths`` taken from
``suites_from`` (or from a commit of ``suites_repo``) into the checkout of the commit measured.

Which suites a commit runs, and what the laid-over files are called in a result, is read in
``roofwatch.suite_config.external``; this is the part that writes a worktree, so it is the worker's.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from roofwatch.common.errors import SuiteConfigError, UnknownRevision
from roofwatch.common.redaction import redact
from roofwatch.common.tree_files import relative_parts
from roofwatch.git import checkout
from roofwatch.suite_config.declared import SuiteSpec
from roofwatch.suite_config.external import DIGEST_CHARS, SuiteFiles, choose_suites


def prepare_suites(mirror: Path, tree: Path, stored_toml: str, stored_label: str,
                   suites_from: str = "") -> tuple[list[tuple[SuiteSpec, SuiteFiles | None]] | None, str]:
    """Choose ``tree``'s suites and lay each one's backfill over it: (spec, files) pairs and their source.

    The one selection every job makes, a run's commit and each side of an A/B alike, so both
    measure the same suites under the same series names. None: neither the commit nor a stored
    config declares suites.
    """
    specs, source = choose_suites(tree, stored_toml, stored_label)
    if specs is None:
        return None, source
    return [lay_over(mirror, tree, spec, suites_from) for spec in specs], source


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


def lay_over(mirror: Path, tree: Path, spec: SuiteSpec, suites_from: str = "") -> tuple[SuiteSpec, SuiteFiles | None]:
    """Apply ``spec``'s backfill to ``tree``; the spec to run and where its files came from (None: the commit's own).

    ``suites_from`` (a SHA from ``roofwatch run --suites-from``) replaces the suite's own REF,
    except for a suite with ``suites_repo``, whose REF names a commit of that other repository.
    The spec keeps its name: the suite's series is one, whatever files it ran.
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
        return spec, None
    if not spec.suite_paths:
        raise SuiteConfigError(f"suite {spec.name!r}: --suites-from needs suite_paths (the folders that hold the suite)")
    try:
        sha = checkout.resolve(source, ref)
    except UnknownRevision as exc:
        if spec.suites_repo and not spec.suites_from:
            raise SuiteConfigError(
                f"suite {spec.name!r}: suites_repo {redact(spec.suites_repo)} has no commit at HEAD: commit the "
                f"benchmark files there (git add {' '.join(spec.suite_paths)} && git commit); roofwatch lays a "
                "commit's files over each measured commit, never a folder's") from exc
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
            committed = " (only committed files are laid over: commit it in suites_repo)" if spec.suites_repo else ""
            raise SuiteConfigError(f"suite {spec.name!r}: {raw!r} does not exist at {ref} ({sha[:12]}){committed}") from exc
        clear_path(tree, path)
        if source == mirror:
            checkout.git("checkout", sha, "--", path, cwd=tree)
        else:
            # Files only: the other repository's objects stay in its own mirror, and no index is written.
            checkout.git(f"--git-dir={source}", f"--work-tree={tree}", "restore", f"--source={sha}", "--worktree",
                         "--", path)
    return spec, SuiteFiles(paths=tuple(spec.suite_paths), commit=sha, ref="" if ref == sha else ref,
                            repository=redact(spec.suites_repo) if spec.suites_repo else "",
                            digest=content.hexdigest()[:DIGEST_CHARS])
