"""A repository whose suites attack the host that runs them, and a victim that reports harm.

The attacker's suite tries, as a pull request's author would: the secrets in the parent's and
every other process's environment, the database file next to the worktrees, a git hook in
every mirror, files in other repositories' homes and caches, a daemon that outlives the suite,
the network (a port the test listens on), filling the disk and the output. Each attempt prints
one line ``ATTACK <name> <succeeded|blocked> <detail>``; the test reads them from the stored
suite output. The victim's suite reports what the attacker left behind for its next run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from support.sample_repo import commit, init

ATTACK = r'''
import glob, json, os, socket, sqlite3, subprocess, sys, time
from pathlib import Path

BAIT = json.loads(Path(__file__).with_name("bait.json").read_text())
report = {}


def verdict(name, succeeded, detail=""):
    report[name] = "succeeded" if succeeded else "blocked"
    print(f"ATTACK {name} {report[name]} {str(detail)[:300]!r}", flush=True)


def secrets_in(path):
    try:
        text = Path(path).read_bytes().decode(errors="replace")
    except OSError as exc:
        return None, exc
    return [s for s in BAIT["secrets"] if s in text], None


def ancestors():
    here = Path.cwd().resolve()
    return [here, *here.parents]


found, error = secrets_in(f"/proc/{os.getppid()}/environ")
verdict("parent-environ", bool(found), found or error or "no secret in it")

leaked = set()
for path in glob.glob("/proc/[0-9]*/environ"):
    hits, _ = secrets_in(path)
    leaked.update(hits or [])
verdict("every-environ", bool(leaked), sorted(leaked) or f"{len(glob.glob('/proc/[0-9]*'))} processes visible")

databases = [p / "roofwatch.db" for p in ancestors() if (p / "roofwatch.db").exists()]
read, wrote = [], []
for db in databases:
    try:
        with open(db, "rb") as handle:
            read.append(len(handle.read()))
        connection = sqlite3.connect(db)
        connection.execute("CREATE TABLE IF NOT EXISTS planted (x)")
        connection.commit()
        wrote.append(str(db))
    except (OSError, sqlite3.Error) as exc:
        read.append(repr(exc))
verdict("database-read", any(isinstance(n, int) for n in read), read or "no database file visible")
verdict("database-write", bool(wrote), wrote or "not written")

mirrors = [m for p in ancestors() for m in glob.glob(str(p / "mirrors" / "*.git"))]
hooked, readable = [], []
for mirror in mirrors:
    if glob.glob(os.path.join(mirror, "objects", "*")):
        readable.append(mirror)
    hook = Path(mirror) / "hooks" / "post-checkout"
    try:
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(f"#!/bin/sh\ntouch {BAIT['markers']}/hook-ran-$(basename $PWD)\n")
        hook.chmod(0o755)
        hooked.append(mirror)
    except OSError:
        pass
verdict("mirror-objects", bool(readable), readable or "no mirror visible")
verdict("mirror-hook", bool(hooked), hooked or "no mirror writable")

planted = []
for p in ancestors():
    for place in glob.glob(str(p / "homes" / "*")) + glob.glob(str(p / "setup-caches" / "*")):
        if BAIT["own_name"] in place:
            continue
        try:
            (Path(place) / "usercustomize.py").write_text("print('HIJACKED')\n")
            planted.append(place)
        except OSError:
            pass
verdict("foreign-home", bool(planted), planted or "no other repository's home or cache visible")

own = Path(os.environ["HOME"]) / "usercustomize.py"
previous = own.exists()
own.write_text("print('HIJACKED')\n")
verdict("home-persists", previous, "left from an earlier run" if previous else "home was empty")

stamp = BAIT["daemon"]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.execvp("sleep", ["sleep", stamp])
    os._exit(0)
os.wait()
verdict("daemon-started", True, stamp)

try:
    with socket.create_connection(("127.0.0.1", BAIT["port"]), timeout=3) as connection:
        connection.sendall(b"exfiltrated\n")
    verdict("network", True, f"connected to 127.0.0.1:{BAIT['port']}")
except OSError as exc:
    verdict("network", False, exc)

chunk = b"x" * (1 << 20)
for where in ("TMPDIR", "HOME"):
    written = 0
    try:
        with open(Path(os.environ[where]) / "filler", "wb") as handle:
            while written < BAIT["fill_bytes"]:
                handle.write(chunk)
                handle.flush()
                written += len(chunk)
    except OSError as exc:
        pass
    verdict(f"fill-{where.lower()}", written >= BAIT["fill_bytes"], f"{written} bytes written")
print("REPORT " + json.dumps(report), flush=True)
'''

FLOOD = "import sys\nfor _ in range(100):\n    sys.stdout.write('y' * (1 << 20))\nprint('FLOOD-END')\n"

VICTIM = r'''
import json, os
from pathlib import Path

BAIT = json.loads(Path(__file__).with_name("bait.json").read_text())
home = Path(os.environ["HOME"])
found = sorted(str(p) for p in home.rglob("usercustomize.py"))
hooks = sorted(p.name for p in Path(BAIT["markers"]).glob("hook-ran-*"))
print("VICTIM " + json.dumps({"planted": found, "hooks": hooks}), flush=True)
'''


@dataclass(frozen=True)
class Bait:
    """What the attacker looks for, and where the test watches for harm."""

    secrets: list[str]
    markers: Path
    port: int
    daemon: str  # the daemon's ``sleep`` argument, unique per test, found again in /proc
    fill_bytes: int
    own_name: str

    def json(self) -> str:
        return json.dumps({"secrets": self.secrets, "markers": str(self.markers), "port": self.port,
                           "daemon": self.daemon, "fill_bytes": self.fill_bytes, "own_name": self.own_name})


def suites(*entries: tuple[str, str]) -> str:
    return "".join(
        f'[[tool.roofwatch.suites]]\nname = "{name}"\nkind = "correctness"\ncommand = "{command}"\ntimeout = 120\n\n'
        for name, command in entries)


def attacker_repo(path: Path, bait: Bait) -> str:
    """The hostile repository; its head SHA."""
    init(path)
    files = {"attack.py": ATTACK, "flood.py": FLOOD, "bait.json": bait.json(),
             "pyproject.toml": suites(("attack", "python attack.py"), ("flood", "python flood.py"))}
    return commit(path, "Add suites", files, 1)


def victim_repo(path: Path, bait: Bait) -> str:
    init(path)
    files = {"victim.py": VICTIM, "bait.json": bait.json(), "pyproject.toml": suites(("victim", "python victim.py"))}
    return commit(path, "Add suites", files, 1)


def attack_report(output: str) -> dict[str, str]:
    """The attacker's verdicts from its suite output."""
    [line] = [line for line in output.splitlines() if line.startswith("REPORT ")]
    return dict(json.loads(line.removeprefix("REPORT ")))


def victim_report(output: str) -> dict[str, list[str]]:
    [line] = [line for line in output.splitlines() if line.startswith("VICTIM ")]
    return dict(json.loads(line.removeprefix("VICTIM ")))


def daemons(stamp: str) -> list[int]:
    """Host pids whose command line holds ``stamp``: a daemon that outlived its suite."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if stamp.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found
