"""Many series watched commit by commit: a new value for each, and only those that may have changed are searched.

A kernel library has thousands of series and every main-branch run adds one value to each.
Searching each series again costs milliseconds apiece; most series did not move. ``Watch`` keeps,
per series, the stretch since its latest change (``TAIL`` values at most) cleaned the way
``changepoints.detect`` cleans it — on the fast mode's scale, outliers clipped — with that
stretch's noise. A new value is placed and clipped the same way, and the weighted CUSUM of every
stretch is computed at once, as arrays over all series. Only a series whose CUSUM passes
``SCREEN_Z`` — below what ``detect`` itself needs, so a change it would report is not screened
out — is searched again by ``detect``, on its recent raw values. Nothing is random: the same
values appended in the same order give the same changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from roofwatch.service.analysis.changepoints import DEFAULT_MIN_SIZE, ChangePoint, detect
from roofwatch.service.analysis.noise import HAMPEL_K, clean, read_noise

TAIL = 64  # values kept per series since its latest change
SEARCH = 2 * TAIL  # raw values a flagged series is searched on again
SCREEN_Z = 4.0  # |CUSUM z| that sends a series to a full search (detect's own tests sit near 4.4)
GROWTH_Z = 1.0  # ... once a split's z has grown this much since the series was last searched


@dataclass
class _Noise:
    """Per-series arrays: scale, slow-mode offset and spread (0 when unimodal), fast-mode level."""

    sigma: np.ndarray
    offset: np.ndarray
    slow_sigma: np.ndarray
    level: np.ndarray


class Watch:
    """``len(histories)`` series, each analysed once in full, then extended one value at a time.

    ``changes`` are the histories' change points when they are known already (``detect`` of each,
    computed elsewhere, in parallel); otherwise each history is analysed here.
    """

    def __init__(self, histories: Sequence[Sequence[float] | np.ndarray],
                 changes: Sequence[list[ChangePoint]] | None = None, min_size: int = DEFAULT_MIN_SIZE) -> None:
        self.min_size = min_size
        count = len(histories)
        self.raw = np.full((count, SEARCH), np.nan)
        self.length = np.zeros(count, dtype=int)  # values seen per series
        self.since = np.zeros(count, dtype=int)  # index of each series' latest change
        self.y = np.full((count, TAIL), np.nan)
        self.w = np.zeros((count, TAIL))
        self.noise = _Noise(*(np.zeros(count) for _ in range(4)))
        self.changes: list[list[ChangePoint]] = []
        self.searches = 0  # detect calls made by append: what an incremental update costs
        for i, history in enumerate(histories):
            values = np.asarray(history, dtype=float)
            found = list(changes[i]) if changes is not None else detect(values, min_size=min_size)
            self.changes.append(found)
            self.length[i] = len(values)
            self.since[i] = found[-1].index if found else 0
            recent = values[-SEARCH:]
            self.raw[i, SEARCH - len(recent):] = recent
            self._restart(i)
        # the full analysis saw each stretch as it is: only a split whose evidence grows beyond
        # what was searched is news (an old bump keeps its z, or loses it as values come after it)
        self.searched = self._profile()

    def _restart(self, i: int) -> None:
        """Read series ``i``'s noise and cleaned stretch again from its raw values since its latest change."""
        start = max(int(self.since[i]), int(self.length[i]) - TAIL)
        tail = self.raw[i, SEARCH - (int(self.length[i]) - start):]
        tail = tail[np.isfinite(tail) & (tail > 0)]
        self.y[i], self.w[i] = np.nan, 0.0
        if len(tail) < 2 * self.min_size:
            x = np.log(tail) if len(tail) else np.zeros(0)
            self.noise.sigma[i] = max(float(np.std(x)) if len(x) > 1 else 0.0, 1e-9)
            self.noise.offset[i] = self.noise.slow_sigma[i] = 0.0
            self.noise.level[i] = float(np.mean(x)) if len(x) else 0.0
            self.y[i, TAIL - len(x):], self.w[i, TAIL - len(x):] = x, 1.0
            return
        x = np.log(tail)
        noise = read_noise(x, self.min_size)
        y, w = clean(x, noise)
        self.noise.sigma[i], self.noise.offset[i] = noise.sigma, noise.offset
        self.noise.slow_sigma[i] = noise.slow_sigma
        self.noise.level[i] = float(np.average(y[~noise.slow])) if (~noise.slow).any() else float(np.mean(y))
        self.y[i, TAIL - len(y):], self.w[i, TAIL - len(y):] = y, w

    def append(self, values: Sequence[float] | np.ndarray) -> dict[int, list[ChangePoint]]:
        """Add one value to every series (NaN: not measured); the new changes, by series index."""
        values = np.asarray(values, dtype=float)
        measured = np.isfinite(values) & (values > 0)
        self.raw = np.roll(self.raw, -1, axis=1)
        self.raw[:, -1] = values
        self.length += 1
        x = np.log(np.where(measured, values, 1.0))
        n = self.noise
        slow = (n.offset > 0) & (x - n.level > n.offset / 2)
        y = x - np.where(slow, n.offset, 0.0)
        spread = np.where(slow, n.slow_sigma, n.sigma)
        y = np.clip(y, n.level - HAMPEL_K * spread, n.level + HAMPEL_K * spread)
        weight = np.where(slow, (n.sigma / np.maximum(n.slow_sigma, n.sigma)) ** 2, 1.0) * measured
        self.y = np.roll(self.y, -1, axis=1)
        self.w = np.roll(self.w, -1, axis=1)
        self.y[:, -1] = np.where(measured, y, np.nan)
        self.w[:, -1] = weight
        found: dict[int, list[ChangePoint]] = {}
        self.searched = np.roll(self.searched, -1, axis=1)
        self.searched[:, -1] = 0.0
        z = self._profile()
        news = (z > SCREEN_Z) & (z > self.searched + GROWTH_Z)
        for i in np.flatnonzero(news.any(axis=1)):
            new = self._search(int(i))
            if new:
                found[int(i)] = new
                self.searched[i] = self._profile(slice(i, i + 1))[0]
            else:
                self.searched[i] = np.maximum(self.searched[i], z[i])
        return found

    def _profile(self, rows: slice = slice(None)) -> np.ndarray:
        """|weighted CUSUM z| of each series' stretch at each split (0 without ``min_size`` values on each side).

        Column j splits before the stretch's value j + 1, so a column follows its values as they age.
        """
        w = self.w[rows]
        wy = np.where(w > 0, np.nan_to_num(self.y[rows]) * w, 0.0)
        count = np.cumsum(w > 0, axis=1)
        cw, cy = np.cumsum(w, axis=1), np.cumsum(wy, axis=1)
        total_n, total_w, total_y = count[:, -1:], cw[:, -1:], cy[:, -1:]
        ok = (count[:, :-1] >= self.min_size) & (total_n - count[:, :-1] >= self.min_size)
        wl, wr = cw[:, :-1], total_w - cw[:, :-1]
        ok &= (wl > 0) & (wr > 0)
        wl, wr = np.where(ok, wl, 1.0), np.where(ok, wr, 1.0)
        diff = (total_y - cy[:, :-1]) / wr - cy[:, :-1] / wl
        z = np.abs(diff) / (self.noise.sigma[rows, None] * np.sqrt(1 / wl + 1 / wr))
        return np.column_stack([np.where(ok, z, 0.0), np.zeros(len(z))])

    def _search(self, i: int) -> list[ChangePoint]:
        """``detect`` on series ``i``'s recent raw values; the changes after its latest one are new."""
        self.searches += 1
        seen = int(min(self.length[i], SEARCH))
        offset = int(self.length[i]) - seen
        recent = self.raw[i, SEARCH - seen:]
        new = []
        for cp in detect(recent, min_size=self.min_size):
            index = cp.index + offset
            # only the stretch since the latest change is news; earlier rows were analysed in full
            if index > max(self.since[i] + self.min_size, self.length[i] - TAIL):
                new.append(ChangePoint(index, cp.before, cp.after, cp.change_pct, cp.p_value, cp.ci_low, cp.ci_high,
                                       cp.shift, cp.modes, cp.slow_share))
        if new:
            self.changes[i] += new
            self.since[i] = new[-1].index
            self._restart(i)
        return new
