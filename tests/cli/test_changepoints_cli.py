"""`roofwatch changepoints --csv FILE`: the DESIGN §4 contract on external histories."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from support.tests_support import roofwatch


def _write(path: Path, rows: list[list[object]]) -> Path:
    path.write_text("\n".join(",".join(str(c) for c in row) for row in rows) + "\n")
    return path


def test_json_lists_each_columns_change_points(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    flat = 1.0 + rng.normal(0, 0.005, 80)
    stepped = np.r_[np.full(50, 2.0), np.full(30, 2.6)] * np.exp(rng.normal(0, 0.005, 80))
    rows: list[list[object]] = [["commit", "test_flat[fp16]", "test_step[bf16]"]]
    rows += [[f"c{i:03d}", f"{a:.6f}", f"{b:.6f}" if i != 7 else ""] for i, (a, b) in enumerate(zip(flat, stepped))]
    done = roofwatch(["changepoints", "--csv", str(_write(tmp_path / "h.csv", rows)), "--format", "json"], {})
    found = json.loads(done.stdout)
    assert found["test_flat[fp16]"] == []
    (cp,) = found["test_step[bf16]"]
    assert cp["index"] == 50 and cp["commit"] == "c050"
    assert 28 < cp["change_pct"] < 32 and cp["before"] < cp["after"] and cp["p_value"] < 1e-6
    assert set(cp) >= {"index", "commit", "before", "after", "change_pct", "p_value"}


def test_a_step_inside_the_floor_is_reported_only_when_asked_for(tmp_path: Path) -> None:
    # a 1.5 % step in a series quiet to 0.1 %: plain to the detector, under the default 2 % floor
    rng = np.random.default_rng(1)
    small = np.r_[np.full(40, 1.0), np.full(40, 1.015)] * np.exp(rng.normal(0, 0.001, 80))
    csv = _write(tmp_path / "s.csv", [["commit", "test_small"]] + [[f"c{i:03d}", f"{v:.6f}"] for i, v in enumerate(small)])
    done = roofwatch(["changepoints", "--csv", str(csv), "--format", "json"], {})
    assert json.loads(done.stdout)["test_small"] == []
    done = roofwatch(["changepoints", "--csv", str(csv), "--format", "json", "--min-effect", "1%"], {})
    (cp,) = json.loads(done.stdout)["test_small"]
    assert cp["index"] == 40 and 1.2 < cp["change_pct"] < 1.8
    done = roofwatch(["changepoints", "--csv", str(csv), "--min-effect", "two"], {}, check=False)
    assert done.returncode == 2 and "min_effect 'two' is not a number" in done.stderr


def test_garbage_gets_a_clear_error_naming_the_cell(tmp_path: Path) -> None:
    bad = _write(tmp_path / "bad.csv", [["commit", "x"], ["a", "1.0"], ["b", "fast"]])
    done = roofwatch(["changepoints", "--csv", str(bad)], {}, check=False)
    assert done.returncode == 2 and "bad.csv:3: column 'x' holds 'fast', not a number" in done.stderr
    no_commit = _write(tmp_path / "nocommit.csv", [["sha", "x"], ["a", "1"]])
    done = roofwatch(["changepoints", "--csv", str(no_commit)], {}, check=False)
    assert done.returncode == 2 and "first column must be `commit`" in done.stderr
    done = roofwatch(["changepoints", "--csv", str(tmp_path / "missing.csv")], {}, check=False)
    assert done.returncode == 2 and "cannot read" in done.stderr


def test_a_real_series_from_the_corpus(tmp_path: Path, shared_corpus: Path) -> None:
    data = json.loads((shared_corpus / "cpd-timeseries" / "otava" / "tigerbeetle.json").read_text())
    rows: list[list[object]] = [["commit", "tigerbeetle"]] + [[f"r{i}", v] for i, v in enumerate(data["series"])]
    done = roofwatch(["changepoints", "--csv", str(_write(tmp_path / "tb.csv", rows))], {})
    assert "tigerbeetle" in done.stdout and " 71 " in done.stdout
