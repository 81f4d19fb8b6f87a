"""An A/B's rounds, paired: the one decision an A/B makes, wherever it is made.

The worker asks it whether a comparison needs more rounds; ingest decides what is stored and
reported from the same rounds (the worker's word is not taken for it); ``roofwatch verdict``
decides on result files a team already has. Each process contributes one value per benchmark
(``abtest.process_value``), base and head are paired by round, and ``abtest`` decides.

Every benchmark of the base is accounted for (``account``): paired with the head's benchmark of
the same name, or with the one a declared rename names; or *missing on the head* with the reason
— not reported at all (deselected, renamed, deleted, failing to collect), or timed with other
options than the base's (another ``--benchmark-timer``, other rounds or warm-up), which makes
the two numbers incomparable. A benchmark is keyed ``suite::name`` on the base's side.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from roofwatch.ab import abtest
from roofwatch.ab.interactions import Process
from roofwatch.common.envelope import MeasurementRecord, RoundRecord, SuiteResult
from roofwatch.common.metrics import measuring_suite

NOT_REPORTED = "not reported by the head (deselected, renamed, deleted, or it no longer collects)"


@dataclass(frozen=True)
class Accounting:
    """Where every benchmark of the base went on the head.

    ``paired``: base key → head key for each benchmark measured on both sides (the same key but
    for a rename); ``missing``: base key → why it has no verdict; ``new``: head keys the base does
    not report; ``renamed``: the base keys of ``paired`` whose head key differs.
    """

    paired: dict[str, str]
    missing: dict[str, str]
    new: list[str]

    @property
    def renamed(self) -> dict[str, str]:
        return {base: head for base, head in self.paired.items() if base != head}


def _keys(rounds: list[RoundRecord], side: str) -> dict[str, dict[str, object]]:
    """Each benchmark a side reported, with the timing options of its first measurement."""
    found: dict[str, dict[str, object]] = {}
    for record in rounds:
        if record.side != side:
            continue
        for suite in record.suites:
            for m in suite.measurements:
                found.setdefault(f"{suite.name}::{m.name}", dict(m.timing))
    return found


def _renamed_to(key: str, renames: Mapping[str, str]) -> str | None:
    """The head key a declared rename gives ``key`` (``suite::name``): qualified names first."""
    suite, name = key.split("::", 1)
    new = renames.get(key, renames.get(name))
    if new is None:
        return None
    return new if "::" in new else f"{suite}::{new}"


def timing_difference(base: Mapping[str, object], head: Mapping[str, object]) -> str:
    """How two measurements' timing options differ ("timer perf_counter → faketimer.clock"), or ""."""
    changed = [f"{k} {base.get(k, 'unset')} → {head.get(k, 'unset')}"
               for k in sorted(base.keys() | head.keys()) if base.get(k) != head.get(k)]
    return ", ".join(changed)


def account(rounds: list[RoundRecord], renames: Mapping[str, str] | None = None,
            unfinished: Mapping[str, str] | None = None) -> Accounting:
    """Pair the base's benchmarks with the head's, and say why each unpaired one is missing.

    ``renames`` maps old names to new (``[tool.roofwatch] renamed``); ``unfinished`` maps a suite
    name to why the head's run of it did not finish, the better reason for its missing benchmarks.
    """
    base, head = _keys(rounds, "base"), _keys(rounds, "head")
    paired: dict[str, str] = {}
    missing: dict[str, str] = {}
    for key in sorted(base):
        target = key if key in head else _renamed_to(key, renames or {})
        if target is None or target not in head or (target != key and target in base):
            suite = key.split("::", 1)[0]
            why = (unfinished or {}).get(suite)
            missing[key] = f"the head's run of suite {suite} did not finish: {why}" if why else NOT_REPORTED
            continue
        differs = timing_difference(base[key], head[target])
        if differs:
            missing[key] = f"timed with other options on the head ({differs}): the numbers are not comparable"
            continue
        paired[key] = target
    new = sorted(set(head) - set(paired.values()) - set(base))
    return Accounting(paired, missing, new)


def head_first(rounds: list[RoundRecord]) -> dict[int, bool]:
    """Per round index, whether the head's process ran first (records are kept in the order run)."""
    first: dict[int, bool] = {}
    for record in rounds:
        first.setdefault(record.index, record.side == "head")
    return first


def paired_rounds(rounds: list[RoundRecord],
                  renames: Mapping[str, str] | None = None) -> dict[str, tuple[list[float], list[float]]]:
    """Benchmarks measured on both sides in every round that measured them, paired by round.

    Keyed by the base's ``suite::name``; the head's value comes from the benchmark ``account``
    pairs with it. Each process contributes ``abtest.process_value`` of its samples (the fast
    mode's location for a GPU timer, the median otherwise).
    """
    by_round: dict[tuple[str, int], dict[str, float]] = {}
    for record, _suite, _m, key, value in _paired_measurements(rounds, renames):
        by_round.setdefault((record.side, record.index), {})[key] = value
    pairs: dict[str, tuple[list[float], list[float]]] = {}
    for i in sorted({r.index for r in rounds}):
        base, head = by_round.get(("base", i), {}), by_round.get(("head", i), {})
        for key in sorted(base.keys() & head.keys()):
            b, h = pairs.setdefault(key, ([], []))
            b.append(base[key])
            h.append(head[key])
    return pairs


