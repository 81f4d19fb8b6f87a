"""Acceptance run: roofwatch and the peers on ``histories`` (fixed step sizes, five noise kinds).

    python -m bench.changepoints [--seeds 300,301,302 | 300-319] [--per-cell 20] [--detectors a,b,...]
                                 [--jobs J] [--markdown FILE] [--misses FILE] [--tolerance T] [--scanning M,...]
                                 [--fitted M,...] [--reading M,...]

Prints, for every detector side by side and beside the true-model oracles (``ceiling.py``, and the
scanning oracle of ``scanning.py``, told the noise but not the steps, scored as a detector; with
``--fitted``, the same oracle fitting a drift's curve rather than told it, ``fitted.py``; with
``--reading``, the same scanner under the noise it reads itself, ``reading.py``): recall
per noise kind × step size and per noise level, F1 and false alarms per kind, the overall scores,
F1 on the location changes beside the oracle's, how often a large step is named at its very commit,
what the service's confirming A/Bs make of the change points (``confirming.py``), and roofwatch's
goals (met or not), each recall goal a share of the oracle's recall on the same steps. roofwatch's parameters are chosen on
``TUNING_SEEDS``; the defaults are never tuned on.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields

from rich.console import Console

from bench.changepoints import ceiling, confirming, fitted, histories, reading, scanning
from bench.changepoints.histories import DRIFT_SHAPES, KINDS, NOISE_LEVELS, STEP_SIZES, Change, History
from bench.changepoints.report import Table, fmt, print_rich, to_markdown
from bench.changepoints.run import DETECTORS, Job, Outcome, Results, run_all, usable_detectors
from bench.changepoints.score import DEFAULT_TOLERANCE, Score, aggregate, f1, found

TUNING_SEEDS = range(0, 10)  # what roofwatch's parameters were chosen on: never reported
REPORT_SEEDS = (300, 301, 302)  # the pooled goals; 300-319 for the per-kind ones
PER_CELL = 10  # histories per kind × noise level: 150 per seed (docs/analysis.md uses 20)


@dataclass(frozen=True)
class Goal:
    """A goal on a measured number: ``at_least`` or at most ``bound``."""

    name: str
    bound: float
    at_least: bool = True

    @property
    def target(self) -> str:
        return f"{'≥' if self.at_least else '≤'} {self.bound:g}"

    def met(self, value: float) -> bool:
        return value >= self.bound if self.at_least else value <= self.bound


# Recall is a share of the true-model oracle's on the same steps (ceiling.py): a goal that the noise itself
# puts out of anyone's reach says nothing about a detector.
POOLED_SHARE = {"1 %": 0.85, "2 %": 0.90, "5 %": 0.98}
KIND_SHARE = {"2 %": 0.85, "5 %": 0.95}
GOALS = {
    **{f"share {size}": Goal(f"recall of {size} steps / true-model oracle", bound)
       for size, bound in POOLED_SHARE.items()},
    **{f"share {kind} {size}": Goal(f"{kind}: recall of {size} steps / true-model oracle", bound)
       for kind in KINDS for size, bound in KIND_SHARE.items()},
    "F1": Goal("F1", 0.89),
    "FA/clean": Goal("false alarms per clean series", 0.05, at_least=False),
    "FA/clean drift": Goal("false alarms per clean drifting series", 0.05, at_least=False),
}


def size_label(size: float) -> str:
    return "mix" if math.isnan(size) else f"{abs(size) * 100:g} %"


SIZE_LABELS = [size_label(s) for s in STEP_SIZES] + ["mix"]


def generate(seeds: Sequence[int], per_cell: int) -> dict[str, History]:
    return {
        f"acc/{seed}/{kind}/{noise}/{i}": h
        for seed in seeds
        for kind in KINDS
        for noise in NOISE_LEVELS
        for i, h in enumerate(histories.cell(kind, noise, per_cell, seed))
    }


@dataclass
class Tally:
    """Found / total true changes by a label."""

    hit: dict[str, int]
    total: dict[str, int]

    def recall(self, label: str) -> float:
        return self.hit.get(label, 0) / self.total[label] if self.total.get(label) else float("nan")

    def cell(self, label: str) -> str:
        if not self.total.get(label):
            return "—"
        return f"{self.recall(label):.2f} ({self.hit.get(label, 0)}/{self.total[label]})"


def by_size(outcomes: Iterable[tuple[Change, bool]]) -> Tally:
    """Found / total of each (true change, found?) pair, by the change's step size."""
    hit: dict[str, int] = {}
    total: dict[str, int] = {}
    for change, ok in outcomes:
        label = size_label(change.size)
        total[label] = total.get(label, 0) + 1
        hit[label] = hit.get(label, 0) + int(ok)
    return Tally(hit, total)


