"""Reading ``[[tool.roofwatch.suites]]`` from a checked-out tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.sample_repo import PYPROJECT

from roofwatch.common.errors import SuiteConfigError
from roofwatch.suite_config.declared import load_suites

PROJECT = '[project]\nname = "k"\nversion = "0"\n'


def tree_with(tmp_path: Path, pyproject: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    return tmp_path


def suite(**fields: str) -> str:
    body = {"name": '"s"', "kind": '"correctness"', "command": '"python -m pytest"', **fields}
    return "[[tool.roofwatch.suites]]\n" + "".join(f"{key} = {value}\n" for key, value in body.items())


def test_missing_pyproject_declares_nothing(tmp_path: Path) -> None:
    assert load_suites(tmp_path) is None


@pytest.mark.parametrize("pyproject", [
    pytest.param(PROJECT, id="no-tool-table"),
    pytest.param(PROJECT + "[tool.ruff]\nline-length = 100\n", id="other-tools-only"),
    pytest.param(PROJECT + '[tool.roofwatch]\nnote = "later"\n', id="roofwatch-without-suites"),
])
def test_pyproject_without_suites_declares_nothing(tmp_path: Path, pyproject: str) -> None:
    assert load_suites(tree_with(tmp_path, pyproject)) is None


@pytest.mark.parametrize(("pyproject", "match"), [
    pytest.param("[project\nname = 1", "not valid TOML", id="invalid-toml"),
    pytest.param(suite(kind='"perf"'), "invalid", id="wrong-kind"),
    pytest.param(suite(command='""'), "command is empty", id="empty-command"),
    pytest.param(suite(command='"   "'), "command is empty", id="blank-command"),
    pytest.param(suite(command="[]"), "command is empty", id="empty-argv"),
    pytest.param(suite(timeout="0"), "invalid", id="zero-timeout"),
    pytest.param(suite(name='""'), "invalid", id="empty-name"),
    pytest.param('[[tool.roofwatch.suites]]\nname = "s"\nkind = "benchmark"\n', "command", id="no-command"),
    pytest.param(suite() + suite(kind='"benchmark"'), "unique", id="duplicate-names"),
    pytest.param("[tool.roofwatch]\nsuites = []\n", "non-empty array", id="no-suites"),
    pytest.param('[tool.roofwatch]\nsuites = "tests"\n', "non-empty array", id="suites-not-tables"),
    pytest.param("[tool.roofwatch]\nsuites = [1, 2]\n", "invalid", id="suites-not-tables-list"),
    pytest.param("[tool]\nroofwatch = 5\n", "table", id="roofwatch-not-a-table"),
])
def test_malformed_suites_are_config_errors(tmp_path: Path, pyproject: str, match: str) -> None:
    with pytest.raises(SuiteConfigError, match=match):
        load_suites(tree_with(tmp_path, pyproject))


def test_valid_config_is_parsed(tmp_path: Path) -> None:
    pyproject = PROJECT + """
[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = ["python", "-m", "pytest", "tests dir", "-q"]
timeout = 90.5
env = { TRITON_INTERPRET = "1", SEED = "7" }

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest 'bench dir' --benchmark-only"
setup = "pip install -e ."
setup_inputs = ["pyproject.toml", "setup.py"]
"""
    correctness, benchmarks = load_suites(tree_with(tmp_path, pyproject)) or []

    assert (correctness.name, correctness.kind, correctness.timeout) == ("correctness", "correctness", 90.5)
    assert correctness.env == {"TRITON_INTERPRET": "1", "SEED": "7"}
    assert correctness.argv() == ["python", "-m", "pytest", "tests dir", "-q"]
    assert correctness.setup is None
    assert correctness.setup_inputs == ["pyproject.toml"]

    assert (benchmarks.name, benchmarks.kind, benchmarks.timeout) == ("benchmarks", "benchmark", None)
    assert benchmarks.argv() == ["python", "-m", "pytest", "bench dir", "--benchmark-only"]
    assert benchmarks.env == {}
    assert benchmarks.setup == "pip install -e ."
    assert benchmarks.setup_inputs == ["pyproject.toml", "setup.py"]


def test_sample_repository_config(tmp_path: Path) -> None:
    specs = load_suites(tree_with(tmp_path, PYPROJECT)) or []
    assert [(s.name, s.kind, s.timeout) for s in specs] == [
        ("correctness", "correctness", 120), ("benchmarks", "benchmark", 120)]
    assert specs[1].argv()[:3] == ["python", "-m", "pytest"]
