"""Read files that a commit or a suite controls without letting them point anywhere else.

A worktree is the submitter's: any of its files, and any folder on the way to it, may be a
symbolic link to ``/etc/shadow``, another repository's mirror, a FIFO that never ends or a
1.5 GB file. The worker reads them as itself, so every path is checked as text first
(relative, no ``..``) and then opened one component at a time with ``O_NOFOLLOW``: a link
anywhere on the way is refused, only regular files are read, and never more than a limit.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path, PurePosixPath

from roofwatch.common.errors import UnsafePath
from roofwatch.common.limits import size_text

# Enough for any pyproject.toml, lock file or result file a suite writes; large sweeps' JSON
# reaches tens of MB.
DEFAULT_LIMIT = 64 * 1024 * 1024


def relative_parts(raw: str) -> tuple[str, ...]:
    """The components of a path that must stay inside its folder; ``UnsafePath`` otherwise."""
    if "\x00" in raw:
        raise UnsafePath(f"{raw!r} holds a NUL byte")
    path = PurePosixPath(raw)
    if path.is_absolute():
        raise UnsafePath(f"{raw!r} is absolute; paths are relative to the repository")
    parts = tuple(part for part in path.parts if part != ".")
    if not parts:
        raise UnsafePath(f"{raw!r} names no file inside the repository")
    if ".." in parts:
        raise UnsafePath(f"{raw!r} leaves the repository (..)")
    return parts


def _refusal(raw: str, exc: OSError) -> UnsafePath:
    if exc.errno == errno.ELOOP:
        return UnsafePath(f"{raw!r} is or goes through a symbolic link; it is not read")
    return UnsafePath(f"{raw!r} cannot be read: {exc.strerror}")


def open_in(root: Path, raw: str) -> int | None:
    """A file descriptor of ``root/raw`` opened without following any link, or None when absent."""
    parts = relative_parts(raw)
    directory = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory)
            except FileNotFoundError:
                return None
            except OSError as exc:
                # A link to a folder opened with O_DIRECTORY | O_NOFOLLOW fails with ENOTDIR on Linux.
                if _is_link(directory, part):
                    raise _refusal(raw, OSError(errno.ELOOP, "symbolic link")) from exc
                raise _refusal(raw, exc) from exc
            os.close(directory)
            directory = inner
        try:
            return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refusal(raw, exc) from exc
    finally:
        os.close(directory)


def _is_link(directory: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_fd(descriptor: int, raw: str, limit: int) -> bytes:
    """The whole content of an open regular file of at most ``limit`` bytes; closes it."""
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(f"{raw!r} is not a regular file; it is not read")
        if info.st_size > limit:
            raise UnsafePath(f"{raw!r} is {info.st_size} bytes, over the {size_text(limit)} limit ({limit} bytes)")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:  # it grew while being read
            raise UnsafePath(f"{raw!r} is over the {size_text(limit)} limit ({limit} bytes)")
        return data
    finally:
        os.close(descriptor)


def read_in(root: Path, raw: str, limit: int = DEFAULT_LIMIT) -> bytes | None:
    """The content of ``root/raw``, None when it does not exist; ``UnsafePath`` for anything else odd."""
    descriptor = open_in(root, raw)
    return None if descriptor is None else read_fd(descriptor, raw, limit)


def read_file(path: Path, limit: int = DEFAULT_LIMIT) -> bytes | None:
    """``path``'s content when it is a regular file and no link (its folder is ours), else None/``UnsafePath``."""
    return read_in(path.parent, path.name, limit)