def tally(keys: Sequence[str], series: dict[str, History], results: Results, name: str, tolerance: int) -> Tally:
    return by_size((change, ok) for key in keys
                   for change, ok in zip(series[key].changes, found(results[(name, key)].detections,
                                                                    series[key].indexes, tolerance)))


@dataclass(frozen=True)
class Oracle:
    """The true-model oracle's verdicts on every location change, by the history's key."""

    verdicts: dict[str, list[ceiling.Verdict]]

    @classmethod
    def of(cls, series: dict[str, History], tolerance: int, processes: int = 1,
           calibration: int = ceiling.CALIBRATION_SERIES) -> Oracle:
        return cls(dict(zip(series, ceiling.verdicts(list(series.values()), tolerance, processes, calibration))))

    def placed(self, keys: Sequence[str]) -> Tally:
        """What it places within the tolerance, by step size (mix changes left out)."""
        return by_size((v.change, v.placed) for k in keys for v in self.verdicts[k])

    def detected(self, keys: Sequence[str]) -> Tally:
        """... and also detects at the false-alarm budget."""
        return by_size((v.change, v.detected) for k in keys for v in self.verdicts[k])

    def f1(self, keys: Sequence[str], series: dict[str, History]) -> OracleScore:
        """Its F1 on the location changes of ``keys``, detecting: a step it detects is found; one whose gain passes
        but whose split lies beyond the tolerance is a false alarm as well as a miss; and each clean history adds
        the ``ceiling.FALSE_ALARMS`` its threshold was set to pass there. Its only false alarms: it is told where
        each stretch with a step begins and ends, which a detector has to find. Also its recall of every change,
        as the F1 goal counts them: the mix changes, which it never places, as misses."""
        verdicts = [v for k in keys for v in self.verdicts[k]]
        found = sum(v.detected for v in verdicts)
        false: float = sum(v.passes and not v.placed for v in verdicts)
        false += ceiling.FALSE_ALARMS * sum(not series[k].changes for k in keys)
        every = len(verdicts) + sum(c.shift != "location" for k in keys for c in series[k].changes)
        return OracleScore(found / (found + false) if found + false else 1.0,
                           found / len(verdicts) if verdicts else 1.0, found / every if every else 1.0)


@dataclass(frozen=True)
class OracleScore:
    """Precision and recall of the true-model oracle, detecting: its false alarms on clean histories are expected
    ones, so its counts are not whole."""

    precision: float
    recall: float  # of the location changes
    recall_every_change: float  # mix changes counted as misses

    @property
    def f1(self) -> float:
        return f1(self.precision, self.recall)

    @property
    def f1_every_change(self) -> float:
        return f1(self.precision, self.recall_every_change)


def share(found: Tally, ceiling_: Tally, label: str) -> float:
    """Recall of ``label`` steps as a share of the oracle's on the same steps."""
    top = ceiling_.recall(label)
    return found.recall(label) / top if top > 0 else float("nan")


def score(keys: Sequence[str], series: dict[str, History], results: Results, name: str, tolerance: int) -> Score:
    return aggregate(((results[(name, k)].detections, series[k].indexes) for k in keys), tolerance)


