"""``bench.gpu_worker_e2e`` on this host: the GPU host's end-to-end run, with a sleep for the GPU spin."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.redis


def test_push_sigkill_detect_confirm_and_dashboard(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "bench.gpu_worker_e2e", "--out", str(out), "--timeout-s", "400"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500)
    report = json.loads((out / "e2e.json").read_text())
    assert done.returncode == 0 and report["passed"], done.stdout[-4000:] + done.stderr[-4000:]
    assert [name for name, ok, _ in report["checks"] if not ok] == []
    (change,) = report["changes"]
    # A sleep twice as long: the confirmed interval lies near +100 %, far above min_effect.
    assert change["phase"] == "confirmed" and 50 < change["ci_low"] <= change["change_pct"] <= change["ci_high"]
    with sqlite3.connect(out / "roofwatch.db") as db:
        assert db.execute("SELECT count(*) FROM measurement").fetchone()[0] >= 2
    with tarfile.open(out / "dashboard.tar.gz") as tar:
        pages = {Path(name).name for name in tar.getnames()}
    assert {"overview.html", "changes.html", "roofline.html"} <= pages
