"""The named sets of ``service.core.vocabulary`` hold what their rules say, and nothing is spelled twice."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from roofwatch.service.core import vocabulary as v

ROOT = Path(__file__).resolve().parents[2]


def test_the_sets_relate_as_their_rules_say() -> None:
    assert set(v.HEAD_TRIGGERS) == set(v.BRANCH_HISTORY_TRIGGERS) - {"bisect"}  # a bisection is never the head
    assert set(v.BRANCH_HISTORY_TRIGGERS) == set(v.TRIGGERS) - {"pull_request"}  # a PR head is not the branch
    assert set(v.LATEST_EXCLUDED_TRIGGERS) == set(v.TRIGGERS) - set(v.HEAD_TRIGGERS)
    assert set(v.MEASURED_STATES) <= v.TERMINAL_STATES and v.TERMINAL_STATES == set(v.RUN_STATES) - {"queued", "running"}
    assert set(v.OPEN_STATES) <= set(v.TRIAGE_STATES)


@pytest.mark.parametrize("named", [v.RUN_STATES, v.TRIGGERS, v.TRIAGE_STATES, v.CHANGE_KINDS, v.OPEN_STATES,
                                   v.HEAD_TRIGGERS, v.BRANCH_HISTORY_TRIGGERS, v.LATEST_EXCLUDED_TRIGGERS])
def test_sets_are_plain_strings_a_query_binds_as_they_are(named: tuple[str, ...]) -> None:
    assert all(type(member) is str for member in named)


@pytest.mark.parametrize("spelled", ['("new", "acknowledged")', '("push", "manual"', '("succeeded", "failed")',
                                     '("pull_request", "bisect")', '"errored", "cancelled", "skipped"'])
def test_no_named_set_is_spelled_out_again(spelled: str) -> None:
    """The sets were once written out where they were used, three different ways; now they are named."""
    found = subprocess.run(["git", "grep", "-l", "-F", spelled, "--", "service", "dashboard", "workers"], cwd=ROOT,
                           capture_output=True, text=True).stdout.split()
    assert found == [], found