def location_score(keys: Sequence[str], series: dict[str, History], results: Results, name: str, tolerance: int
                   ) -> Score:
    """``score`` on the location changes alone, as the oracle is scored: mix changes are left out of the truth,
    and a detection within ``tolerance`` of one is neither found nor false (it saw a real change)."""
    pairs = []
    for k in keys:
        changes = series[k].changes
        mixes = [c.index for c in changes if c.shift != "location"]
        detections = [d for d in results[(name, k)].detections if all(abs(d - m) > tolerance for m in mixes)]
        pairs.append((detections, [c.index for c in changes if c.shift == "location"]))
    return aggregate(pairs, tolerance)


def drift_alarms(keys: Sequence[str], series: dict[str, History], results: Results, name: str) -> tuple[int, int, int]:
    """(detections, clean drifting series with any, clean drifting series): drift is never a change."""
    clean = [k for k in keys if series[k].kind == "drift" and not series[k].changes]
    counts = [len(results[(name, k)].detections) for k in clean]
    return sum(counts), sum(c > 0 for c in counts), len(clean)


def drift_alarm_table(keys: Sequence[str], series: dict[str, History], results: Results,
                      detectors: Sequence[str]) -> Table:
    """Detections per clean drifting history by the drift's shape × noise level: where the drifting budget goes."""
    table = Table("False alarms per clean drifting history, by drift shape × noise level",
                  ["shape", "noise", *detectors])
    for shape in DRIFT_SHAPES:
        for noise in NOISE_LEVELS:
            cell = [k for k in keys if series[k].detail == shape and series[k].noise == noise]
            counts = [drift_alarms(cell, series, results, name) for name in detectors]
            table.add(shape, f"{noise * 100:g} %",
                      *(f"{fmt(alarms / clean if clean else math.nan, 3)} ({alarms}/{clean})"
                        for alarms, _hit, clean in counts), new_section=noise == NOISE_LEVELS[0])
    table.notes.append("(detections / clean drifting histories): the goal's budget is 0.05 per history over all of "
                       "them; a shape the detector reads as steps spends it where its curve looks most like one.")
    return table


NAMED_FROM = 0.10  # steps this large or larger are counted in the "named at the commit" table


def named_at_commit(keys: Sequence[str], series: dict[str, History], results: Results, name: str, tolerance: int,
                    smallest: float = NAMED_FROM) -> tuple[int, int]:
    """(found at their very commit, found within ``tolerance``) of the location steps of ``smallest`` or more: a
    main-branch change is confirmed by an A/B of exactly the two commits either side of where it was found, so a
    step found a commit off is found for the score and costs the service a search among its neighbours by A/B."""
    exact = near = 0
    for key in keys:
        detections = results[(name, key)].detections
        for change in series[key].changes:
            if change.shift != "location" or abs(change.size) < smallest:
                continue
            offsets = [abs(d - change.index) for d in detections if abs(d - change.index) <= tolerance]
            near += bool(offsets)
            exact += 0 in offsets
    return exact, near


def found_locations(keys: Sequence[str], series: dict[str, History], results: Results, name: str,
                    tolerance: int) -> int:
    """Location steps of ``keys`` that ``name`` found within ``tolerance``."""
    return sum(ok for key in keys for change, ok in zip(series[key].changes, found(
        results[(name, key)].detections, series[key].indexes, tolerance)) if change.shift == "location")


def confirmations(series: dict[str, History], detectors: Sequence[str], results: Results, tolerance: int) -> Table:
    """What the service's confirming A/Bs make of each detector's change points, per kind (``confirming``)."""
    table = Table("Steps confirmed at their own commit, were every A/B ideal (location steps)",
                  ["kind", "detector", f"found (±{tolerance})", "by the named pair", "with the search",
                   "A/Bs per change point"])
    for kind in [*KINDS, "all"]:
        keys = [k for k, h in series.items() if kind in ("all", h.kind)]
        for i, name in enumerate(detectors):
            done = confirming.total([series[k] for k in keys], [results[(name, k)].detections for k in keys])
            points = max(done.abs_by_pair, 1)
            table.add(kind, name, str(found_locations(keys, series, results, name, tolerance)), str(done.by_pair),
                      str(done.with_search), f"{done.abs_by_pair / points:.2f} → {done.abs_with_search / points:.2f}",
                      new_section=i == 0)
    table.notes.append("A main-branch candidate is confirmed by an A/B of the two commits either side of it; one whose "
                       "pair shows nothing is sought among the commits up to 3 either side by more A/Bs "
                       "(service/analysis/neighbours.py). Here each A/B finds a change exactly when its commits "
                       "straddle a true location step (confirming.py): what placement allows.")
    return table


