"""The exit status a command gives for a comparison's verdict, so a CI step can gate on it.

One word means one status in ``roofwatch compare``, ``roofwatch verdict`` and ``roofwatch upload --pr``:
a verdict that keeps a pull request's check from green fails the step (a regression, a new test failure,
a benchmark of the base missing on the head that no maintainer accepted), one that cannot tell yet exits
3 so a workflow may retry or let it pass on purpose, and one the command could not reach is bad input.
"""

from __future__ import annotations

BAD_INPUT = 2
OF_VERDICT = {"no-change": 0, "improvement": 0, "regression": 1, "failure": 1, "missing": 1, "inconclusive": 3,
              "errored": BAD_INPUT}


def of_verdict(verdict: str) -> int:
    """The exit status for ``verdict`` (an unknown word is no verdict at all: bad input)."""
    return OF_VERDICT.get(verdict, BAD_INPUT)
