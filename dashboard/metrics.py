"""Which number a benchmark is read as, and how to print it: pure functions, no database.

A benchmark that declares the work it does (``flops`` / ``bytes``) is shown as throughput, where
higher is better and numbers compare across shapes; otherwise as its raw median (time, lower is
better unless the benchmark says otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

from roofwatch.ab import abtest
from roofwatch.common.vocabulary import PERFORMANCE_KINDS
from roofwatch.service.core.models import Benchmark
from roofwatch.service.core.units import metric_kind

Kind = Literal["flops", "bytes", "time", "raw"]

# The trend compares the latest value with the median of this many before it.
TREND_WINDOW = 10
# A trend is coloured only for a detected change, or when it stands this far beyond the series'
# own noise (and beyond TREND_FLOOR_PCT) with at least TREND_MIN_HISTORY values before it: timings
# of identical code differ 10-45 % between processes on a shared host, and a dashboard that paints
# such moves red and green is one nobody reads.
TREND_NOISE_MULTIPLE = 4.0
TREND_FLOOR_PCT = 5.0
TREND_MIN_HISTORY = 5

_LADDERS: dict[Kind, tuple[tuple[float, str], ...]] = {
    "flops": ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1e3, "kFLOP/s"), (1.0, "FLOP/s")),
    "bytes": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")),
    "time": ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")),
}


@dataclass(frozen=True)
class Metric:
    """How values of one kind are displayed: ``value * scale`` in ``unit``."""

    kind: Kind
    unit: str
    scale: float
    higher_is_better: bool

    @property
    def axis_title(self) -> str:
        name = {"flops": "throughput", "bytes": "bandwidth", "time": "time", "raw": "value"}[self.kind]
        better = "higher" if self.higher_is_better else "lower"
        return f"{name} ({self.unit}, {better} is better)"


def kind_of(benchmark: Benchmark) -> Kind:
    return metric_kind(benchmark.unit, benchmark.flops, benchmark.bytes)  # type: ignore[return-value]


def work_of(benchmark: Benchmark, kind: Kind, fallback: Benchmark | None = None) -> float | None:
    """FLOPs or bytes per call; a baseline that declares none borrows the kernel's (same operation)."""
    if kind not in ("flops", "bytes"):
        return None
    own = benchmark.flops if kind == "flops" else benchmark.bytes
    if own or fallback is None:
        return own
    return fallback.flops if kind == "flops" else fallback.bytes


def values(kind: Kind, work: float | None, points: Sequence[dict[str, Any]]) -> list[float | None]:
    """Each point's value in base units (FLOP/s, B/s, s) from its median time."""
    if kind in ("time", "raw"):
        return [p["median"] for p in points]
    return [work / p["median"] if work and p["median"] > 0 else None for p in points]


def higher_is_better(kind: Kind, benchmark: Benchmark) -> bool:
    return kind in ("flops", "bytes") or (kind == "raw" and benchmark.higher_is_better)