def _cell_keys(series: dict[str, History], kind: str, noise: float) -> list[str]:
    """The histories of one kind ("all": every kind) at one noise level."""
    return [k for k, h in series.items() if h.noise == noise and kind in ("all", h.kind)]


def _recall_rows(table: Table, head: Sequence[str], keys: Sequence[str], series: dict[str, History],
                 results: Results, detectors: Sequence[str], oracle: Oracle, tolerance: int) -> None:
    tallies = [tally(keys, series, results, name, tolerance) for name in detectors]
    placed, detected = oracle.placed(keys), oracle.detected(keys)
    mine = tallies[detectors.index("roofwatch")] if "roofwatch" in detectors else None
    for i, label in enumerate(label for label in SIZE_LABELS if tallies[0].total.get(label)):
        ratio = fmt(share(mine, placed, label), 2) if mine is not None and label != "mix" else ""
        table.add(*head, label, *(t.cell(label) for t in tallies), placed.cell(label), detected.cell(label), ratio,
                  new_section=i == 0)


SCANNING_NOTE = ("scanning = told each history's noise model but not its steps: optimal partitioning under that "
                 "density, its penalty per change calibrated to 0.05 false alarms per clean history of the kind "
                 "(×m: m times that penalty), scored as any detector (scanning.py).")
READING_NOTE = ("reading = the same scanner told nothing: under the noise model it reads from each history (roofwatch's "
                "steps and drift, then the likeliest of a normal, a t, a half-t, episodes and two modes), its penalty "
                "calibrated per reading to 0.05 false alarms per clean history (reading.py).")
FITTED_NOTE = ("fitted = the scanning oracle, but on drifting histories told only the jitter's σ: the drift's curve "
               "(none, a line, a sinusoid or a warm-up) fitted jointly with the steps, its penalty calibrated per "
               "noise level to 0.05 false alarms per clean drifting history (fitted.py).")
ORACLE_NOTE = ("true model = told each step exists and where its true neighbours are, the maximum-likelihood split "
               "under the noise that made the history; detecting = the same, counted only when its likelihood gain "
               "passes what clean histories of its kind pass at 0.05 false alarms per series (ceiling.py). share = "
               "roofwatch's recall / the true model's.")


def scanner_notes(rows: Sequence[str]) -> list[str]:
    """The note of each scanner (scanning oracle, reading scanner) with a row among ``rows``."""
    return [note for prefix, note in (("scanning", SCANNING_NOTE), ("fitted", FITTED_NOTE), ("reading", READING_NOTE))
            if any(row.startswith(prefix) for row in rows)]


