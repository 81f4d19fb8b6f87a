"""A bare mirror per repository, fetched incrementally, and a detached worktree per run.

Mirrors live under ``<data dir>/mirrors``; a file lock per mirror keeps concurrent runs of
one repository on one host from fetching over each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from workers.errors import CheckoutError, RemoteUnreachable, UnknownRevision

GIT_TIMEOUT_S = 600


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parents: list[str]
    author: str
    message: str
    committed_at: datetime
    # How many commits its first-parent chain holds, itself included: its place on the branch.
    # History is ordered by this, never by committer dates, which rebases and "Rebase and
    # merge" make equal or send backwards.
    position: int


def git(*args: str, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S) -> str:
    """Run git and return stdout; a failure raises ``CheckoutError`` with git's own words."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout,
            # Never block on a credential prompt in a worker.
            env={"GIT_TERMINAL_PROMPT": "0", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home())},
        )
    except subprocess.TimeoutExpired as exc:
        raise CheckoutError(f"git {args[0]} timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise CheckoutError(f"git {' '.join(args[:2])} failed: {done.stderr.strip()}")
    return done.stdout


def is_local_path(source: str) -> bool:
    return "://" not in source and not re.match(r"^[\w.-]+@[\w.-]+:", source) and Path(source).exists()


def mirror_path(mirrors_dir: Path, source: str) -> Path:
    """Stable folder for a source: a readable stem plus a hash of the exact URL or path."""
    key = str(Path(source).resolve()) if is_local_path(source) else source
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", key.rstrip("/").rsplit("/", 1)[-1])[:40] or "repo"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return mirrors_dir / f"{stem}-{digest}.git"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_mirror(mirrors_dir: Path, source: str) -> Path:
    """Clone ``source`` as a bare mirror, or fetch what is new into the existing one.

    A mirror's refspec is ``+refs/*:refs/*`` with ``--prune``, so rewritten history
    (force pushes) replaces the old refs instead of failing the fetch.
    """
    path = mirror_path(mirrors_dir, source)
    url = str(Path(source).resolve()) if is_local_path(source) else source
    with _locked(path):
        try:
            if (path / "HEAD").exists():
                git("remote", "set-url", "origin", url, cwd=path)
                git("fetch", "--prune", "--quiet", "origin", cwd=path)
            else:
                shutil.rmtree(path, ignore_errors=True)
                git("clone", "--mirror", "--quiet", url, str(path))
        except CheckoutError as exc:
            raise RemoteUnreachable(f"cannot fetch {source}: {exc}") from exc
    return path


def resolve(repo: Path, rev: str) -> str:
    """The full SHA of ``rev`` in ``repo`` (a mirror or a working repository)."""
    try:
        return git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo).strip()
    except CheckoutError as exc:
        raise UnknownRevision(f"unknown revision {rev!r} in {repo}") from exc


def rev_range(repo: Path, spec: str) -> list[str]:
    """SHAs of ``A..B`` oldest first, following first parents (the branch's own history)."""
    if ".." not in spec:
        raise UnknownRevision(f"a range looks like A..B, got {spec!r}")
    start, end = spec.split("..", 1)
    start_sha, end_sha = resolve(repo, start), resolve(repo, end or "HEAD")
    out = git("rev-list", "--reverse", "--first-parent", f"{start_sha}..{end_sha}", cwd=repo)
    return out.split()


def recent(repo: Path, rev: str, count: int) -> list[str]:
    """The last ``count`` first-parent commits up to ``rev``, oldest first."""
    out = git("rev-list", "--reverse", "--first-parent", f"--max-count={count}", resolve(repo, rev), cwd=repo)
    return out.split()


def commit_info(repo: Path, sha: str) -> CommitInfo:
    fields = git("show", "-s", "--format=%H%x00%P%x00%an <%ae>%x00%ct%x00%B", sha, cwd=repo)
    full, parents, author, stamp, message = fields.split("\x00", 4)
    return CommitInfo(
        sha=full,
        parents=parents.split(),
        author=author,
        message=message.strip(),
        committed_at=datetime.fromtimestamp(int(stamp), UTC),
        position=int(git("rev-list", "--first-parent", "--count", full, cwd=repo)),
    )


def has_commit(repo: Path, sha: str) -> bool:
    try:
        resolve(repo, sha)
    except UnknownRevision:
        return False
    return True


def merge_base(repo: Path, base: str, head: str) -> str:
    """The best common ancestor of ``base`` and ``head``: what a pull request is measured against."""
    try:
        return git("merge-base", base, head, cwd=repo).strip()
    except CheckoutError as exc:
        raise UnknownRevision(f"{base[:12]} and {head[:12]} have no common ancestor in {repo}") from exc


@contextmanager
def worktree(mirror: Path, sha: str, worktrees_dir: Path) -> Iterator[Path]:
    """A detached worktree of ``mirror`` at exactly ``sha``; removed afterwards."""
    if not has_commit(mirror, sha):
        raise UnknownRevision(f"commit {sha} is not in the repository (was it pushed?)")
    worktrees_dir.mkdir(parents=True, exist_ok=True)
    path = worktrees_dir / f"{sha[:12]}-{uuid.uuid4().hex[:8]}"
    with _locked(mirror):
        git("worktree", "add", "--detach", "--force", str(path), sha, cwd=mirror)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        with _locked(mirror):
            git("worktree", "prune", cwd=mirror)
