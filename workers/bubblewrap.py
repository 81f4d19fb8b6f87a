"""The bubblewrap command line that confines one suite: what it sees, what it may write.

A suite is a stranger's code on a GPU host. Inside ``bwrap`` it gets its own PID, IPC, UTS,
cgroup and (by default) network namespaces, so it sees no other process, cannot read another
process's environment, and every process it starts dies with it (bwrap's PID 1 takes the
namespace down when the suite's command ends). Its filesystem is built from an allow-list:
the system (read-only), the interpreter roofwatch runs under (read-only), the paths the runner
names writable (the worktree, the result folder) or read-only (the setup cache), and empty
in-memory folders for HOME and TMPDIR. Nothing else exists in it: not the data dir with its
mirrors and database, not another repository's files, not the operator's home.

``/tmp`` and ``/run`` are empty in-memory folders too. An interpreter that lives under one of
them (a CI runner's virtualenv, a checkout in a temp dir) is mounted into them afterwards, and
only its own folders are: the rest of the host's ``/tmp`` stays out, and should the data dir
lie inside one of those folders, it is covered again by an empty read-only folder.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from roofwatch.common.errors import SandboxUnavailable

# Read-only system folders; whichever exist on this host are mounted.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
# Only the parts of /etc a program needs to start, resolve names and verify TLS; the rest
# (shadow, the operator's configuration) stays out.
ETC_ENTRIES = ("passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf",
               "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime",
               "ssl", "ca-certificates", "ca-certificates.conf", "mime.types", "protocols",
               "services", "os-release", "gai.conf")
# The GPU: NVIDIA's device nodes, passed through as devices (the rest of /dev is a minimal one).
GPU_DEVICE_GLOBS = ("nvidia*", "nvidia-caps", "dri")
GIB = 1024 ** 3
# bwrap itself runs on the host before any namespace exists, so nothing of the suite's may
# shape it: it is found on this fixed PATH and started with this environment alone. The
# suite's variables are handed over with --clearenv/--setenv and exist only inside.
LAUNCHER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Folders that are empty and in memory in every sandbox; never mounted whole from the host.
TMPFS_ROOTS = (Path("/"), Path("/tmp"), Path("/run"))


@dataclass(frozen=True)
class Isolation:
    """What one sandboxed command may touch; paths keep their host names inside."""

    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    # Empty in-memory folders (HOME, TMPDIR), private to this command, capped at ``private_size``.
    private: tuple[Path, ...] = ()
    network: bool = False
    private_size: int = GIB
    devices: tuple[Path, ...] = field(default_factory=lambda: gpu_devices())
    # Never visible, even inside a folder that is (the data dir under the interpreter's prefix);
    # ``writable`` and ``readable`` paths inside them still are.
    hidden: tuple[Path, ...] = ()


def gpu_devices(dev: Path = Path("/dev")) -> tuple[Path, ...]:
    return tuple(sorted({path for pattern in GPU_DEVICE_GLOBS for path in dev.glob(pattern)}))


def interpreter_dirs() -> tuple[Path, ...]:
    """The Python environment suites run under (``python`` in a suite command), read-only."""
    dirs = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent}
    return tuple(sorted(dirs | set(harness_dirs())))


def harness_dirs() -> tuple[Path, ...]:
    """The installed ``roofwatch`` package (the pytest plugin every suite loads), read-only.

    A regular install keeps it inside the environment; an editable one (``pip install -e``)
    leaves it in the source checkout, which suites would otherwise not see. Only the package
    folder is mounted, never the checkout around it.
    """
    spec = importlib.util.find_spec("roofwatch")
    if spec is None or not spec.submodule_search_locations:
        return ()
    return tuple(Path(location).resolve() for location in spec.submodule_search_locations)


def _ro(paths: Iterable[Path | str]) -> list[str]:
    return [arg for path in paths if Path(path).exists() for arg in ("--ro-bind", str(path), str(path))]


def _covered(isolation: Isolation, shown: Iterable[Path]) -> list[Path]:
    """The hidden paths that exist inside (or are) a folder in ``shown``."""
    return [path for path in isolation.hidden
            if path.exists() and any(path == folder or folder in path.parents for folder in shown)]


def resolve(binary: str) -> str:
    """The absolute path of bwrap, looked up on the fixed ``LAUNCHER_PATH``, never the caller's PATH."""
    if os.path.isabs(binary):
        return binary
    found = shutil.which(binary, path=LAUNCHER_PATH)
    if found is None:
        raise SandboxUnavailable(
            f"{binary!r} is not installed in {LAUNCHER_PATH} (Debian/Ubuntu: apt-get install bubblewrap)")
    return found


def launcher_env() -> dict[str, str]:
    """The whole environment bwrap is started with: nothing a suite or the worker's own env chose."""
    return {"PATH": LAUNCHER_PATH, "LANG": "C.UTF-8"}


def command(argv: list[str], isolation: Isolation, binary: str = "bwrap", cwd: Path | None = None,
            env: dict[str, str] | None = None) -> list[str]:
    """``argv`` wrapped in bwrap; order matters: later mounts cover earlier ones.

    ``env`` is the suite's whole environment inside the sandbox (``--clearenv`` then one
    ``--setenv`` each): bwrap's own process sees none of it.
    """
    args = [resolve(binary), "--unshare-all", "--die-with-parent", "--new-session"]
    if isolation.network:
        args.append("--share-net")
    args += _ro(SYSTEM_DIRS)
    args += _ro(Path("/etc") / name for name in ETC_ENTRIES)
    args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/run"]
    # After the in-memory /tmp and /run, so an interpreter under either is not covered by them.
    interpreter = [path for path in interpreter_dirs() if path not in TMPFS_ROOTS]
    args += _ro(interpreter)
    hidden = _covered(isolation, interpreter)
    for path in hidden:
        args += ["--tmpfs", str(path)]
    for device in isolation.devices:
        args += ["--dev-bind-try", str(device), str(device)]
    args += _ro(isolation.readable)
    for path in isolation.writable:
        args += ["--bind", str(path), str(path)]
    # After the writable binds: HOME and TMPDIR lie inside the writable result folder, whose bind
    # would otherwise cover them with the host's folders, on disk and without the size cap.
    for path in isolation.private:
        args += ["--size", str(isolation.private_size), "--perms", "0700", "--tmpfs", str(path)]
    # Read-only only now: the worktree's mount point inside a hidden data dir had to be made first.
    for path in hidden:
        args += ["--remount-ro", str(path)]
    if cwd is not None:
        args += ["--chdir", str(cwd)]
    args.append("--clearenv")
    for key, value in (env or {}).items():
        args += ["--setenv", key, value]
    return [*args, "--", *argv]


@lru_cache(maxsize=4)
def check(binary: str = "bwrap") -> None:
    """Start one empty sandbox; raise ``SandboxUnavailable`` with bwrap's own words if it fails."""
    found = resolve(binary)
    try:
        done = subprocess.run(command(["/bin/true"], Isolation(devices=()), found),
                              capture_output=True, text=True, timeout=30, env=launcher_env())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap could not start: {exc}") from exc
    if done.returncode != 0:
        raise SandboxUnavailable(
            f"bubblewrap cannot create its namespaces here: {done.stderr.strip()} (a container needs "
            "user namespaces allowed, e.g. docker's seccomp=unconfined and apparmor=unconfined)")