def tables(series: dict[str, History], detectors: Sequence[str], results: Results, tolerance: int,
           seeds: Sequence[int], oracle: Oracle | None = None, scanned: Sequence[str] = ()) -> list[Table]:
    """Every table of the run; ``scanned`` names the scanners' rows among ``detectors`` (the scanning oracle's, the
    reading scanner's), scored as they are and set beside roofwatch's goals."""
    oracle = oracle or Oracle.of(series, tolerance)
    every = list(series)
    by_kind = {kind: [k for k in every if series[k].kind == kind] for kind in KINDS}
    oracle_columns = ["true model", "detecting", "share"]
    recall = Table(f"Recall per noise kind × step size (found/true, ±{tolerance} commits)",
                   ["kind", "step", *detectors, *oracle_columns])
    for kind, keys in [*by_kind.items(), ("all", every)]:
        _recall_rows(recall, [kind], keys, series, results, detectors, oracle, tolerance)
    recall.notes.append("mix = a GPU-like bimodal series whose slow mode's share moved by 0.25-0.45, no mode moving.")
    recall.notes.append(ORACLE_NOTE)
    recall.notes += scanner_notes(scanned)

    by_noise = Table(f"Recall per noise kind × noise level × step size (found/true, ±{tolerance} commits)",
                     ["kind", "noise", "step", *detectors, *oracle_columns])
    for kind in [*KINDS, "all"]:
        for noise in NOISE_LEVELS:
            keys = _cell_keys(series, kind, noise)
            _recall_rows(by_noise, [kind, f"{noise * 100:g} %"], keys, series, results, detectors, oracle, tolerance)

    per_kind = Table("F1 / false alarms per clean series, per noise kind", ["kind", *detectors])
    for kind in KINDS:
        per_kind.add(kind, *(f"{fmt(s.f1)} / {fmt(s.false_alarms_per_clean, 2)}"
                             for s in (score(by_kind[kind], series, results, n, tolerance) for n in detectors)))
    for noise in NOISE_LEVELS:
        keys = [k for k in every if series[k].noise == noise]
        per_kind.add(f"noise {noise * 100:g} %", *(
            f"{fmt(s.f1)} / {fmt(s.false_alarms_per_clean, 2)}"
            for s in (score(keys, series, results, n, tolerance) for n in detectors)), new_section=noise == NOISE_LEVELS[0])

    overall = Table(f"Overall, seeds {seed_label(seeds)} (±{tolerance} commits)",
                    ["detector", "F1", "precision", "recall", "FA/clean", "FA/clean drift (series)", "seconds"])
    for name in detectors:
        s = score(every, series, results, name, tolerance)
        alarms, hit_series, clean = drift_alarms(every, series, results, name)
        overall.add(name, fmt(s.f1), fmt(s.precision), fmt(s.recall), fmt(s.false_alarms_per_clean, 3),
                    f"{fmt(alarms / clean if clean else math.nan, 3)} ({hit_series}/{clean})",
                    f"{sum(results[(name, k)].seconds for k in every):.1f}")
    clean = sum(not h.changes for h in series.values())
    overall.notes.append(f"{len(series)} histories of {len(next(iter(series.values())).values)} commits, "
                         f"{clean} clean; FA/clean drift = detections per clean drifting history (histories with "
                         "any / all).")
    drifting = drift_alarm_table(every, series, results, detectors)
    ceiling_f1 = Table("F1 against the true-model ceiling", ["", "F1, every change", "F1, location changes",
                                                              "precision", "recall"])
    for name in detectors:
        s, located = score(every, series, results, name, tolerance), location_score(every, series, results, name,
                                                                                   tolerance)
        ceiling_f1.add(name, fmt(s.f1), fmt(located.f1), fmt(located.precision), fmt(located.recall))
    top = oracle.f1(every, series)
    ceiling_f1.add("true model, detecting", fmt(top.f1_every_change), fmt(top.f1), fmt(top.precision), fmt(top.recall),
                   new_section=True)
    ceiling_f1.notes.append(
        "Location changes: mix changes left out of the truth, and a detection within the tolerance of one neither "
        "found nor false, as the oracle leaves them out. The oracle is told where each step's stretch begins and "
        f"ends; its false alarms are its misplaced steps that pass its threshold, and {ceiling.FALSE_ALARMS:g} per "
        "clean history; on every change, the mix changes it never places count as its misses, as the F1 goal "
        "counts them.")
    named = Table(f"Steps of {NAMED_FROM * 100:g} % or more named at their very commit (of those found within ±{tolerance})",
                  ["kind", "noise", *detectors])
    for kind in [*KINDS, "all"]:
        for noise in NOISE_LEVELS:
            keys = _cell_keys(series, kind, noise)
            cells = [named_at_commit(keys, series, results, name, tolerance) for name in detectors]
            named.add(kind, f"{noise * 100:g} %", *(f"{fmt(e / n if n else math.nan, 3)} ({e}/{n})" for e, n in cells),
                      new_section=noise == NOISE_LEVELS[0])
    named.notes.append("A main-branch change is confirmed by an A/B of exactly the two commits either side of where "
                       "it was found: one found a commit off counts as found here, and there costs a search among "
                       "its neighbours (three to five A/Bs more) before it is confirmed at its commit.")
    tables_ = [recall, by_noise, per_kind, overall, drifting, ceiling_f1, named, confirmations(series, detectors, results, tolerance)]
    if "roofwatch" in detectors:
        tables_.append(goals(series, results, tolerance, oracle, scanned))
    return tables_


