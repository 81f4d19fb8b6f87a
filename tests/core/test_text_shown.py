"""Text from commits, suites, result files and CSV columns is shown as text: never Rich markup, never a
terminal escape, never a line of its own, never a credential."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch.workers.logs import TextFormatter

HOSTILE = "Fix [/] and [link=https://evil.example]click[/link] \x1b]8;;https://evil.example\x07x\x1b[31mred"
JUNIT_WRITER = """\
import sys
path = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--junitxml="))
open(path, "w").write('<testsuite><testcase classname="c" name="t"/></testsuite>')
"""


def clean(output: str) -> None:
    assert "\x1b" not in output and "\x07" not in output
    assert "Traceback" not in output


def test_run_shows_a_hostile_title_and_suite_name_as_text(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    commit(repo, HOSTILE, {"check.py": JUNIT_WRITER, "pyproject.toml": (
        '[[tool.roofwatch.suites]]\nname = "checks[/][bold]"\nkind = "correctness"\ncommand = "python check.py"\n')}, 1)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_SANDBOX": "unconfined"}
    done = roofwatch(["run", "--repo", str(repo), "--rev", "main"], env)
    clean(done.stdout + done.stderr)
    assert "checks[/][bold]" in done.stdout
    assert "Fix [/] and [link=https://evil.example]click" in done.stdout
    assert "\\x1b]8;;https://evil.example" in done.stdout  # written out, not interpreted


def test_upload_and_changepoints_show_names_as_text(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    init(repo)
    sha = commit(repo, "Work", {"kernel.py": "X = 1\n"}, 1)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    roofwatch(["repo", "add", "acme/text", "--clone-url", str(repo)], env)
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"benchmarks": [{"name": "test_[/]x\x1b[2J", "stats": {
        "median": 0.001, "mean": 0.001, "min": 0.001, "rounds": 3}}]}))
    done = roofwatch(["upload", str(results), "--repo", "acme/text", "--commit", sha, "--device-class", "CI",
                      "--suite", "bench[/]\nERROR forged line"], env)
    clean(done.stdout + done.stderr)
    assert done.returncode == 0
    csv = tmp_path / "history.csv"
    csv.write_text("commit,[/]\x1b[31mseries\n" + "".join(
        f"c{i},{(1.0 if i < 15 else 2.0) + 0.01 * (i % 3)}\n" for i in range(30)))
    found = roofwatch(["changepoints", "--csv", str(csv)], env)
    clean(found.stdout + found.stderr)
    assert "[/]\\x1b[31mseries" in found.stdout


def test_credentials_in_a_clone_url_are_never_printed(tmp_path: Path) -> None:
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    url = "https://ci-bot:hunter2-secret-pass@git.example.com/acme/private.git"
    added = roofwatch(["repo", "add", "acme/private", "--clone-url", url], env)
    assert "hunter2-secret-pass" not in added.stdout + added.stderr
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"benchmarks": [{"name": "t", "stats": {"median": 0.1, "mean": 0.1}}]}))
    failed = roofwatch(["upload", str(results), "--repo", "acme/private", "--commit", "a" * 40,
                        "--device-class", "CI"], env, check=False)
    assert failed.returncode == 2
    assert "hunter2-secret-pass" not in failed.stdout + failed.stderr


def test_a_log_message_is_one_line() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter())
    logger = logging.getLogger("roofwatch.test.one-line")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("upload to suite %s", "bench\n2026-01-01T00:00:00.000Z ERROR forged\x1b[31m")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert text.count("\n") == 1 and "\x1b" not in text and "bench\\n2026" in text
