"""False-discovery-rate control across the many benchmarks of one run.

Benjamini & Hochberg (1995) through ``scipy.stats.false_discovery_control``: with thousands
of kernel × shape × dtype series, testing each at 1 % would otherwise flag tens of them on
every commit by chance alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def adjust(p_values: Sequence[float]) -> list[float]:
    """BH-adjusted p-values, in the input order."""
    if not p_values:
        return []
    return [float(p) for p in stats.false_discovery_control(np.asarray(p_values, dtype=float))]
