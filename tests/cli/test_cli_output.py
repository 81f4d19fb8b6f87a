"""The command line in logs and pipes: whole tables off a terminal, JSON for ``run``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.sample_repo import build_history
from support.tests_support import ROOFWATCH, child_env

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

LONG_TITLE = "Fuse saxpy with its epilogue so the output is written once, not twice, on every supported device"


def _piped(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``roofwatch ARGS`` with stdout and stderr pipes and no COLUMNS, as in a CI log."""
    full = child_env({"ROOFWATCH_CALIBRATE": "0", **env})
    full.pop("COLUMNS", None)
    return subprocess.run([str(ROOFWATCH), *args], env=full, capture_output=True, text=True, timeout=600)


def test_run_prints_json_and_whole_tables_when_not_on_a_terminal(tmp_path: Path) -> None:
    repo = tmp_path / "kernels"
    shas = build_history(repo)
    subprocess.run(["git", "-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-q",
                    "--allow-empty", "-m", LONG_TITLE], cwd=repo, check=True)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}

    done = _piped(["run", "--repo", str(repo), "--last", "4", "--format", "json"], env)
    assert done.returncode == 1, done.stderr  # the broken commit fails its run
    rows = json.loads(done.stdout)  # stdout holds the JSON alone; progress went to stderr
    assert [row["sha"] for row in rows[:3]] == [shas["good"], shas["broken"], shas["fixed"]]
    assert [row["state"] for row in rows] == ["succeeded", "failed", "succeeded", "succeeded"]
    assert rows[1]["failed"] == 1 and rows[1]["benchmarks"] == 2 and "correctness-failure" in rows[1]["changes"]
    assert rows[3]["title"] == LONG_TITLE
    assert "commit(s) on" in done.stderr
    # The failed suite is explained in the JSON: its reason and the last lines of its output.
    [failed_suite] = rows[1]["suites"]
    assert (failed_suite["name"], failed_suite["status"]) == ("correctness", "failed")
    assert failed_suite["reason"] and "assert" in failed_suite["output_tail"]
    assert rows[0]["suites"] == [] and {row["analysis"] for row in rows} == {"done"}

    # Everything is measured now: the second run only prints its summary, as a table in a pipe.
    table = _piped(["run", "--repo", str(repo), "--last", "4"], env)
    assert LONG_TITLE in table.stdout  # neither cut to 40 characters nor wrapped
    header = next(line for line in table.stdout.splitlines() if "commit" in line and "state" in line)
    for column in ("run", "commit", "state", "tests ok", "failed", "benchmarks", "changes", "title"):
        assert column in header
    assert "…" not in table.stdout
    # ... and on the terminal, under the table, where the user looks.
    assert f"{shas['broken'][:12]} suite correctness failed: {failed_suite['reason']}" in table.stdout

    bad = _piped(["run", "--repo", str(repo), "--format", "yaml"], env)
    assert bad.returncode == 2 and "--format must be table or json" in bad.stderr


def test_compare_shows_parametrized_names_and_test_ids_whole() -> None:
    from rich.console import Console

    from roofwatch.service.cli.compare import render

    row = {"benchmark": "test_matmul[naive]", "base_median": 1.0, "head_median": 1.2, "change_pct": 20.0,
           "ci_low": 15.0, "ci_high": 25.0, "q_value": 0.01, "threshold_pct": 5.0, "direction": "regression"}
    data = {"benchmarks": [row], "error": "", "mde_pct": 4.0, "verdict": "failure", "rounds": 4,
            "new_failures": [{"suite": "correctness", "test_id": "test_add[bold]", "message": "x [red] y"}]}
    console = Console(record=True, width=200)
    render(console, data)
    shown = console.export_text()
    assert "test_matmul[naive]" in shown and "correctness::test_add[bold]: x [red] y" in shown


@pytest.mark.parametrize(("message", "shown"), [
    # git's own lines stay lines, each after the first indented under the message it continues.
    ("git worktree add failed: Preparing worktree (detached HEAD 1b3c95a)\nerror: unable to read sha1 file\n"
     "fatal: Could not reset index file to revision 'HEAD'.",
     "git worktree add failed: Preparing worktree (detached HEAD 1b3c95a)\n  error: unable to read sha1 file\n"
     "  fatal: Could not reset index file to revision 'HEAD'."),
    ("hint: call\r\n\tgit config --global --add safe.directory /x", "hint: call\n  \tgit config --global --add safe.directory /x"),
    # Other controls are still written out: a line cannot recolour the terminal or overwrite another.
    ("a\x1b[31mred\rforged", "a\\x1b[31mred\\x0dforged"),
    ("[bold]not markup[/]", "\\[bold]not markup\\[/]"),
    ("one line", "one line"),
])
def test_a_message_keeps_its_lines_and_nothing_else(message: str, shown: str) -> None:
    from roofwatch.service.cli.consoles import inert, inert_lines

    assert inert_lines(message) == shown
    assert "\n" not in inert(message)  # a value (a name, a title) stays one line


def test_gits_multi_line_error_reads_as_lines_not_escapes(tmp_path: Path) -> None:
    """A blob missing from the mirror: ``git worktree add`` fails in three lines, and they print as three."""
    repo = tmp_path / "kernels"
    shas = build_history(repo)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    _piped(["run", "--repo", str(repo), "--rev", shas["good"]], env)  # the mirror, with every object
    [mirror] = (tmp_path / "data" / "mirrors").glob("*.git")
    blob = subprocess.run(["git", "rev-parse", f"{shas['broken']}:kernel.py"], cwd=mirror, check=True,
                          capture_output=True, text=True).stdout.strip()
    (mirror / "objects" / blob[:2] / blob[2:]).unlink()

    done = _piped(["run", "--repo", str(repo), "--rev", shas["broken"]], env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "\\x0a" not in done.stdout
    lines = done.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "git worktree add failed:" in line)
    assert lines[first].startswith(f"{shas['broken'][:12]}: ") and "Preparing worktree" in lines[first]
    assert lines[first + 1].startswith("  error: unable to read sha1 file of kernel.py")
    assert lines[first + 2].startswith("  fatal: ")
