"""`roofwatch run` over an 8-commit history with three planted changes, beside busy processes.

    python -m bench.history_under_load [--busy 2] [--keep DIR]

The history is built by the planted-history builder the tests use (``tests/support``: each
benchmark is a sleep whose length the commit sets, so the planted changes are certain on any host):
three benchmarks, ``test_rmsnorm`` 2× slower at c2, ``test_softmax`` 2× faster at c4, ``test_gelu``
1.5× slower at c6, the other five commits neutral. ``--busy`` processes spin on the CPU for the
whole run. Prints the wall time of ``roofwatch run --last 8`` (measuring, detection, bisection and
the confirming A/Bs) and the changes ``roofwatch regressions`` reports, against the planted ones.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The planted-history builder is test support; the benchmark reuses it rather than keeping a copy.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.planted_history import PlannedCommit, plant_history  # noqa: E402

PLAN = [
    PlannedCommit("c0", benchmarks={"test_rmsnorm": 0.02, "test_softmax": 0.02, "test_gelu": 0.02}),
    PlannedCommit("c1"),
    PlannedCommit("c2", benchmarks={"test_rmsnorm": 0.04}),
    PlannedCommit("c3"),
    PlannedCommit("c4", benchmarks={"test_softmax": 0.01}),
    PlannedCommit("c5"),
    PlannedCommit("c6", benchmarks={"test_gelu": 0.03}),
    PlannedCommit("c7"),
]
PLANTED = [("perf-regression", "test_rmsnorm", "c2"), ("perf-improvement", "test_softmax", "c4"),
           ("perf-regression", "test_gelu", "c6")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=2, help="processes spinning on the CPU beside the run")
    parser.add_argument("--keep", type=Path, help="build here and keep it (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="roofwatch-history-") as scratch:
        root = args.keep or Path(scratch)
        history = plant_history(root / "repo", PLAN, dates="increasing")
        names = {sha: name for name, sha in history.shas.items()}
        env = {"ROOFWATCH_DATA_DIR": str(root / "data"), "ROOFWATCH_DATABASE_URL": f"sqlite:///{root / 'rw.db'}",
               "ROOFWATCH_CALIBRATE": "0", "PATH": "/usr/bin:/bin"}
        roofwatch = str(Path(sys.executable).parent / "roofwatch")
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
        try:
            started = time.monotonic()
            done = subprocess.run([roofwatch, "run", "--repo", str(history.repo), "--last", "8"], env=env,
                                  capture_output=True, text=True)
            elapsed = time.monotonic() - started
        finally:
            for process in busy:
                process.kill()
        found = json.loads(subprocess.run([roofwatch, "regressions", "--repo", str(history.repo), "--format", "json"],
                                          env=env, capture_output=True, text=True, check=True).stdout)
    reported = [(c["kind"], c["benchmark"], names.get(c["commit"] or "", "?")) for c in found]
    print(f"roofwatch run --last 8 beside {args.busy} busy processes: exit {done.returncode}, {elapsed:.0f} s")
    for change, row in zip(reported, found):
        print(f"  {change[0]:17} {change[1]:13} at {change[2]}  {row['change_pct']:+.1f} %")
    print("exactly the planted changes" if sorted(reported) == sorted(PLANTED) else f"planted: {PLANTED}")


if __name__ == "__main__":
    main()