def measured(series: dict[str, History], results: Results, tolerance: int, oracle: Oracle, name: str = "roofwatch"
             ) -> dict[str, float]:
    """``name``'s number for every goal."""
    every = list(series)
    s = score(every, series, results, name, tolerance)
    alarms, _hit, clean = drift_alarms(every, series, results, name)
    out = {"F1": s.f1, "FA/clean": s.false_alarms_per_clean, "FA/clean drift": alarms / clean if clean else math.nan}
    pooled = tally(every, series, results, name, tolerance)
    placed = oracle.placed(every)
    out |= {f"share {size}": share(pooled, placed, size) for size in POOLED_SHARE}
    for kind in KINDS:
        keys = [k for k in every if series[k].kind == kind]
        mine, top = tally(keys, series, results, name, tolerance), oracle.placed(keys)
        out |= {f"share {kind} {size}": share(mine, top, size) for size in KIND_SHARE}
    return out


def goals(series: dict[str, History], results: Results, tolerance: int, oracle: Oracle | None = None,
          beside: Sequence[str] = ()) -> Table:
    """roofwatch against its goals, and the same numbers of the ``beside`` rows (the scanners')."""
    oracle = oracle or Oracle.of(series, tolerance)
    values = measured(series, results, tolerance, oracle)
    others = [measured(series, results, tolerance, oracle, name) for name in beside]
    table = Table("roofwatch against its goals", ["goal", "target", "measured", "met", *beside])
    for key, goal in GOALS.items():
        value = values[key]
        table.add(goal.name, goal.target, fmt(value), "yes" if goal.met(value) else "NO",
                  *(f"{fmt(other[key])} {'yes' if goal.met(other[key]) else 'NO'}" for other in others),
                  new_section=key in (f"share {KINDS[0]} 2 %", "F1"))
    table.notes.append("Shares are of the true-model oracle's recall on the same steps (ceiling.py); the pooled shares "
                       "are judged on three fresh seeds, the per-kind ones on twenty or more.")
    table.notes += scanner_notes(beside)
    return table


@dataclass(frozen=True)
class Miss:
    """A location change the detector did not find: what the true-model oracle made of it, and the detection
    nearest to it (signed commits from the change; None when the history has none)."""

    history: str
    detail: str
    index: int
    size_pct: float
    true_model_placed: bool
    true_model_detected: bool
    nearest_detection: int | None


def misses(series: dict[str, History], results: Results, tolerance: int, oracle: Oracle, name: str = "roofwatch"
           ) -> list[Miss]:
    """Every location change that ``name`` did not find within ``tolerance``, those the true model places first:
    where to look when a share falls short."""
    out = []
    for key, history in series.items():
        detections = results[(name, key)].detections
        verdicts = {v.change.index: v for v in oracle.verdicts[key]}  # location changes only
        for change, ok in zip(history.changes, found(detections, history.indexes, tolerance)):
            if ok or change.shift != "location":
                continue
            verdict = verdicts[change.index]
            nearest = min(detections, key=lambda d: abs(d - change.index), default=None)
            out.append(Miss(key, history.detail, change.index, round(change.size * 100, 6), verdict.placed,
                            verdict.detected, None if nearest is None else nearest - change.index))
    return sorted(out, key=lambda m: (not m.true_model_placed, m.history, m.index))


