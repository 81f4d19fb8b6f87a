"""A commit's own environment: what it is built from, where it is cached, and a suite run in it (real sandbox)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import ValidationError
from support.sample_repo import commit, init
from support.wheels import build_wheel

from roofwatch.common.envelope import DeviceInfo
from roofwatch.common.errors import UnsafePath
from roofwatch.common.jobs import Job
from roofwatch.suite_config.declared import EnvironmentSpec
from roofwatch.workers.environments import digest_of, install_command, installed
from roofwatch.workers.runner import run_job

DEVICE = DeviceInfo(device_class="CPU test", fingerprint="test")
PYPROJECT = """\
[project]
name = "own-env"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest bench -q -p no:cacheprovider --benchmark-only --benchmark-min-rounds=3 --benchmark-max-time=0.001 --benchmark-warmup=off"
environment = { requirements = ["requirements.txt"] }
"""
# The benchmark imports what only the commit's environment holds, and says where its interpreter lives.
BENCH = """\
import sys

import pinned


def test_pinned(benchmark):
    benchmark.extra_info["prefix"] = sys.prefix
    benchmark(pinned.work)
"""


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "tree"
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_the_digest_follows_what_the_environment_is_built_from(tmp_path: Path) -> None:
    spec = EnvironmentSpec(requirements=["requirements.txt"])
    one = digest_of(spec, tree(tmp_path, {"requirements.txt": "pinned==1.0\n", "README": "a"}))
    same = digest_of(spec, tree(tmp_path, {"requirements.txt": "pinned==1.0\n", "README": "b"}))
    bumped = digest_of(spec, tree(tmp_path, {"requirements.txt": "pinned==2.0\n"}))
    assert one == same != bumped
    project = EnvironmentSpec(project=".[bench]")
    before = digest_of(project, tree(tmp_path, {"pyproject.toml": "[project]\nname='x'\n"}))
    after = digest_of(project, tree(tmp_path, {"pyproject.toml": "[project]\nname='x'\nversion='2'\n"}))
    assert before != after


def test_a_requirements_file_outside_the_tree_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="leaves the repository"):
        EnvironmentSpec(requirements=["../secrets.txt"])
    folder = tree(tmp_path, {"README": ""})
    (folder / "requirements.txt").symlink_to("/etc/passwd")
    with pytest.raises(UnsafePath):
        digest_of(EnvironmentSpec(requirements=["requirements.txt"]), folder)


@pytest.mark.parametrize("project", [". ; touch /tmp/x", "..", "/abs", ".[a] b", "git+https://x"])
def test_a_project_target_is_the_repository_itself_with_extras_only(project: str) -> None:
    with pytest.raises(ValidationError):
        EnvironmentSpec(project=project)


def test_an_environment_needs_something_to_build() -> None:
    with pytest.raises(ValidationError, match="environment needs requirements"):
        EnvironmentSpec()


def test_the_install_command_quotes_what_the_commit_names_and_stays_offline_with_a_wheel_folder(tmp_path: Path) -> None:
    command = install_command(EnvironmentSpec(requirements=["req s.txt"], project=".[bench]"), tmp_path / "env",
                              tmp_path / "wheels")
    assert "-r 'req s.txt'" in command and "'.[bench]'" in command
    assert f"--no-index --find-links {tmp_path / 'wheels'}" in command and " -m venv " in command


def test_installed_reads_dist_info_names_and_follows_no_link(tmp_path: Path) -> None:
    site = tmp_path / "env" / "lib" / "python3.11" / "site-packages"
    for name in ("Pinned_Dep-1.0.dist-info", "torch-2.4.0+cpu.dist-info", "not-a-dist", "pip-24.0.dist-info"):
        (site / name).mkdir(parents=True)
    (site / "evil-9.9.dist-info").symlink_to(tmp_path)
    assert installed(tmp_path / "env") == {"pinned-dep": "1.0", "torch": "2.4.0+cpu", "pip": "24.0"}


def test_a_suite_runs_in_the_environment_its_commit_pins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "pinned", "1.0", {"pinned/__init__.py": "def work():\n    return 1\n"})
    monkeypatch.setenv("ROOFWATCH_WHEEL_DIR", str(wheels))  # worker settings are read afresh on every call
    repo = tmp_path / "source"
    init(repo)
    sha = commit(repo, "pin", {"pyproject.toml": PYPROJECT, "requirements.txt": "pinned==1.0\n",
                               "bench/test_pinned.py": BENCH}, 1)
    job = Job(run_id=1, idempotency_key="run-1", repository="acme/own-env", clone_url=str(repo), sha=sha,
              data_dir=str(tmp_path / "data"))
    envelope = run_job(job, DEVICE)
    again = run_job(job, DEVICE)  # built once: the second run finds it
    [suite] = envelope.suites
    assert suite.status == "passed", suite.reason + suite.output_tail
    assert suite.environment["packages"]["pinned"] == "1.0" and suite.environment["digest"]
    [measurement] = suite.measurements
    built = Path(str(measurement.extra_info["prefix"]))
    assert built.name == suite.environment["digest"] and (tmp_path / "data") in built.parents
    assert again.suites[0].environment == suite.environment
    builds = [p for p in (tmp_path / "data" / "environments").rglob("*.done")]
    assert len(builds) == 1 and os.access(built / "bin" / "python", os.X_OK)
