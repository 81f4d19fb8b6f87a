"""Which tests broke, and which were fixed, between a base and a head run."""

from __future__ import annotations

from collections.abc import Mapping

FAILING = frozenset({"failed", "error"})


def new_failures(base: Mapping[str, str] | None, head: Mapping[str, str]) -> list[str]:
    """Tests failing on head that passed (or did not exist) on base.

    With no base at all every head failure counts: a wrong kernel is never let through
    for lack of history.
    """
    return sorted(
        test for test, outcome in head.items()
        if outcome in FAILING and (base is None or base.get(test) not in FAILING)
    )


def fixed(base: Mapping[str, str], head: Mapping[str, str]) -> list[str]:
    """Tests that failed on base and pass on head."""
    return sorted(t for t, o in head.items() if o == "passed" and base.get(t) in FAILING)