def write_misses(path: str, rows: Sequence[Miss]) -> None:
    with open(path, "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(Miss)])
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def seed_label(seeds: Sequence[int]) -> str:
    seeds = list(seeds)
    if len(seeds) > 3 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def parse_seeds(text: str) -> list[int]:
    """``"300,301"`` or ``"300-319"``, or both comma-separated."""
    out: list[int] = []
    for part in (p for p in text.split(",") if p):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def _multipliers(text: str) -> list[float]:
    if text.strip().lower() == "none":
        return []
    try:
        out = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,1.5 or 'none', got {text!r}") from None
    if any(m <= 0 for m in out):
        raise argparse.ArgumentTypeError("a penalty multiplier must be above 0")
    return out


def scanning_name(multiplier: float) -> str:
    """The scanning oracle's row at ``multiplier`` × its calibrated penalty."""
    return "scanning" if multiplier == 1.0 else f"scanning ×{multiplier:g}"


def _timed_rows(series: dict[str, History], multipliers: Sequence[float], name: Callable[[float], str],
                detect: Callable[[], list[list[list[int]]]]) -> tuple[Results, list[str]]:
    """A scanner's detections (``detect``: per history, per multiplier) as results, one row per multiplier, and the
    rows' names; each outcome carries the seconds per history of all the rows together."""
    started = time.perf_counter()
    found_ = detect()
    seconds = (time.perf_counter() - started) / len(series)
    names = [name(m) for m in multipliers]
    return {(row, key): Outcome(at[i], seconds) for key, at in zip(series, found_)
            for i, row in enumerate(names)}, names


def scan(series: dict[str, History], multipliers: Sequence[float], processes: int, calibration: int
         ) -> tuple[Results, list[str]]:
    """The scanning oracle's detections on every history at each multiplier, as results, and its rows' names."""
    if not multipliers:
        return {}, []
    table = scanning.penalties(processes, calibration)
    return _timed_rows(series, multipliers, scanning_name,
                       lambda: scanning.detections(list(series.values()), table, multipliers, processes))


def fitted_name(multiplier: float) -> str:
    """The fitted scanner's row at ``multiplier`` × its calibrated penalty."""
    return "fitted" if multiplier == 1.0 else f"fitted ×{multiplier:g}"


def fitted_scan(series: dict[str, History], multipliers: Sequence[float], processes: int, calibration: int
                ) -> tuple[Results, list[str]]:
    """The scanning oracle with the drift's curve fitted rather than told, on every history at each multiplier, as
    results, and its rows' names."""
    if not multipliers:
        return {}, []
    told, curve_fitted = scanning.penalties(processes, calibration), fitted.penalties(processes, calibration)
    return _timed_rows(series, multipliers, fitted_name,
                       lambda: fitted.detections(list(series.values()), told, curve_fitted, multipliers, processes))


def reading_name(multiplier: float) -> str:
    """The reading scanner's row at ``multiplier`` × its calibrated penalty."""
    return "reading" if multiplier == 1.0 else f"reading ×{multiplier:g}"


def read_scan(series: dict[str, History], multipliers: Sequence[float], processes: int, calibration: int
              ) -> tuple[Results, list[str]]:
    """The reading scanner's detections on every history at each multiplier, as results, and its rows' names."""
    if not multipliers:
        return {}, []
    table, counts = reading.penalties(processes, calibration)
    return _timed_rows(series, multipliers, reading_name,
                       lambda: reading.detections(list(series.values()), table, counts, multipliers, processes))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.changepoints", description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default=",".join(map(str, REPORT_SEEDS)),
                        help=f"comma-separated, or a range FIRST-LAST; {TUNING_SEEDS.start}-{TUNING_SEEDS.stop - 1} "
                             "are the tuning seeds")
    parser.add_argument("--per-cell", type=int, default=PER_CELL, help="histories per kind × noise level and seed")
    parser.add_argument("--detectors", default=",".join(DETECTORS), help=f"from: {', '.join(DETECTORS)}")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tolerance", type=int, default=DEFAULT_TOLERANCE)
    parser.add_argument("--markdown", help="also write the tables as Markdown to this file")
    parser.add_argument("--scanning", type=_multipliers, default=[1.0], metavar="M[,M...]",
                        help="the scanning oracle's penalty multipliers (scanning.py), one row each; 1 is the "
                             "false-alarm budget; 'none' leaves it out (default: 1)")
    parser.add_argument("--fitted", type=_multipliers, default=[], metavar="M[,M...]",
                        help="the fitted scanner's penalty multipliers (fitted.py: the scanning oracle with a drift's "
                             "curve fitted, not told), one row each (default: none)")
    parser.add_argument("--reading", type=_multipliers, default=[], metavar="M[,M...]",
                        help="the reading scanner's penalty multipliers (reading.py: the scanner under the noise it "
                             "reads itself), one row each (default: none)")
    parser.add_argument("--misses", help="also write roofwatch's missed steps as CSV to this file, those the "
                                         "true-model oracle places first")
    args = parser.parse_args(argv)
    unknown = [d for d in args.detectors.split(",") if d not in DETECTORS]
    if unknown:
        parser.error(f"unknown detector(s) {', '.join(unknown)}; known: {', '.join(DETECTORS)}")
    if args.misses and "roofwatch" not in args.detectors.split(","):
        parser.error("--misses lists roofwatch's missed steps: add roofwatch to --detectors")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    detectors = usable_detectors([d for d in args.detectors.split(",") if d], console)
    if not detectors:
        console.print("[red]no detector can run[/]")
        return 2
    seeds = parse_seeds(args.seeds)
    tuned = [s for s in seeds if s in TUNING_SEEDS]
    if tuned:
        console.print(f"[yellow]note:[/] seed(s) {', '.join(map(str, tuned))} were tuned on: not a fair score")
    started = time.perf_counter()
    series = generate(seeds, args.per_cell)
    results = run_all(detectors, [Job(k, h.values) for k, h in series.items()], args.jobs, console)
    with console.status("the true-model oracle"):
        oracle = Oracle.of(series, args.tolerance, args.jobs)
    with console.status("the scanning oracle: its penalties, then every history"):
        scanned_results, scanned = scan(series, args.scanning, args.jobs, ceiling.CALIBRATION_SERIES)
    results |= scanned_results
    with console.status("the fitted scanner: its penalties, then every history"):
        fitted_results, fitted_rows = fitted_scan(series, args.fitted, args.jobs, ceiling.CALIBRATION_SERIES)
    results |= fitted_results
    with console.status("the reading scanner: its penalties, then every history"):
        read_results, read_rows = read_scan(series, args.reading, args.jobs, ceiling.CALIBRATION_SERIES)
    results |= read_results
    beside = [*scanned, *fitted_rows, *read_rows]
    out = tables(series, [*detectors, *beside], results, args.tolerance, seeds, oracle, beside)
    for table in out:
        print_rich(console, table)
    errors = [(n, k, o.error) for (n, k), o in results.items() if o.error]
    for name, key, error in errors[:20]:
        console.print(f"[red]error:[/] {name} on {key}: {error} (scored as no detections)")
    elapsed = time.perf_counter() - started
    console.print(f"{len(series)} histories × {len(detectors)} detectors in {elapsed:.0f} s, {args.jobs} processes")
    if args.markdown:
        header = (f"Acceptance histories: seeds {args.seeds}, {args.per_cell} per kind × noise level, "
                  f"detectors {', '.join(detectors)}.\n\n")
        with open(args.markdown, "w") as out_file:
            out_file.write(header + "\n".join(to_markdown(t) for t in out))
    if args.misses and "roofwatch" in detectors:  # usable_detectors has said why when it is not
        rows = misses(series, results, args.tolerance, oracle)
        write_misses(args.misses, rows)
        placed = sum(row.true_model_placed for row in rows)
        console.print(f"{len(rows)} missed steps written to {args.misses} ({placed} the true model places)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
