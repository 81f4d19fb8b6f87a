"""Run one untrusted command: in bubblewrap, scrubbed environment, resource, time and output caps.

A suite is someone else's code running on our GPU host. It gets no service secrets, it sees
only the files its ``Isolation`` names (see ``roofwatch.workers.bubblewrap``), every process it starts
ends with it (its own PID namespace), it cannot outlive its timeout (the whole process group
is killed) nor the worker that started it (the kernel kills it when its parent dies, even by
SIGKILL), it cannot fill memory with output (we keep the head and the tail, and count what we
dropped), and it runs under CPU, file-size and process-count limits, as an unprivileged user
where configured.
"""

from __future__ import annotations

import ctypes
import io
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from roofwatch.workers import bubblewrap

# Variables a suite legitimately needs; everything else (ROOFWATCH_*, GITHUB_*, cloud
# credentials, tokens) stays behind.
ALLOWED_ENV = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TMPDIR", "USER", "LOGNAME", "TZ",
               "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH",
               "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "OMP_NUM_THREADS",
               "TRITON_INTERPRET", "TRITON_CACHE_DIR", "TRITON_HOME", "TORCHINDUCTOR_CACHE_DIR",
               "XDG_CACHE_HOME", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
ALLOWED_PREFIXES = ("LC_",)
KILL_GRACE_S = 5.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class Confinement:
    """Who the command runs as, in which sandbox, under which limits; None means unchanged.

    ``isolation`` None runs the command unconfined, as a plain child process: only for a
    trusted user's own code (``ROOFWATCH_SANDBOX=unconfined``).
    """

    user: str | None = None
    memory_limit: int | None = None
    cpu_seconds: int | None = None
    file_size_limit: int | None = None
    max_processes: int | None = None
    isolation: bubblewrap.Isolation | None = None
    bwrap: str = "bwrap"


def _in_child(confinement: Confinement) -> None:
    """Runs in the forked child before exec: die with the parent, set the resource limits."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the timeout still bounds the command
    # Limits are inherited by bwrap and everything the suite starts.
    for limit, value in ((resource.RLIMIT_AS, confinement.memory_limit),
                         (resource.RLIMIT_CPU, confinement.cpu_seconds),
                         (resource.RLIMIT_FSIZE, confinement.file_size_limit),
                         (resource.RLIMIT_NPROC, confinement.max_processes)):
        if value:
            resource.setrlimit(limit, (value, value))


@dataclass(frozen=True)
class Completed:
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output: str
    dropped_bytes: int


def scrubbed_env(extra: dict[str, str] | None = None, pythonpath: Path | None = None,
                 extra_path: Path | None = None, interpreter: Path | None = None) -> dict[str, str]:
    """The environment a suite runs with. ``interpreter``: the ``bin`` folder whose ``python`` the suite's
    command means (the commit's own environment); by default the one roofwatch runs under."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key in ALLOWED_ENV or key.startswith(ALLOWED_PREFIXES)
    }
    # `python` in a suite command means the commit's own environment where it has one, else the
    # interpreter roofwatch runs under, whose environment has torch, triton and pytest-benchmark.
    python_bin = str(interpreter) if interpreter is not None else str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([python_bin, env.get("PATH", "/usr/bin:/bin")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    extra = dict(extra or {})
    if "PATH" in extra:
        # `python` stays that interpreter; a suite's own entries come next.
        env["PATH"] = os.pathsep.join([python_bin, extra.pop("PATH")])
    suite_paths = [entry for entry in extra.pop("PYTHONPATH", "").split(os.pathsep) if entry]
    if pythonpath is not None:
        # The checked-out tree must win over any installed copy of the same packages; a suite's
        # own entries (relative to the tree, e.g. a src/ layout) come first and add to it.
        own = [pythonpath / entry for entry in suite_paths]
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (*own, pythonpath, extra_path) if p is not None)
    elif suite_paths:
        env["PYTHONPATH"] = os.pathsep.join(suite_paths)
    env.update(extra)
    return env


class _CappedBuffer:
    """Keeps the first ``head`` and last ``tail`` bytes of a stream."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 4
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail.append(chunk)
        self.tail_size += len(chunk)
        while self.tail_size > self.tail_limit:
            first = self.tail.popleft()
            excess = self.tail_size - self.tail_limit
            if len(first) > excess:
                self.tail.appendleft(first[excess:])
                self.dropped += excess
                self.tail_size -= excess
            else:
                self.dropped += len(first)
                self.tail_size -= len(first)

    def text(self) -> str:
        middle = f"\n[... {self.dropped} bytes of output dropped ...]\n" if self.dropped else ""
        return (bytes(self.head).decode("utf-8", "replace") + middle
                + b"".join(self.tail).decode("utf-8", "replace"))


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float, output_limit: int,
        confinement: Confinement = Confinement()) -> Completed:
    """Run ``argv`` to completion or until ``timeout_s``; never raises for the command's sake."""
    started = time.monotonic()
    buffer = _CappedBuffer(output_limit)
    if confinement.isolation is not None:
        try:
            argv = bubblewrap.command(argv, confinement.isolation, confinement.bwrap, cwd, env)
        except bubblewrap.SandboxUnavailable as exc:
            return Completed(None, False, 0.0, f"cannot start the sandbox: {exc}", 0)
        env = bubblewrap.launcher_env()
    try:
        drop = bool(confinement.user) and os.geteuid() == 0
        user = confinement.user if drop else None
        group = _primary_group(confinement.user) if drop and confinement.user else None
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: _in_child(confinement), user=user, group=group,
            extra_groups=[] if drop else None,
        )
    except (OSError, KeyError, subprocess.SubprocessError) as exc:
        return Completed(None, False, 0.0, f"cannot start {argv[0]!r}: {exc}", 0)

    # Popen's default buffering gives a BufferedReader: read1 returns what is there.
    stream = cast(io.BufferedReader, process.stdout)

    def pump() -> None:
        while chunk := stream.read1(65536):
            buffer.feed(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process)
    # Children that inherited the pipe may keep it open; the group kill above ends them too.
    reader.join(timeout=KILL_GRACE_S)
    if reader.is_alive():
        _kill_group(process)
        reader.join(timeout=KILL_GRACE_S)
    return Completed(
        exit_code=_command_status(process.returncode, confinement), timed_out=timed_out,
        duration_s=time.monotonic() - started, output=buffer.text(), dropped_bytes=buffer.dropped,
    )


def _command_status(code: int | None, confinement: Confinement) -> int | None:
    """The command's own status: bwrap's PID 1 reports a death by signal N as 128 + N."""
    if confinement.isolation is not None and code is not None and 128 < code < 128 + signal.NSIG:
        return -(code - 128)
    return code


def _primary_group(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_gid


def hand_over(paths: list[Path], confinement: Confinement) -> None:
    """Give ``paths`` (recursively) to the suite user, so it can write its results and caches."""
    if not confinement.user or os.geteuid() != 0:
        return
    import pwd

    entry = pwd.getpwnam(confinement.user)
    for root in paths:
        # Every suite of a run is handed the same worktree and home: walk each once, not per suite.
        if root.stat().st_uid == entry.pw_uid:
            continue
        for path in [root, *root.rglob("*")]:
            os.lchown(path, entry.pw_uid, entry.pw_gid)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """TERM the whole group, then KILL whatever is left of it (grandchildren included)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
