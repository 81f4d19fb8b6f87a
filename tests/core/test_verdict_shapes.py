"""``abtest.ABVerdict`` is the one A/B result type: its comparison row, its report row and its public model
carry its fields by name and are made from it and back by ``core/verdict_rows``. A statistic added to the
verdict and forgotten in one of them fails here, naming that shape and the file it lives in."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from types import SimpleNamespace

import pytest

from roofwatch.ab import abtest
from roofwatch.service.api.public import ComparisonResultPublic
from roofwatch.service.core.models import ComparisonResult
from roofwatch.service.core.reports import BenchmarkVerdictRow
from roofwatch.service.core.verdict_rows import NOT_STORED, STORED, stored_fields, stored_verdict, verdict_row

VERDICT = abtest.ABVerdict(change_pct=12.5, ci_low=8.0, ci_high=17.0, p_value=1e-4, q_value=3e-4, noise_pct=1.2,
                           threshold_pct=2.0, mde_pct=3.5, rounds=6, direction="regression", reason="slower",
                           confidence=0.995, rounds_needed=None)


def lacking(verdict_fields: list[str]) -> dict[str, list[str]]:
    """Per shape that lacks some, the verdict's fields it lacks."""
    stored = [name for name in verdict_fields if name not in NOT_STORED]
    shapes = (("ComparisonResult (service/core/models.py, and a migration)", stored, ComparisonResult.model_fields),
              ("ComparisonResultPublic (service/api/public.py)", stored, ComparisonResultPublic.model_fields),
              ("BenchmarkVerdictRow (service/core/reports.py)", verdict_fields, BenchmarkVerdictRow.__annotations__))
    found = {shape: [name for name in wanted if name not in have] for shape, wanted, have in shapes}
    return {shape: names for shape, names in found.items() if names}


def test_every_shape_carries_every_field_of_the_verdict() -> None:
    assert lacking([f.name for f in fields(abtest.ABVerdict)]) == {}


def test_a_statistic_added_to_the_verdict_alone_is_named_in_every_shape_that_lacks_it() -> None:
    found = lacking([*(f.name for f in fields(abtest.ABVerdict)), "skew_pct"])
    assert set(found) == {"ComparisonResult (service/core/models.py, and a migration)",
                          "ComparisonResultPublic (service/api/public.py)",
                          "BenchmarkVerdictRow (service/core/reports.py)"}
    assert all(names == ["skew_pct"] for names in found.values())


@pytest.mark.parametrize("verdict", [VERDICT, replace(VERDICT, threshold_pct=math.inf, mde_pct=math.inf,
                                                      direction="inconclusive", rounds_needed=None)])
def test_a_stored_row_reads_back_as_the_verdict_it_was_stored_from(verdict: abtest.ABVerdict) -> None:
    columns = stored_fields(verdict)
    assert tuple(columns) == STORED
    unbounded = [name for name in ("threshold_pct", "mde_pct") if getattr(verdict, name) == math.inf]
    assert [name for name, value in columns.items() if value is None] == unbounded  # no infinity in the table
    # what the row does not keep comes back as the verdict's defaults: its level is the comparison's
    assert stored_verdict(SimpleNamespace(**columns), verdict.rounds) == replace(
        verdict, confidence=abtest.CONFIDENCE, rounds_needed=None)


def test_the_report_row_carries_each_field_by_name_and_no_infinity() -> None:
    fresh = replace(VERDICT, threshold_pct=math.inf, rounds_needed=9)
    row = verdict_row(fresh, name="test_x", suite="benchmarks", base_median=1.0, head_median=1.125, rounds=6)
    for f in fields(abtest.ABVerdict):
        expected = getattr(fresh, f.name)
        assert row[f.name] == (None if expected == math.inf else expected), f.name  # type: ignore[literal-required]
