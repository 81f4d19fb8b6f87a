"""Real labelled series from the shared corpus (``$ROOFWATCH_SHARED/corpus``), read in place.

Nothing here is copied into the project: the files are third-party data with their own licences
(see ``corpus/PROVENANCE.md``) and are opened where they lie.

- **Talos** (mozilla/treeherder test data, MPL-2.0): 7 real Firefox performance series from
  graphs.mozilla.org. Truth is the pushes that treeherder's own test asserts its detector
  (``perfalert.detect_changes``: weighted t-test, 12-24 point back window, 12 point fore window,
  t > 7) flags, i.e. Perfherder's alerts, not a human's. A payload row is
  ``[testrun_id, [build_id, build_date, revision], push_timestamp, value, ...]``; the test sorts
  rows by push timestamp and a flagged row is the first one of the fore window, so the index of
  the expected timestamp in timestamp order is the first value after the change.
- **Tigerbeetle** (apache/otava tests, Apache-2.0): one 365-point benchmark series; truth is what
  otava's test asserts for its old defaults (window 30, p 0.01, min magnitude 5 %): ``[15, 71]``.
  Only an algorithm's output again, so it is shown next to each detection list, not scored as F1.
- **TCPD** (alan-turing-institute/TCPD): 28 univariate-or-not series with 5 human annotators
  each, scored with TCPDBench's F1 (margin 5, every annotator counted, index 0 always a change).
  The one multivariate series (``run_log``) is *skipped*: annotators saw both dimensions, so
  scoring a univariate detector on one of them would mislabel it. Missing values (two in
  ``uk_coal_employ``) are forward-filled so indexes still refer to the file's rows.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

TALOS_DIR = "cpd-timeseries/mozilla-treeherder-perfherder"
TALOS_GRAPHS = f"{TALOS_DIR}/tests/sample_data/artifacts/performance/graphs"
TIGERBEETLE = "cpd-timeseries/otava/tigerbeetle.json"
TIGERBEETLE_CASE = "test_tb_old_defaults"
TCPD_DIR = "tcpd"
TCPD_METRICS = f"{TCPD_DIR}/tcpdbench/metrics.py"
TCPD_MARGIN = 5  # TCPDBench's default, used for every published table


def shared_dir() -> Path:
    """``$ROOFWATCH_SHARED``, else the ``shared`` folder beside the repository (/work/shared here)."""
    env = os.environ.get("ROOFWATCH_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared"


def corpus_dir() -> Path:
    return shared_dir() / "corpus"


@dataclass
class RealSeries:
    """A real series with its labels; ``truth`` for single-truth sources, ``annotations`` for TCPD."""

    source: str
    name: str
    values: np.ndarray
    truth: list[int] = field(default_factory=list)
    annotations: dict[str, list[int]] = field(default_factory=dict)


# --- Talos ----------------------------------------------------------------------------------------

def talos_series(corpus: Path | None = None) -> list[RealSeries]:
    corpus = corpus or corpus_dir()
    expected = json.loads((corpus / TALOS_DIR / "expected_changes.json").read_text())["files"]
    out = []
    for name, info in sorted(expected.items()):
        rows = json.loads((corpus / TALOS_GRAPHS / name).read_text())["test_runs"]
        # stable sort by push timestamp, as treeherder's detect_changes sorts its RevisionDatum list
        rows = sorted(rows, key=lambda r: r[2])
        stamps = [r[2] for r in rows]
        truth = [stamps.index(ts) for ts in info["expected_change_push_timestamps"]]
        out.append(RealSeries("talos", name.removesuffix(".json"), np.array([r[3] for r in rows], float), truth))
    return out


# --- Tigerbeetle ------------------------------------------------------------------------------------

def tigerbeetle_series(corpus: Path | None = None) -> RealSeries:
    data = json.loads(((corpus or corpus_dir()) / TIGERBEETLE).read_text())
    case = next(c for c in data["cases"] if c["test"] == TIGERBEETLE_CASE)
    truth = list(case["expected_change_point_indexes"])
    return RealSeries("otava", data["name"], np.array(data["series"], float), truth)


TIGERBEETLE_NOTE = (
    "Tigerbeetle (365 points): truth = otava's asserted change points at its old defaults "
    "(window 30, p 0.01, min magnitude 5 %) = [15, 71]. The docstring of otava's test also names "
    "a single anomalous drop near 10, the level drop at 15/16, the jump at 71, a drop near 95-97, "
    "then slow upward drift."
)


# --- TCPD ---------------------------------------------------------------------------------------------

def forward_fill(raw: Sequence[float | None]) -> np.ndarray:
    """Replace missing values by the previous one (the first by the next), keeping every index."""
    x = np.array([np.nan if v is None else v for v in raw], float)
    valid = ~np.isnan(x)
    if not valid.any():
        return x
    idx = np.where(valid, np.arange(len(x)), 0)
    np.maximum.accumulate(idx, out=idx)
    x = x[idx]
    first = int(np.argmax(valid))
    x[:first] = x[first]
    return x


def tcpd_series(corpus: Path | None = None) -> tuple[list[RealSeries], list[str]]:
    """Univariate TCPD series with their annotations, and the names of the multivariate ones skipped."""
    root = (corpus or corpus_dir()) / TCPD_DIR
    annotations = json.loads((root / "annotations.json").read_text())
    out, skipped = [], []
    for path in sorted((root / "datasets").glob("*.json")):
        data = json.loads(path.read_text())
        if data["n_dim"] != 1:
            skipped.append(data["name"])
            continue
        values = forward_fill(data["series"][0]["raw"])
        out.append(RealSeries("tcpd", data["name"], values, annotations=annotations[data["name"]]))
    return out, skipped


FMeasure = Callable[..., float]


def load_tcpdbench_metrics(corpus: Path | None = None) -> ModuleType | None:
    """TCPDBench's own ``metrics.py`` from the corpus, imported in place; None when the corpus lacks it."""
    path = (corpus or corpus_dir()) / TCPD_METRICS
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("tcpdbench_metrics", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # the corpus is read-only; no __pycache__ beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = dont_write
    return module


def tcpd_f1_fallback(annotations: Mapping[str, Sequence[int]], predictions: Sequence[int],
                     margin: int = TCPD_MARGIN) -> float:
    """TCPDBench's F1 as defined in van den Burg & Williams (2020), §5, for when ``metrics.py`` is absent.

    Index 0 is added to every annotator's set and to the predictions (the start of the series
    always opens a segment, which is why predicting nothing still scores). Precision is taken
    against the union of all annotators' change points, recall is averaged over annotators, and a
    prediction matches at most one change point within ``margin`` (closest first, per true point).
    Checked against TCPDBench's doctests and published scores (``tcpd/metric_test_vectors.json``).
    """
    per_annotator = [set(cps) | {0} for cps in annotations.values()]
    predicted = set(predictions) | {0}
    union = set().union(*per_annotator)
    precision = len(_hits(union, predicted, margin)) / len(predicted)
    recall = sum(len(_hits(cps, predicted, margin)) / len(cps) for cps in per_annotator) / len(per_annotator)
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _hits(truth: set[int], predicted: set[int], margin: int) -> set[int]:
    """True change points matched by a distinct prediction within ``margin`` (TCPDBench's order: by truth)."""
    free = set(predicted)
    hits = set()
    for tau in truth:
        near = sorted((abs(tau - x), x) for x in free if abs(tau - x) <= margin)
        if near:
            hits.add(tau)
            free.remove(near[0][1])
    return hits


def tcpd_f_measure(corpus: Path | None = None) -> tuple[FMeasure, str]:
    """TCPDBench's ``f_measure`` and where it came from ("TCPDBench metrics.py" or the fallback)."""
    module = load_tcpdbench_metrics(corpus)
    if module is not None and hasattr(module, "f_measure"):
        return module.f_measure, f"TCPDBench metrics.py ({(corpus or corpus_dir()) / TCPD_METRICS})"
    return tcpd_f1_fallback, ("bench fallback (corpus has no tcpd/tcpdbench/metrics.py); "
                              "checked against its test vectors")