# A benchmark in bytes (a peak-memory benchmark, unit "B") reads in binary multiples, as allocators count.
_SIZES = ((2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B"))


def _scale(kind: Kind, largest: float, raw_unit: str = "") -> tuple[float, str]:
    ladder = _SIZES if kind == "raw" and raw_unit == "B" else _LADDERS.get(kind)
    if ladder is None:
        return 1.0, ""
    for size, unit in ladder:
        if largest >= size:
            return 1.0 / size, unit
    size, unit = ladder[-1]
    return 1.0 / size, unit


def metric(kind: Kind, benchmark: Benchmark, observed: Sequence[float | None]) -> Metric:
    """One unit for a whole chart, chosen so its largest value reads as a number ≥ 1."""
    scale, unit = _scale(kind, max((v for v in observed if v is not None), default=0.0), benchmark.unit)
    return Metric(kind, unit or benchmark.unit, scale, higher_is_better(kind, benchmark))


def human(kind: Kind, value: float | None, raw_unit: str = "") -> str:
    """One value in the unit that reads best for it: ``41.2 GB/s``, ``12.3 µs``."""
    if value is None:
        return ""
    scale, unit = _scale(kind, abs(value), raw_unit)
    return f"{value * scale:.3g} {unit or raw_unit}".strip()


def trend_pct(series: Sequence[float | None]) -> float | None:
    """Δ % of the latest value against the median of up to ``TREND_WINDOW`` values before it."""
    known = [v for v in series if v is not None]
    if len(known) < 2:
        return None
    reference = median(known[-TREND_WINDOW - 1:-1])
    if reference == 0:
        return None
    return 100.0 * (known[-1] - reference) / abs(reference)


def noise_pct(series: Sequence[float | None]) -> float | None:
    """The series' run-to-run noise before its latest value, in % of its level.

    A robust standard deviation (1.4826 × the median absolute deviation) of up to
    ``TREND_WINDOW`` values before the latest, over their median; None with fewer than three.
    """
    before = [v for v in series if v is not None][-TREND_WINDOW - 1:-1]
    if len(before) < 3:
        return None
    centre = median(before)
    if centre == 0:
        return None
    return 100.0 * 1.4826 * median(abs(v - centre) for v in before) / abs(centre)


@dataclass(frozen=True)
class TrendView:
    """How a trend is shown: its CSS class and the reason for its colour (or for its lack of one)."""

    css: str
    why: str


def trend_view(delta_pct: float | None, noise: float | None, history: int, higher_better: bool,
               detected: str | None = None) -> TrendView:
    """Red or green only for a confirmed change (``detected``: its kind); a move far beyond noise is bold.

    ``history`` is how many values precede the latest one. Everything else is grey: a move of
    noise size says nothing, and colouring it teaches readers to ignore the colour.
    """
    if delta_pct is None:
        return TrendView("muted", "")
    worse = delta_pct < 0 if higher_better else delta_pct > 0
    # A confirmed change colours the trend that shows it: same direction, more than noise. A change
    # at the far end of the window leaves the latest value level with the median, which is not news.
    if detected in PERFORMANCE_KINDS and worse == (detected == "perf-regression") \
            and abs(delta_pct) > max(1.0, noise or 0.0):
        css = "dir-regression" if worse else "dir-improvement"
        return TrendView(css, f"a confirmed {detected} lies in this window")
    threshold = max(TREND_FLOOR_PCT, TREND_NOISE_MULTIPLE * noise) if noise is not None else None
    if threshold is None or history < TREND_MIN_HISTORY:
        return TrendView("muted", "too few earlier values to tell this from noise")
    if abs(delta_pct) <= threshold:
        return TrendView("muted", f"within noise: the series varies ±{noise:.1f}% run to run")
    # Far beyond noise but not a confirmed change: shown in bold, never red or green. Colour says
    # "roofwatch confirmed this"; until an A/B has, the move is a reason to look, not a verdict.
    return TrendView("unconfirmed", f"beyond {TREND_NOISE_MULTIPLE:g} × the series' noise (±{noise:.1f}%); "
                     "not confirmed yet, so not coloured")


def judgeable(noise_pct: float | None, rounds: int) -> dict[str, Any] | None:
    """What an A/B of ``rounds`` can tell at a benchmark's run-to-run noise (``noise_pct``, %).

    ``mde_pct``: the smallest change it detects with 80 % power; ``ok``: whether it could show
    "no change" within the default min_effect at all — if not, the benchmark cannot be judged
    at that size on this device, and the overview and its page say so.
    """
    if noise_pct is None:
        return None
    mde = 100 * abtest.smallest_detectable(noise_pct / 100, rounds)
    return {"mde_pct": mde, "rounds": rounds, "ok": abtest.can_judge(noise_pct / 100, rounds),
            "min_effect_pct": 100 * abtest.DEFAULT_MIN_EFFECT}
