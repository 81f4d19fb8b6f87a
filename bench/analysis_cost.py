"""What a run of microsecond benchmarks with hundreds of thousands of rounds costs to analyse.

    python -m bench.analysis_cost [--benchmarks 64] [--rounds 200000] [--runs 2] [--markdown FILE]

pytest-benchmark records every round of every benchmark in its JSON. This script writes such
a file (``--benchmarks`` entries of ``--rounds`` samples each, a 300 MB file at the defaults)
for each of ``--runs`` consecutive commits of a real git repository (the last commit twice
as slow, so the analysis has a step to find), then, each stage in a fresh child process so its
peak memory is its own:

1. **parse**: ``roofwatch.result_files.suite_results.parse_benchmark_json``, as a worker reads a suite's
   result file, and the envelope written as the JSON that travels to the service;
2. **ingest + analyse**: the envelope parsed and stored (``ingest_envelope``) into a SQLite
   database, then ``main_branch.after_run``: the run read into its history (change points,
   the adjacent comparison, candidates).

It prints seconds and peak resident memory per stage and run, and the database's growth per
run (main file + WAL). Goals: ingest + analyse under 10 s and 500 MB, under 20 MB of database
per run. Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

GOAL_SECONDS = 10.0
GOAL_PEAK_MB = 500.0
GOAL_DB_MB = 20.0


def write_result_file(path: Path, benchmarks: int, rounds: int, scale: float, seed: int) -> None:
    """A pytest-benchmark JSON file, one entry at a time (the whole file never sits in memory)."""
    rng = np.random.default_rng(seed)
    with path.open("w", encoding="utf-8") as out:
        out.write('{"machine_info": {"node": "bench"}, "benchmarks": [')
        for index in range(benchmarks):
            base = 2e-6 * (1 + index % 7)
            data = base * scale * rng.lognormal(0.0, 0.05, rounds)
            q1, q3 = np.percentile(data, [25, 75])
            entry = {
                "name": f"test_op[{index}]", "fullname": f"bench/test_ops.py::test_op[{index}]",
                "param": str(index), "group": None,
                "extra_info": {"flops": 1e4, "bytes": 8e4, "dtype": "fp32"},
                "stats": {"min": float(data.min()), "max": float(data.max()), "mean": float(data.mean()),
                          "stddev": float(data.std(ddof=1)), "rounds": rounds, "median": float(np.median(data)),
                          "iqr": float(q3 - q1), "q1": float(q1), "q3": float(q3), "iterations": 1,
                          "data": data.tolist()},
            }
            out.write(("," if index else "") + json.dumps(entry))
        out.write("]}")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def parse_stage(result_file: str, envelope_file: str, run_id: int, key: str, sha: str, repository: str) -> dict[str, float]:
    from roofwatch.common.envelope import DeviceInfo, Envelope, SuiteResult
    from roofwatch.result_files.suite_results import parse_benchmark_json

    started = time.perf_counter()
    measurements = parse_benchmark_json(Path(result_file))
    suite = SuiteResult(name="benchmarks", kind="benchmark", status="passed", measurements=measurements)
    envelope = Envelope(run_id=run_id, idempotency_key=key, repository=repository, sha=sha, status="succeeded",
                        device=DeviceInfo(device_class="CPU bench", fingerprint="bench-device"),
                        suites=[suite], started_at=datetime.now(UTC), finished_at=datetime.now(UTC))
    Path(envelope_file).write_text(envelope.model_dump_json(), encoding="utf-8")
    return {"seconds": time.perf_counter() - started, "peak_mb": _peak_mb(),
            "envelope_mb": Path(envelope_file).stat().st_size / 1e6,
            "samples_kept": float(sum(len(m.samples) for m in measurements))}


def analyse_stage(envelope_file: str, run_id: int) -> dict[str, float]:
    from roofwatch.service.core.db import session_scope
    from roofwatch.service.core.models import Change, Run
    from roofwatch.service.flows import main_branch
    from roofwatch.service.records.ingest import ingest_envelope, parse_envelope

    baseline = _peak_mb()
    started = time.perf_counter()
    envelope = parse_envelope(json.loads(Path(envelope_file).read_text(encoding="utf-8")))
    with session_scope() as session:
        ingest_envelope(session, envelope)
    ingested = time.perf_counter()
    main_branch.start = lambda steps: None  # type: ignore[assignment]  # follow-ups are measurements, not analysis
    main_branch.after_run(run_id)
    finished = time.perf_counter()
    with session_scope() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.analysis_state == "done", run
        from sqlmodel import select
        changes = len(session.exec(select(Change).where(Change.detected_run_id == run_id)).all())
    return {"ingest_s": ingested - started, "analyse_s": finished - ingested, "seconds": finished - started,
            "peak_mb": _peak_mb(), "baseline_mb": baseline, "changes": float(changes)}


def in_child(function: Any, *args: Any) -> dict[str, float]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)  # type: ignore[no-any-return]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def database_mb(data_dir: Path) -> float:
    return sum(p.stat().st_size for p in data_dir.glob("roofwatch.db*")) / 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--benchmarks", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    args = parser.parse_args(argv)
    console = Console(width=200)

    with tempfile.TemporaryDirectory(prefix="roofwatch-analysis-cost-") as tmp:
        work = Path(tmp)
        data_dir = work / "data"
        os.environ["ROOFWATCH_DATA_DIR"] = str(data_dir)
        os.environ.pop("ROOFWATCH_DATABASE_URL", None)
        from roofwatch.common.vocabulary import Trigger
        from roofwatch.git import checkout
        from roofwatch.service.core.db import migrate, session_scope
        from roofwatch.service.records.repositories import register
        from roofwatch.service.records.runs import create_run, upsert_commit

        repo = work / "repo"
        repo.mkdir()
        _git(repo, "init", "-q", "-b", "main")
        shas = []
        for index in range(args.runs):
            (repo / "step.txt").write_text(str(index))
            _git(repo, "add", "-A")
            _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@localhost", "commit", "-qm", f"step {index}")
            shas.append(_git(repo, "rev-parse", "HEAD"))
        migrate()
        runs: list[tuple[int, str, str]] = []
        with session_scope() as session:
            repository = register(session, "bench/analysis-cost", str(repo))
            for sha in shas:
                info = checkout.commit_info(repo, sha)
                run = create_run(session, repository, upsert_commit(session, repository, info), f"bench:{sha}",
                                 trigger=Trigger.MANUAL)
                runs.append((run.id, run.idempotency_key, sha))  # type: ignore[arg-type]

        table = Table("run", "result file MB", "parse s", "parse peak MB", "envelope MB", "samples kept",
                      "ingest s", "analyse s", "ingest+analyse s", "peak MB", "DB growth MB", "changes")
        rows: list[list[str]] = []
        missed = False
        for index, (run_id, key, sha) in enumerate(runs):
            result_file, envelope_file = work / "bench.json", work / "envelope.json"
            scale = 2.0 if index == len(runs) - 1 and index > 0 else 1.0
            write_result_file(result_file, args.benchmarks, args.rounds, scale, seed=index)
            size_mb = result_file.stat().st_size / 1e6
            parsed = in_child(parse_stage, str(result_file), str(envelope_file), run_id, key, sha, "bench/analysis-cost")
            before = database_mb(data_dir)
            analysed = in_child(analyse_stage, str(envelope_file), run_id)
            growth = database_mb(data_dir) - before
            row = [str(index + 1), f"{size_mb:.0f}", f"{parsed['seconds']:.1f}", f"{parsed['peak_mb']:.0f}",
                   f"{parsed['envelope_mb']:.1f}", f"{parsed['samples_kept']:.0f}", f"{analysed['ingest_s']:.2f}",
                   f"{analysed['analyse_s']:.2f}", f"{analysed['seconds']:.2f}", f"{analysed['peak_mb']:.0f}",
                   f"{growth:.2f}", f"{analysed['changes']:.0f}"]
            table.add_row(*row)
            rows.append(row)
            missed |= (analysed["seconds"] > GOAL_SECONDS or analysed["peak_mb"] > GOAL_PEAK_MB
                       or growth > GOAL_DB_MB)
            result_file.unlink()
    console.print(f"{args.benchmarks} benchmarks × {args.rounds:,} rounds, {args.runs} runs "
                  f"(goals: ingest+analyse < {GOAL_SECONDS:.0f} s and < {GOAL_PEAK_MB:.0f} MB, "
                  f"database < {GOAL_DB_MB:.0f} MB per run)")
    console.print(table)
    if args.markdown:
        header = [str(c.header) for c in table.columns]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    console.print("[red]a goal was missed[/]" if missed else "[green]all goals met[/]")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
