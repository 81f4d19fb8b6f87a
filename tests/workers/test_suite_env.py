"""A suite's own ``env`` reaches its processes inside the sandbox only, never bwrap on the host.

The escape these tests close: a commit that sets ``PATH = "bin:/usr/bin:/bin"`` and commits a
``bin/bwrap`` script used to have that script started *on the host* as the worker's user, since
the suite's variables were the environment bwrap itself was looked up and started with.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support.sample_repo import commit, git, init
from support.tests_support import roofwatch

from roofwatch.common.errors import SuiteConfigError
from roofwatch.suite_config.declared import suites_in
from roofwatch.suite_config.suite_env import check_env, inside_tree
from roofwatch.workers import bubblewrap, sandbox


@pytest.mark.parametrize(("env", "refused"), [
    ({"OMP_NUM_THREADS": "8", "MY_FLAG": "on"}, None),
    ({"PATH": "bin:/usr/bin:/bin"}, None),  # harmless inside the sandbox: bwrap never sees it
    ({"PYTHONPATH": "src"}, None),
    ({"PYTHONPATH": "src:lib/py"}, None),
    ({"PYTHONHASHSEED": "0", "PYTHONWARNINGS": "error"}, None),
    ({"LD_PRELOAD": "./evil.so"}, "LD_PRELOAD"),
    ({"LD_LIBRARY_PATH": "."}, "LD_LIBRARY_PATH"),
    ({"LD_AUDIT": "x.so"}, "LD_AUDIT"),
    ({"BASH_ENV": "evil.sh"}, "BASH_ENV"),
    ({"ENV": "evil.sh"}, "ENV"),
    ({"GIT_DIR": "/data/mirrors/x"}, "GIT_DIR"),
    ({"GIT_CONFIG_GLOBAL": "cfg"}, "GIT_CONFIG_GLOBAL"),
    ({"PYTHONSTARTUP": "evil.py"}, "PYTHONSTARTUP"),
    ({"PYTHONHOME": "/opt/evil"}, "PYTHONHOME"),
    ({"PYTHONUSERBASE": "x"}, "PYTHONUSERBASE"),
    ({"PYTHONPATH": "/etc"}, "PYTHONPATH"),
    ({"PYTHONPATH": "src:../../other-repo"}, "PYTHONPATH"),
    ({"HOME": "/root"}, "HOME"),
    ({"TMPDIR": "/tmp"}, "TMPDIR"),
    ({"ROOFWATCH_SETUP_CACHE": "/x"}, "ROOFWATCH_SETUP_CACHE"),
    ({"A=B": "x"}, "A=B"),
    ({"X": "a\0b"}, "NUL"),
])
def test_suite_env_policy(env: dict[str, str], refused: str | None) -> None:
    if refused is None:
        check_env(env)
        return
    with pytest.raises(ValueError, match=refused):
        check_env(env)


@pytest.mark.parametrize(("path", "inside"), [
    ("src", True), ("a/b/../c", True), ("./src", True), ("a/..", True),
    ("/src", False), ("..", False), ("a/../../b", False), ("", False),
])
def test_inside_tree(path: str, inside: bool) -> None:
    assert inside_tree(path) is inside


def test_a_config_with_a_loader_variable_is_refused_with_the_reason() -> None:
    table = {"tool": {"roofwatch": {"suites": [
        {"name": "b", "kind": "benchmark", "command": "python -m pytest", "env": {"LD_PRELOAD": "./evil.so"}}]}}}
    with pytest.raises(SuiteConfigError, match="LD_PRELOAD may not be set by a suite"):
        suites_in(table)


def test_a_suites_pythonpath_adds_to_the_tree_instead_of_replacing_it(tmp_path: Path) -> None:
    env = sandbox.scrubbed_env({"PYTHONPATH": "src"}, pythonpath=tmp_path, extra_path=tmp_path / "cache")
    assert env["PYTHONPATH"].split(":") == [str(tmp_path / "src"), str(tmp_path), str(tmp_path / "cache")]


def test_bwrap_is_started_with_a_fixed_environment_and_passes_the_suites_inside(tmp_path: Path) -> None:
    argv = bubblewrap.command(["/bin/true"], bubblewrap.Isolation(devices=()), "bwrap", tmp_path,
                              {"PATH": "bin:/usr/bin", "FLAG": "1"})
    assert Path(argv[0]).is_absolute()
    tail = argv[argv.index("--clearenv"):argv.index("--")]
    assert tail == ["--clearenv", "--setenv", "PATH", "bin:/usr/bin", "--setenv", "FLAG", "1"]
    assert bubblewrap.launcher_env()["PATH"] == bubblewrap.LAUNCHER_PATH


ESCAPE_PYPROJECT = """\
[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest checks -q -p no:cacheprovider"
env = { PATH = "bin:/usr/bin:/bin", SUITE_MARK = "inside" }
"""
FAKE_BWRAP = """\
#!/bin/sh
# Were this started on the host (as bwrap), it would leave its mark there.
echo escaped > {marker}
exec /usr/bin/bwrap "$@"
"""
CHECKS = """\
import os


def test_env_reaches_the_suite():
    assert os.environ["SUITE_MARK"] == "inside"
    assert ":bin:/usr/bin:/bin" in os.environ["PATH"]
"""


def test_a_committed_bwrap_on_the_suites_path_never_runs_on_the_host(tmp_path: Path) -> None:
    bubblewrap.check()
    marker = tmp_path / "escaped-to-host"
    repo = tmp_path / "repo"
    init(repo)
    commit(repo, "suites whose PATH finds a committed bwrap first", {
        "pyproject.toml": ESCAPE_PYPROJECT, "checks/test_env.py": CHECKS,
        "bin/bwrap": FAKE_BWRAP.format(marker=marker),
    }, 1)
    (repo / "bin" / "bwrap").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "make bwrap executable")
    data = tmp_path / "data"
    env = {"ROOFWATCH_DATA_DIR": str(data), "ROOFWATCH_SANDBOX": "bubblewrap"}
    done = roofwatch(["run", "--repo", str(repo), "--rev", "main", "--format", "json"], env, check=False)
    assert not marker.exists(), "the commit's bwrap ran on the host"
    [record] = json.loads(done.stdout)
    assert record["state"] == "succeeded", done.stdout + done.stderr
    with sqlite3.connect(data / "roofwatch.db") as connection:
        [(status,)] = connection.execute("SELECT status FROM suiteexecution").fetchall()
    assert status == "passed"


def test_a_commit_that_preloads_a_library_is_errored_with_the_reason(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    commit(repo, "preload", {"pyproject.toml": ESCAPE_PYPROJECT.replace(
        'PATH = "bin:/usr/bin:/bin"', 'LD_PRELOAD = "./evil.so"'), "checks/test_env.py": CHECKS}, 1)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_SANDBOX": "bubblewrap"}
    done = roofwatch(["run", "--repo", str(repo), "--rev", "main", "--format", "json"], env, check=False)
    [record] = json.loads(done.stdout)
    assert record["state"] == "errored"
    assert "LD_PRELOAD may not be set by a suite" in record["reason"]