def processes_of(rounds: list[RoundRecord], renames: Mapping[str, str] | None = None
                 ) -> dict[str, list[tuple[Process, dict[str, Any]]]]:
    """Each paired benchmark's processes (keyed as ``paired_rounds``): its value in each, what ran
    before it there (the suite's recorded order) and the process's record of what it ran."""
    out: dict[str, list[tuple[Process, dict[str, Any]]]] = {}
    # One map per process, shared by its benchmarks: a suite of N benchmarks costs N entries, not N².
    # A suite's measurements come one after another, so its map is made when the first one comes.
    current: SuiteResult | None = None
    order: dict[str, int] = {}
    for record, suite, m, key, value in _paired_measurements(rounds, renames):
        if suite is not current:
            current, order = suite, {node.rsplit("::", 1)[-1]: i for i, node in enumerate(suite.order)}
        out.setdefault(key, []).append((Process(record.side, record.index, value, order, order.get(m.name)), m.ran))
    return out


def _paired_measurements(rounds: list[RoundRecord], renames: Mapping[str, str] | None
                         ) -> Iterator[tuple[RoundRecord, SuiteResult, MeasurementRecord, str, float]]:
    """Every measurement of a paired benchmark, keyed by its base name, with its per-process value."""
    pairing = account(rounds, renames).paired
    as_base = {head: base for base, head in pairing.items()}
    for record in rounds:
        for suite in record.suites:
            for m in suite.measurements:
                key = f"{suite.name}::{m.name}"
                key = key if record.side == "base" else as_base.get(key, "")
                if key in pairing:
                    yield record, suite, m, key, abtest.process_value(m.samples, m.median,
                                                                      str(m.extra_info.get("timer", "")))


def paired_orders(rounds: list[RoundRecord], renames: Mapping[str, str] | None = None) -> dict[str, list[bool]]:
    """For each benchmark of ``paired_rounds``, whether the head ran first in each of its rounds."""
    pairing = account(rounds, renames).paired
    as_base = {head: base for base, head in pairing.items()}
    first = head_first(rounds)
    present: dict[tuple[str, int], set[str]] = {}
    for record in rounds:
        for suite in record.suites:
            for m in suite.measurements:
                key = f"{suite.name}::{m.name}"
                present.setdefault((record.side, record.index), set()).add(
                    key if record.side == "base" else as_base.get(key, ""))
    orders: dict[str, list[bool]] = {}
    for i in sorted(first):
        for key in present.get(("base", i), set()) & present.get(("head", i), set()):
            if key in pairing:
                orders.setdefault(key, []).append(first[i])
    return orders


def round_verdicts(rounds: list[RoundRecord], min_effect: float, min_effects: dict[str, float],
                   higher_is_better: dict[str, bool] | None = None,
                   renames: Mapping[str, str] | None = None) -> dict[str, abtest.ABVerdict]:
    """The verdict of every benchmark of the base that the head measured comparably, by ``suite::name``.

    The one decision an A/B makes — on the worker (whether to add rounds), at ingest (what is
    stored and reported) and in ``roofwatch verdict`` (result files a team already has).
    """
    pairs = paired_rounds(rounds, renames)
    orders = paired_orders(rounds, renames)
    keys = sorted(pairs)
    hib = higher_is_better or {}
    found = abtest.verdicts([abtest.PairedRounds(pairs[k][0], pairs[k][1], hib.get(k, False),
                                                 min_effects.get(k, min_effect), head_first=orders.get(k))
                             for k in keys], min_effect=min_effect)
    return dict(zip(keys, found))


def still_open(verdicts: Mapping[str, abtest.ABVerdict], rounds_done: int, min_rounds: int, cap: int,
               wanted: Collection[str] | None = None, *, to_cap: bool = False) -> set[str]:
    """The benchmarks another round should measure: those whose verdict more rounds can still settle.

    Before ``min_rounds`` every paired benchmark is open (no verdict is given earlier); after,
    only an inconclusive one whose rounds needed fit within ``cap`` — or, when the cap was asked
    for (``to_cap``: ``compare --max-rounds``, ``[tool.roofwatch] ab_max_rounds``), every
    inconclusive one: rounds needed is projected from the noise of the rounds so far,
    and three noisy rounds project far more than their benchmark turns out to need, so the rounds
    someone asked for are run rather than refused on that projection. ``wanted`` (a confirmation's
    candidates) limits them further.
    """
    keys = set(verdicts) if wanted is None else set(verdicts) & set(wanted)
    if rounds_done < min_rounds:
        return keys
    if to_cap:
        # Open at the cap too: the rounds end there by their count, and the stop is "round cap" with
        # these left open, not "cannot settle" (which would say more rounds were refused).
        return {k for k in keys if verdicts[k].direction == "inconclusive"}
    return {k for k in keys if verdicts[k].direction == "inconclusive"
            and (needed := verdicts[k].rounds_needed) is not None and needed <= cap}


def round_selection(keys: Collection[str], pairing: Mapping[str, str]) -> dict[str, dict[str, set[str]]]:
    """What each side's processes run for the benchmarks ``keys`` (the base's ``suite::name``): per side,
    suite name → benchmark names; the head's names are the ones ``pairing`` (``account().paired``) gives."""
    chosen: dict[str, dict[str, set[str]]] = {"base": {}, "head": {}}
    for key in keys:
        for side, named in (("base", key), ("head", pairing.get(key, key))):
            suite, name = named.split("::", 1)
            # A peak-memory benchmark is measured by the benchmark it derives from, in its suite's process.
            chosen[side].setdefault(measuring_suite(suite), set()).add(name)
    return chosen


def stop_reason(verdicts: Mapping[str, abtest.ABVerdict], open_keys: Collection[str],
                wanted: Collection[str] | None = None) -> str | None:
    """Why no more rounds are needed — "decided", or "cannot settle" when some stay inconclusive that more
    rounds within the cap cannot settle — or None while some are open."""
    if open_keys:
        return None
    keys = set(verdicts) if wanted is None else set(verdicts) & set(wanted)
    return "decided" if all(verdicts[k].direction != "inconclusive" for k in keys) else "cannot settle"
