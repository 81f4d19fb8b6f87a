"""One bug, one change: a commit that fails eleven parametrizations of one test function.

A generated repository (``support/parametrized_repo.py``) whose third commit breaks ``scale`` for
every size ``test_scale[1]`` … ``test_scale[11]`` checks, measured through the real CLI: its
history, the bisection of the commits between, the change list in every form, triage, ``compare``
and the fix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from support.parametrized_repo import build, parametrized_ids
from support.tests_support import roofwatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

FUNCTION = "checks.test_kernel::test_scale"


def _runs_by_trigger(data_dir: Path) -> dict[str, int]:
    engine = create_engine(f"sqlite:///{data_dir / 'roofwatch.db'}")
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT trigger, COUNT(*) FROM run GROUP BY trigger")).all()
    engine.dispose()
    return {trigger: count for trigger, count in rows}


def test_a_bug_failing_eleven_parametrizations_is_one_change_bisected_once(tmp_path: Path) -> None:
    repo = tmp_path / "kernels"
    shas = build(repo)
    data = tmp_path / "data"
    env = {"ROOFWATCH_DATA_DIR": str(data)}
    roofwatch(["repo", "add", "acme/kernels", "--clone-url", str(repo)], env)

    # The good commit and the changelog after the break: the docs commit and the break itself were not measured.
    done = roofwatch(["run", "--repo", "acme/kernels", "--rev", shas["good"], "--rev", shas["changelog"]], env,
                     check=False)
    assert done.returncode == 1, done.stdout  # the broken commit fails the run

    rows = json.loads(roofwatch(["regressions", "--format", "json"], env).stdout)
    failures = [r for r in rows if r["kind"] == "correctness-failure"]
    assert len(failures) == 1, failures
    change = failures[0]
    # Named by its function, listing the parametrizations in the order the suite ran them.
    assert change["benchmark"] == FUNCTION
    assert change["tests"] == parametrized_ids() == change["details"]["tests"]
    assert change["details"]["message"].startswith("AssertionError: scale of 1 values is off by 1.0")
    # Bisected once, as one change: the docs commit passes, the break is the first bad commit.
    assert change["commit"] == shas["broken"] and change["state"] == "new"
    assert [(e["sha"], e["verdict"]) for e in change["details"]["bisect_log"]] == [
        (shas["broken"], "bad"), (shas["docs"], "good")]
    assert _runs_by_trigger(data) == {"manual": 2, "bisect": 2}

    # The table: one row, its parametrizations on a line of their own.
    table = roofwatch(["regressions"], env).stdout
    assert len(re.findall(r"correctness-failure", table)) == 1
    assert "11 parametrizations: [1], [2], [3], [4], [5], [6], [7], [8] and 3 more" in table

    # Triaged once for all eleven.
    triaged = roofwatch(["triage", str(change["id"]), "acknowledged", "--note", "fused scale adds one"], env)
    assert "acknowledged" in triaged.stdout

    # A pull request's view of the same break: one new failure, eleven parametrizations, exit 1.
    compared = roofwatch(["compare", shas["good"], shas["broken"], "--repo", "acme/kernels", "--format", "json"],
                         env, check=False)
    assert compared.returncode == 1, compared.stderr
    report = json.loads(compared.stdout)
    assert [(f["suite"], f["test_id"], f["tests"]) for f in report["new_failures"]] == [
        ("correctness", FUNCTION, parametrized_ids())]
    assert report["new_failures"][0]["message"].startswith("AssertionError: scale of 1 values is off by 1.0")
    said = roofwatch(["compare", shas["good"], shas["broken"], "--repo", "acme/kernels"], env, check=False).stdout
    assert len(re.findall(r"^new failure ", said, re.M)) == 1
    assert (f"new failure correctness::{FUNCTION} (11 parametrizations: [1], [2], [3], [4], [5], [6], [7], [8] "
            "and 3 more; the first): AssertionError: scale of 1 values is off by 1.0") in said

    # The fix passes all eleven: the one change is fixed.
    roofwatch(["run", "--repo", "acme/kernels", "--rev", shas["fixed"]], env)
    after = [r for r in json.loads(roofwatch(["regressions", "--format", "json"], env).stdout)
             if r["kind"] == "correctness-failure"]
    assert [(r["id"], r["state"], r["details"]["fixed_at"]) for r in after] == [
        (change["id"], "fixed", shas["fixed"])]
