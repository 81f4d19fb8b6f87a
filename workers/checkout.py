"""A bare mirror per repository, fetched incrementally, and a detached worktree per run.

Mirrors live under ``<data dir>/mirrors``; a file lock per mirror keeps concurrent runs of
one repository on one host from fetching over each other.

Git itself is hardened, because the URLs, revisions and repositories it handles come from
outside: it runs with an empty HOME and no system config (the operator's ``~/.gitconfig``
never applies), hooks point at an empty folder (a hook planted in a mirror never runs),
only https, ssh and (for local paths) file transports are allowed, every user-supplied
argument comes after ``--`` or ``--end-of-options``, and credentials in a clone URL travel
in the environment as an HTTP header, never in argv, the mirror's config or an error.
"""

from __future__ import annotations

import base64
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

from roofwatch.common.errors import CheckoutError, RemoteUnreachable, UnknownRevision
from roofwatch.common.redaction import redact, split_credentials

GIT_TIMEOUT_S = 600
# Empty on purpose: git's HOME and hooks folder.
# Transports git may use for a remote (protocol.<name>.allow); file only for local paths.
_ALLOWED_SCHEMES = {"https": "always", "ssh": "always"}
NEUTRAL_DIR = Path(os.environ.get("TMPDIR", "/tmp")) / f"roofwatch-git-neutral-{os.getuid()}"


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


def _neutral_dir() -> Path:
    NEUTRAL_DIR.mkdir(mode=0o755, exist_ok=True)
    for stray in NEUTRAL_DIR.iterdir():  # nobody should write here; if someone did, it goes
        shutil.rmtree(stray, ignore_errors=True) if stray.is_dir() else stray.unlink(missing_ok=True)
    return NEUTRAL_DIR


def git(*args: str, cwd: Path | None = None, timeout: float = GIT_TIMEOUT_S, local_files: bool = False,
        credentials: str | None = None) -> str:
    """Run hardened git and return stdout; a failure raises ``CheckoutError`` with git's own words.

    ``local_files`` allows the file transport (a local path as the source); ``credentials``
    (``user:password`` from a clone URL) become an Authorization header in the environment.
    """
    neutral = _neutral_dir()
    settings = {"core.hooksPath": str(neutral), "protocol.allow": "never", "core.fsmonitor": "false",
                "credential.helper": "", "protocol.file.allow": "always" if local_files else "never"}
    settings |= {f"protocol.{scheme}.allow": rule for scheme, rule in _ALLOWED_SCHEMES.items()}
    if credentials:
        token = base64.b64encode(credentials.encode()).decode()
        settings["http.extraHeader"] = f"Authorization: Basic {token}"
    env = {"GIT_TERMINAL_PROMPT": "0", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(neutral),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_COUNT": str(len(settings))}
    for index, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raise CheckoutError(f"git {args[0]} timed out after {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise CheckoutError(redact(f"git {' '.join(args[:2])} failed: {done.stderr.strip()}"))
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
    local = is_local_path(source)
    url, credentials = (str(Path(source).resolve()), None) if local else split_credentials(source)
    if url.startswith("-"):
        raise RemoteUnreachable(f"not a repository URL or path: {redact(source)!r}")
    with _locked(path):
        try:
            if (path / "HEAD").exists():
                git("config", "remote.origin.url", url, cwd=path)
                git("fetch", "--prune", "--quiet", "origin", cwd=path, local_files=local, credentials=credentials)
            else:
                shutil.rmtree(path, ignore_errors=True)
                git("clone", "--mirror", "--quiet", "--", url, str(path), local_files=local,
                    credentials=credentials)
        except CheckoutError as exc:
            raise RemoteUnreachable(redact(f"cannot fetch {source}: {exc}")) from exc
    return path


def resolve(repo: Path, rev: str) -> str:
    """The full SHA of ``rev`` in ``repo`` (a mirror or a working repository)."""
    try:
        return git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", cwd=repo).strip()
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
    fields = git("show", "-s", "--format=%H%x00%P%x00%an <%ae>%x00%ct%x00%B", "--end-of-options", sha, cwd=repo)
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
        return git("merge-base", "--end-of-options", base, head, cwd=repo).strip()
    except CheckoutError as exc:
        raise UnknownRevision(f"{base[:12]} and {head[:12]} have no common ancestor in {repo}") from exc


def worktree_commit(tree: Path) -> str:
    """The SHA a worktree made by ``worktree`` was checked out at, from the folder name roofwatch gave it."""
    return tree.name.rsplit("-", 1)[0]


@contextmanager
def worktree(mirror: Path, sha: str, worktrees_dir: Path) -> Iterator[Path]:
    """A detached worktree of ``mirror`` at exactly ``sha``; removed afterwards."""
    if not has_commit(mirror, sha):
        raise UnknownRevision(f"commit {sha} is not in the repository (was it pushed?)")
    sha = resolve(mirror, sha)
    worktrees_dir.mkdir(parents=True, exist_ok=True)
    path = worktrees_dir / f"{sha}-{uuid.uuid4().hex[:8]}"
    with _locked(mirror):
        git("worktree", "add", "--detach", "--force", "--", str(path), sha, cwd=mirror)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        with _locked(mirror):
            git("worktree", "prune", cwd=mirror)
