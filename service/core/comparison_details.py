"""Typed access to a comparison's ``details`` column: the keys and types are ``reports.ComparisonDetails``.

The column is plain JSON (old rows keep whatever keys they were written with); reading through
``details_of`` and writing through ``add_details`` lets the type checker catch a misspelt key or a
value of the wrong type at every use, where a bare ``dict[str, Any]`` caught neither.
"""

from __future__ import annotations

from typing import Unpack, cast

from roofwatch.service.core.models import Comparison
from roofwatch.service.core.reports import ComparisonDetails


def details_of(comparison: Comparison) -> ComparisonDetails:
    return cast(ComparisonDetails, comparison.details)


def add_details(comparison: Comparison, **values: Unpack[ComparisonDetails]) -> None:
    """Set ``values`` over what the comparison keeps already (a new dict: the JSON column sees the change)."""
    comparison.details = {**comparison.details, **values}
