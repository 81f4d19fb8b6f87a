"""How two recorded environments differ: table-driven, on the records the worker writes."""

from __future__ import annotations

from typing import Any

import pytest

from roofwatch.service.analysis.dependencies import SHOWN, environment_changes

ENV = {"python": "3.11.7", "packages": {"slowdep": "1.0", "numpy": "2.1.0"}}


@pytest.mark.parametrize(("before", "after", "phrases"), [
    (ENV, ENV, []),
    ({}, {}, []),
    (ENV, {**ENV, "packages": {"slowdep": "2.0", "numpy": "2.1.0"}}, ["slowdep 1.0 → 2.0"]),
    (ENV, {**ENV, "packages": {"slowdep": "1.0"}}, ["numpy 2.1.0 → absent"]),
    (ENV, {**ENV, "packages": {**ENV["packages"], "torch": "2.4.0"}}, ["torch absent → 2.4.0"]),
    (ENV, {**ENV, "python": "3.12.1"}, ["python 3.11.7 → 3.12.1"]),
    ({}, ENV, ["its own environment added", "python the worker → 3.11.7", "numpy absent → 2.1.0",
               "slowdep absent → 1.0"]),
])
def test_each_difference_is_one_phrase(before: dict[str, Any], after: dict[str, Any], phrases: list[str]) -> None:
    assert environment_changes(before, after) == phrases


def test_a_flood_of_differences_is_counted_not_listed() -> None:
    many = {"python": "3.11.7", "packages": {f"p{i:03d}": "1" for i in range(50)}}
    bumped = {"python": "3.11.7", "packages": {f"p{i:03d}": "2" for i in range(50)}}
    found = environment_changes(many, bumped)
    assert len(found) == SHOWN + 1 and found[-1] == f"and {50 - SHOWN} more"
