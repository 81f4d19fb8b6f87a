"""A commit measured in its own environment: a virtual environment built from what the commit pins.

A suite may declare how its environment is made::

    [[tool.roofwatch.suites]]
    name = "benchmarks"
    environment = { requirements = ["requirements-bench.txt"] }   # pip install -r each
    # or: environment = { project = ".[bench]" }                  # the repository itself, with extras

roofwatch builds a real virtual environment (``python -m venv``, its own ``bin/python``) once per
content hash of what it is built from — the declaration and every file it names (or, for
``project``, the repository's ``pyproject.toml``, ``setup.py`` and ``setup.cfg``) — into a cache
outside the worktree, and runs the suite's ``python`` from it, read-only. Its packages win over
roofwatch's own; the interpreter's site-packages come after them (a ``.pth`` file), so pytest,
pytest-benchmark and ``kernel_benchmark`` are there whether or not the commit pins them. The
build runs in the sandbox like ``setup`` (network allowed, nothing else of the host); with
``ROOFWATCH_WHEEL_DIR`` it installs only from that folder of wheels (``pip --no-index
--find-links``), so a host without network builds from what it was given.

Caches are scoped like setup caches: the repository's branches share theirs, a pull request's head
gets its own. What the environment holds (distribution names and versions, read from its
``*.dist-info`` folders, never by running it) is recorded with every suite that ran in it, so a
version bump between two commits is named when it moves a number.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from roofwatch.common.settings import get_worker_settings
from roofwatch.common.tree_files import UnsafePath, read_in
from roofwatch.suite_config.declared import EnvironmentSpec, SuiteSpec
from roofwatch.workers import sandbox

INPUT_LIMIT = 16 * 1024 * 1024  # a lock or requirements file
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
PACKAGES_KEPT = 2000  # distributions recorded per environment
BUILDER = "1"  # bump when the way environments are built changes: every cache is then rebuilt
FALLBACK_PTH = "roofwatch-interpreter.pth"
_DIST_INFO = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._]*)-(?P<version>[^-/]+)\.dist-info$")


class BuildLimits(Protocol):
    @property
    def repository(self) -> str: ...
    @property
    def suite_timeout_s(self) -> float: ...
    @property
    def output_limit(self) -> int: ...


@dataclass(frozen=True)
class Environment:
    """A built environment: its folder (``bin/python`` inside) and what it holds."""

    path: Path
    digest: str
    python: str
    packages: dict[str, str]  # normalised distribution name → version

    def record(self) -> dict[str, Any]:
        """What a suite result carries of it."""
        return {"digest": self.digest, "python": self.python, "packages": dict(self.packages)}


def digest_of(environment: EnvironmentSpec, tree: Path) -> str:
    """The content hash of everything the environment is built from (``UnsafePath`` for a file outside)."""
    digest = hashlib.sha256(f"{BUILDER}\0{sys.version_info[:3]}\0{environment.model_dump_json()}\0".encode())
    names = list(environment.requirements) if environment.project is None else [*environment.requirements,
                                                                                 *PROJECT_FILES]
    for name in names:
        content = read_in(tree, name, INPUT_LIMIT)
        digest.update(f"{name}\0".encode())
        digest.update(b"<missing>" if content is None else hashlib.sha256(content).digest())
    return digest.hexdigest()[:24]


def install_command(environment: EnvironmentSpec, target: Path, wheel_dir: Path | None) -> str:
    """The shell command that builds the environment at ``target`` from the worktree (its cwd)."""
    python = target / "bin" / "python"
    pip = [shlex.quote(str(python)), "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
           "--no-warn-script-location"]
    if wheel_dir is not None:
        pip += ["--no-index", "--find-links", shlex.quote(str(wheel_dir))]
    steps = [f"{shlex.quote(sys.executable)} -m venv {shlex.quote(str(target))}"]
    for name in environment.requirements:
        steps.append(" ".join([*pip, "-r", shlex.quote(name)]))
    if environment.project is not None:
        steps.append(" ".join([*pip, shlex.quote(environment.project)]))
    return " && ".join(steps)


Confine = Callable[[Path, Path], sandbox.Confinement]  # (scratch, environment folder) → the build's sandbox


def prepare(spec: SuiteSpec, tree: Path, data_dir: Path, job: BuildLimits, scope: str,
            confine: Confine) -> tuple[Environment | None, str | None]:
    """The suite's environment, built now if no build of the same inputs exists: (environment, None),
    (None, None) when the suite declares none, or (None, the reason it could not be built).

    ``confine`` gives the build its sandbox: the worktree, a scratch folder and the environment's
    folder writable, the network allowed, as for ``setup``.
    """
    if spec.environment is None:
        return None, None
    try:
        digest = digest_of(spec.environment, tree)
    except UnsafePath as exc:
        return None, f"environment: {exc}"
    root = _root(data_dir, job.repository) / scope
    target, marker = root / digest, root / f"{digest}.done"
    if not marker.exists():
        error = _build(spec, tree, target, job, confine)
        if error is not None:
            shutil.rmtree(target, ignore_errors=True)
            return None, error
        marker.touch()
    return Environment(target, digest, _python_version(target), installed(target)), None


def _build(spec: SuiteSpec, tree: Path, target: Path, job: BuildLimits, confine: Confine) -> str | None:
    assert spec.environment is not None
    settings = get_worker_settings()
    shutil.rmtree(target, ignore_errors=True)  # a build killed half-way leaves nothing a later run trusts
    target.mkdir(parents=True)
    command = install_command(spec.environment, target, settings.wheel_dir)
    with tempfile.TemporaryDirectory(prefix="roofwatch-environment-") as scratch_name:
        scratch = Path(scratch_name)
        (scratch / "home").mkdir()
        (scratch / "tmp").mkdir()
        confinement = confine(scratch, target)
        sandbox.hand_over([tree, scratch, target], confinement)
        env = sandbox.scrubbed_env({"HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp"),
                                    "PIP_NO_CACHE_DIR": "1"})
        done = sandbox.run(["/bin/sh", "-c", command], tree, env, spec.timeout or job.suite_timeout_s,
                           job.output_limit, confinement)
    if done.timed_out or done.exit_code != 0:
        return f"environment: `{command}` failed (exit {done.exit_code}):\n{done.output[-2000:]}"
    _fall_back_to_the_interpreter(target)
    return None


def _fall_back_to_the_interpreter(target: Path) -> None:
    """Put roofwatch's interpreter's packages after the environment's own: pytest, pytest-benchmark and the
    harness are there, and anything the environment installs itself wins. ``site.addsitedir`` (not a
    plain path line) so the interpreter's own ``.pth`` files (an editable install's) take effect too."""
    own = sysconfig.get_paths()["purelib"]
    for site in target.glob("lib/python*/site-packages"):
        (site / FALLBACK_PTH).write_text(f"import site; site.addsitedir({own!r})\n")


def installed(target: Path) -> dict[str, str]:
    """The distributions an environment holds, from its ``*.dist-info`` folder names (nothing is run)."""
    found: dict[str, str] = {}
    for site in sorted(target.glob("lib/python*/site-packages")):
        if site.is_symlink():
            continue
        for entry in sorted(site.iterdir()):
            match = _DIST_INFO.match(entry.name)
            if match and not entry.is_symlink():
                found[_normalise(match["name"])] = match["version"]
            if len(found) >= PACKAGES_KEPT:
                return found
    return found


def _python_version(target: Path) -> str:
    config = target / "pyvenv.cfg"
    try:
        text = config.read_text(errors="replace")[:4096] if not config.is_symlink() else ""
    except OSError:
        return ""
    match = re.search(r"^version(?:_info)?\s*=\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else ""


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _root(data_dir: Path, repository: str) -> Path:
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in repository)[:60]
    return data_dir / "environments" / f"{stem}-{hashlib.sha256(repository.encode()).hexdigest()[:16]}"
