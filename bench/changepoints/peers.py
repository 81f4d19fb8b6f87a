"""Published change-point detectors, each behind ``detect(values) -> list[int]``.

Every adapter returns the sorted 0-based indexes of the first value after each detected change
(roofwatch's convention, DESIGN §4), whatever the library's own convention is, and imports its
library lazily so the harness runs with only the detectors that are installed.

Library quirks handled here (see each adapter for the why):

- asv: ``detect_steps`` returns the piecewise-constant fit asv draws on its graphs; we report every
  segment start. ``detect_regressions`` (what ``asv publish`` lists as regressions) is *not* used:
  it keeps only upward steps (slowdowns) that the later segments never recovered from, above
  a relative threshold (5 % by default in asv.conf), so every speed-up would count as a miss.
- Otava: ``get_change_points`` ignores ``start``/``end`` when given an ``ndarray`` (it only slices
  sequences) yet still shifts indexes by ``start``, so every window but the first is wrong.
  We pass a ``list``.
- e-divisive: the permutation test draws from numpy's *global* RNG; we seed it per call with
  the library's own ``deterministic_numpy_random`` so results do not depend on call order.
- ruptures: ``Pelt`` defaults to ``jump=5``, i.e. breakpoints only at multiples of 5; a step at
  61 then comes back as two breakpoints (60 and 65). We pass ``jump=1`` (exact PELT).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

# The same noise estimate roofwatch uses: 1.4826 × MAD(diff(x)) / √2, blind to steps and outliers.
from roofwatch.service.analysis.changepoints import robust_sigma

INSTALL_HINT = 'pip install -e ".[bench]"'
# apache-otava 0.8.0 pins numpy==2.2.* and signal-processing-algorithms 2.1.6 pins numpy<2 and
# setuptools<71; with pip's resolver they cannot coexist with each other or with roofwatch's
# numpy 2.x, so both go in without their pins (their runtime imports are in the bench extra).
NO_DEPS_HINT = "pip install --no-deps apache-otava==0.8.0 signal-processing-algorithms==2.1.6"

Detector = Callable[[np.ndarray], list[int]]


def _missing(library: str, exc: ImportError, extra: str = "") -> ImportError:
    hint = f"{INSTALL_HINT} && {extra}" if extra else INSTALL_HINT
    return ImportError(f"{library} is not installed ({exc}); install the benchmark peers with: {hint}")


# --- asv -------------------------------------------------------------------------------------

def asv(values: np.ndarray) -> list[int]:
    """asv's Potts-model step fit (``asv.step_detect.detect_steps``), as ``asv publish`` runs it per graph.

    asv passes per-point weights from each result's confidence interval; a bare history has none,
    so every point weighs the same (``w=None``, which asv also accepts).
    """
    try:
        from asv import step_detect
    except ImportError as exc:
        raise _missing("asv", exc) from exc
    steps = step_detect.detect_steps([float(v) for v in values], None)
    # steps are (left inclusive, right exclusive, value, min, err); a change starts each segment but the first
    return [int(left) for left, *_ in steps[1:]]


# --- Otava (Apache, ex-DataStax Hunter) ----------------------------------------------------------

OTAVA_WINDOW = 50
OTAVA_MAX_PVALUE = 0.001


def otava(values: np.ndarray, window_len: int = OTAVA_WINDOW, max_pvalue: float = OTAVA_MAX_PVALUE,
          min_magnitude: float = 0.0) -> list[int]:
    """Otava's windowed E-divisive + t-test merge (``otava.analysis.compute_change_points``)."""
    try:
        from otava.analysis import compute_change_points
    except ImportError as exc:
        raise _missing("apache-otava", exc, NO_DEPS_HINT) from exc
    # a list, not an ndarray: see the module docstring
    change_points, _weak = compute_change_points(
        [float(v) for v in values], window_len=window_len, max_pvalue=max_pvalue, min_magnitude=min_magnitude)
    return sorted(int(cp.index) for cp in change_points)


# --- MongoDB e-divisive -----------------------------------------------------------------------------

EDIVISIVE_PVALUE = 0.05
EDIVISIVE_PERMUTATIONS = 100
EDIVISIVE_SEED = 1234  # the seed MongoDB's own tests use


def edivisive(values: np.ndarray) -> list[int]:
    """E-divisive with means and a permutation test (``signal_processing_algorithms``), seeded."""
    try:
        from signal_processing_algorithms.determinism import deterministic_numpy_random
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
    except ImportError as exc:
        raise _missing("signal-processing-algorithms", exc, NO_DEPS_HINT) from exc
    with deterministic_numpy_random(EDIVISIVE_SEED):
        found = e_divisive(np.asarray(values, dtype=np.float64),
                           pvalue=EDIVISIVE_PVALUE, permutations=EDIVISIVE_PERMUTATIONS)
    return sorted(int(i) for i in found)


# --- lookback z-score -----------------------------------------------------------------------------

ZSCORE_WINDOW = 30
ZSCORE_THRESHOLD = 5.0


def zscore(values: np.ndarray, window: int = ZSCORE_WINDOW, threshold: float = ZSCORE_THRESHOLD) -> list[int]:
    """The classic CI alert: a point more than ``threshold`` sd from the mean of the previous ``window`` points.

    After an alert the next ``window`` points are not tested: the lookback still holds the old
    level and would flag every point of a real step again.
    """
    x = np.asarray(values, dtype=np.float64)
    found: list[int] = []
    i = window
    while i < len(x):
        past = x[i - window:i]
        sd = past.std()
        if sd > 0 and abs(x[i] - past.mean()) / sd > threshold:
            found.append(i)
            i += window
        else:
            i += 1
    return found


# --- ruptures PELT ------------------------------------------------------------------------------------

PELT_MIN_SIZE = 5
PELT_JUMP = 1  # ruptures' default of 5 restricts breakpoints to a grid of 5 commits


def pelt(values: np.ndarray) -> list[int]:
    """``ruptures.Pelt(model="l2", min_size=5, jump=1)`` with the BIC-style penalty 2 σ² log n.

    The l2 cost is a sum of squared residuals, so the penalty must be in squared units of the
    data: 2 σ² log n is the usual BIC/Schwarz choice for a gaussian mean shift with known σ,
    with σ estimated robustly (``robust_sigma``) since no σ is known.
    """
    try:
        import ruptures as rpt
    except ImportError as exc:
        raise _missing("ruptures", exc) from exc
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    sigma = robust_sigma(x)
    if n < 2 * PELT_MIN_SIZE or sigma == 0.0:
        return []
    penalty = 2.0 * sigma**2 * math.log(n)
    breakpoints = rpt.Pelt(model="l2", min_size=PELT_MIN_SIZE, jump=PELT_JUMP).fit(x).predict(pen=penalty)
    # ruptures returns segment ends (exclusive), the last being n: each but the last starts a new segment
    return [int(b) for b in breakpoints[:-1]]
