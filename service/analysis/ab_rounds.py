"""An A/B's rounds, paired: the one decision an A/B makes, wherever it is made.

The worker asks it whether a comparison needs more rounds; ingest decides what is stored and
reported from the same rounds (the worker's word is not taken for it); ``roofwatch verdict``
decides on result files a team already has. Each process contributes one value per benchmark
(``abtest.process_value``), base and head are paired by round, and ``abtest`` decides.
"""

from __future__ import annotations

from roofwatch.common.envelope import RoundRecord
from roofwatch.service.analysis import abtest


def head_first(rounds: list[RoundRecord]) -> dict[int, bool]:
    """Per round index, whether the head's process ran first (records are kept in the order run)."""
    first: dict[int, bool] = {}
    for record in rounds:
        first.setdefault(record.index, record.side == "head")
    return first


def paired_rounds(rounds: list[RoundRecord]) -> dict[str, tuple[list[float], list[float]]]:
    """Benchmarks measured on both sides in every round that measured them, paired by round.

    Each process contributes ``abtest.process_value`` of its samples (the fast mode's location
    for a GPU timer, the median otherwise).
    """
    by_round: dict[tuple[str, int], dict[str, float]] = {}
    for record in rounds:
        for suite in record.suites:
            for m in suite.measurements:
                value = abtest.process_value(m.samples, m.median, str(m.extra_info.get("timer", "")))
                by_round.setdefault((record.side, record.index), {})[f"{suite.name}::{m.name}"] = value
    indexes = sorted({r.index for r in rounds})
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for i in indexes:
        base, head = by_round.get(("base", i), {}), by_round.get(("head", i), {})
        for key in base.keys() & head.keys():
            b, h = pairs.setdefault(key, ([], []))
            b.append(base[key])
            h.append(head[key])
    return pairs


def paired_orders(rounds: list[RoundRecord]) -> dict[str, list[bool]]:
    """For each benchmark of ``paired_rounds``, whether the head ran first in each of its rounds."""
    first = head_first(rounds)
    present: dict[tuple[str, int], set[str]] = {}
    for record in rounds:
        for suite in record.suites:
            for m in suite.measurements:
                present.setdefault((record.side, record.index), set()).add(f"{suite.name}::{m.name}")
    orders: dict[str, list[bool]] = {}
    for i in sorted(first):
        for key in present.get(("base", i), set()) & present.get(("head", i), set()):
            orders.setdefault(key, []).append(first[i])
    return orders


def round_verdicts(rounds: list[RoundRecord], min_effect: float, min_effects: dict[str, float],
                   higher_is_better: dict[str, bool] | None = None) -> dict[str, abtest.ABVerdict]:
    """The verdict of every benchmark measured on both sides, by ``suite::name``.

    The one decision an A/B makes — on the worker (whether to add rounds), at ingest (what is
    stored and reported) and in ``roofwatch verdict`` (result files a team already has).
    """
    pairs = paired_rounds(rounds)
    orders = paired_orders(rounds)
    keys = sorted(pairs)
    hib = higher_is_better or {}
    found = abtest.verdicts([abtest.PairedRounds(pairs[k][0], pairs[k][1], hib.get(k, False),
                                                 min_effects.get(k, min_effect), head_first=orders.get(k))
                             for k in keys], min_effect=min_effect)
    return dict(zip(keys, found))
