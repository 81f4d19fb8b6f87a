"""The search among a change point's neighbours, on A/B outcomes the test sets."""

from __future__ import annotations

import pytest

from roofwatch.service.analysis.neighbours import SPAN, Search

COMMITS = tuple(f"c{i}" for i in range(12))


def _run(search: Search | None, step_at: int | None) -> tuple[str, list[tuple[str, str]]]:
    """Answer each A/B as the code would (the step shows where a pair straddles ``step_at``): the verdict, and
    where it was given (the last pair), with every pair measured."""
    measured: list[tuple[str, str]] = []
    while isinstance(search, Search):
        good, bad = search.to_measure()
        measured.append((good, bad))
        outcome = search.after(step_at is not None and COMMITS.index(good) < step_at <= COMMITS.index(bad))
        if not isinstance(outcome, Search):
            return outcome, measured
        search = outcome
        assert len(measured) <= 8
    return "no search", measured


@pytest.mark.parametrize(("step_at", "verdict"), [
    (1, "rejected"), (2, "rejected"),  # beyond the span: the A/B across it shows nothing
    (3, "confirmed"), (4, "confirmed"), (5, "confirmed"), (6, "confirmed"), (7, "confirmed"), (8, "confirmed"),
    (9, "confirmed"),
    (10, "rejected"), (11, "rejected"), (None, "rejected"),
])
def test_a_step_in_the_span_is_confirmed_at_its_commit_and_none_elsewhere(step_at: int | None, verdict: str) -> None:
    outcome, measured = _run(Search.around(COMMITS, "c5", "c6"), step_at)
    assert outcome == verdict
    assert measured[0] == ("c2", "c9")  # SPAN commits either side of the named pair, measured first
    if verdict == "confirmed":
        assert step_at is not None and measured[-1] == (COMMITS[step_at - 1], COMMITS[step_at])
        assert len(measured) <= 5  # the span, then halves of it: never one A/B per commit
    else:
        assert measured == [("c2", "c9")]


@pytest.mark.parametrize(("good", "bad", "span"), [
    ("c0", "c1", ("c0", "c4")),  # the first commits: nothing older to look at
    ("c1", "c2", ("c0", "c5")),
    ("c10", "c11", ("c7", "c11")),  # the newest: nothing newer measured yet
])
def test_the_span_stops_where_the_series_does(good: str, bad: str, span: tuple[str, str]) -> None:
    search = Search.around(COMMITS, good, bad)
    assert search is not None and search.to_measure() == span
    assert len(search.commits) <= 2 * SPAN + 2


def test_a_pair_without_neighbours_has_no_search_and_a_pair_must_be_adjacent() -> None:
    assert Search.around(("a", "b"), "a", "b") is None
    with pytest.raises(ValueError, match="adjacent"):
        Search.around(COMMITS, "c3", "c5")
    with pytest.raises(ValueError, match="adjacent"):
        Search.around(COMMITS, "c3", "x")


def test_a_search_is_stored_and_read_back_as_it_was() -> None:
    search = Search.around(COMMITS, "c5", "c6")
    assert search is not None
    moved = search.after(True)
    assert isinstance(moved, Search) and moved.found
    assert Search.from_details(moved.as_details()) == moved
