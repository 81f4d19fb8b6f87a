"""Every GPU measurement of the norm-backward, large-index, A/B and GPU-worker work in one call.

    python -m bench.gpu_session --out DIR [--steps preflight,norms,...] [--deadline-s 400] [--dry-run]

Steps, in this order (``STEPS``), each a subprocess with its own timeout, clipped to what is
left of ``--deadline-s`` (a step that no longer fits is skipped, and said so), so one step that
hangs cannot take the others' time:

- ``preflight``: the device (``nvidia-smi``), Python packages, ``git``, ``redis-server``;
- ``norms``: ``bench.norm_backward`` (before/after against the copy bandwidth, a sweep of
  launches, CUPTI times, registers and spills); ``--before`` is ``.gpuhost/kernels-before``;
- ``norms-correctness``: the RMSNorm and LayerNorm correctness suites, compiled;
- ``large-index``: each family's case past 2**31 elements on the unmodified kernels, and a
  planted 32-bit offset per family that its case must catch
  (``tests/harness/test_planted_bugs_large_index.py``);
- ``ab-check``: ``bench.gpu_ab_check`` with the GEMM experiments; its time budget is what is
  left before the deadline less the steps after it;
- ``worker-e2e``: ``bench.gpu_worker_e2e`` (Redis, SQLite, serve, ``roofwatch worker --gpu 0``,
  two pushes, SIGKILL, detection, A/B confirmation, dashboard pages).

Every step's output goes to ``DIR/<step>.log``; its results into ``DIR`` (at most 8 files, as
a device call brings back): ``session.md`` (the time plan as run and each step's outcome),
``norms.md`` + ``norms.json``, ``ab-check.md`` + ``ab-check.json``, ``e2e.tar.gz`` (the e2e's
report, database, dashboard pages and logs), ``logs.tar.gz`` (every step's log, the junit
files, the A/B's raw per-process JSON). ``--dry-run`` prints the plan and the commands, and
runs the preflight only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPUHOST = ROOT / ".gpuhost"


@dataclass(frozen=True)
class Step:
    name: str
    expected_s: float  # what it took, or is planned to take, on an H100/H200
    timeout_s: float


STEPS = (
    Step("preflight", 10, 60),
    Step("norms", 75, 150),
    Step("norms-correctness", 35, 120),
    Step("large-index", 80, 200),
    Step("ab-check", 190, 300),
    Step("worker-e2e", 130, 300),
)
AB_MIN_BUDGET_S = 100.0  # fewer than three rounds of every workload decide nothing


def environment() -> dict[str, str]:
    """This interpreter's environment with the carried Redis on PATH and its libraries found."""
    env = dict(os.environ)
    if (GPUHOST / "bin" / "redis-server").exists() and shutil.which("redis-server") is None:
        env["PATH"] = f"{GPUHOST / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(GPUHOST / "lib"), env.get("LD_LIBRARY_PATH")]))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT)]))
    # Triton's cache where every step finds it: later steps reuse what earlier ones compiled.
    env.setdefault("TRITON_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "roofwatch-triton-cache"))
    env["TRITON_INTERPRET"] = "0"
    return env


PREFLIGHT = """
import importlib, shutil, subprocess, sys
print(sys.version)
for name in ("torch", "triton", "pynvml", "celery", "kombu", "redis", "sqlmodel", "fastapi", "uvicorn", "plotly",
             "pydantic_settings", "alembic", "roofwatch.service.api.app", "roofwatch.workers.worker"):
    try:
        module = importlib.import_module(name)
        print(f"import {name}: {getattr(module, '__version__', 'ok')}")
    except Exception as exc:
        print(f"import {name}: MISSING {type(exc).__name__}: {exc}")
import torch
print("cuda:", torch.cuda.is_available(), torch.cuda.get_device_name() if torch.cuda.is_available() else "")
for tool in ("git", "redis-server", "bwrap", "nvidia-smi"):
    path = shutil.which(tool)
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[:1] if path else []
    print(f"{tool}: {path} {version}")
if shutil.which("nvidia-smi"):
    print(subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,"
                          "temperature.gpu,memory.total", "--format=csv"], capture_output=True, text=True).stdout)
"""


def commands(step: str, out: Path, budget_s: float) -> list[list[str]]:
    py = sys.executable
    if step == "preflight":
        return [[py, "-c", PREFLIGHT]]
    if step == "norms":
        before = ["--before", str(GPUHOST / "kernels-before")] if (GPUHOST / "kernels-before").exists() else []
        return [[py, "-m", "bench.norm_backward", *before, "--sweep", "--sweep-budget-s", "30",
                 "--markdown", str(out / "norms.md"), "--json", str(out / "norms.json")]]
    if step == "norms-correctness":
        return [[py, "-m", "pytest", "suites/correctness/test_rmsnorm.py", "suites/correctness/test_layernorm.py",
                 "-q", "-n", "8", "-p", "no:cacheprovider", f"--junitxml={out / 'raw' / 'norms-correctness.xml'}"]]
    if step == "large-index":
        return [[py, "-m", "pytest", "tests/harness/test_planted_bugs_large_index.py", "-q", "-p", "no:cacheprovider",
                 "-rA", f"--junitxml={out / 'raw' / 'large-index.xml'}", f"--basetemp={out / 'raw' / 'large-index'}"]]
    if step == "ab-check":
        return [[py, "-m", "bench.gpu_ab_check", "--rounds", "8", "--budget-s", f"{budget_s:.0f}",
                 "--experiments", "gemm", "--markdown", str(out / "ab-check.md"), "--json", str(out / "ab-check.json"),
                 "--out-dir", str(out / "raw" / "ab-check")]]
    if step == "worker-e2e":
        return [[py, "-m", "bench.gpu_worker_e2e", "--out", str(out / "raw" / "e2e"), "--timeout-s", "150"]]
    raise ValueError(step)


def run_step(step: Step, out: Path, env: dict[str, str], timeout_s: float, budget_s: float) -> tuple[str, float]:
    log = out / "raw" / f"{step.name}.log"
    started = time.monotonic()
    status = "passed"
    with open(log, "w") as handle:
        for argv in commands(step.name, out, budget_s):
            handle.write(f"$ {' '.join(argv)}\n")
            handle.flush()
            left = timeout_s - (time.monotonic() - started)
            process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            try:
                code = process.wait(timeout=max(left, 1))
            except subprocess.TimeoutExpired:
                # The whole group: a step's children (measuring processes, workers) go with it.
                os.killpg(process.pid, 9)
                process.wait()
                status = f"timed out after {timeout_s:.0f} s"
                break
            if code != 0:
                status = f"failed (exit {code})"
                break
    return status, time.monotonic() - started


def tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_session", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / ".cache" / "gpu-session")))
    parser.add_argument("--steps", default=",".join(s.name for s in STEPS))
    parser.add_argument("--deadline-s", type=float, default=400.0, help="no step runs past this")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and commands; run the preflight only")
    args = parser.parse_args(argv)
    chosen = [s for s in STEPS if s.name in args.steps.split(",")]
    if unknown := set(args.steps.split(",")) - {s.name for s in STEPS}:
        parser.error(f"unknown steps: {', '.join(sorted(unknown))}")
    out: Path = args.out
    (out / "raw").mkdir(parents=True, exist_ok=True)
    env = environment()
    started = time.monotonic()
    report = ["# GPU session", "", f"deadline {args.deadline_s:.0f} s; steps {', '.join(s.name for s in chosen)}", "",
              "| step | planned s | took s | outcome |", "|---|---:|---:|---|"]
    failed = False
    for index, step in enumerate(chosen):
        elapsed = time.monotonic() - started
        left = args.deadline_s - elapsed
        later = sum(s.expected_s for s in chosen[index + 1:])
        budget = max(AB_MIN_BUDGET_S, min(step.timeout_s, left - later) - 40)  # 40 s: the last round's overrun
        timeout = min(step.timeout_s, left)
        print(f"[{elapsed:6.1f} s] {step.name}: planned {step.expected_s:.0f} s, timeout {timeout:.0f} s"
              + (f", A/B budget {budget:.0f} s" if step.name == "ab-check" else ""), flush=True)
        if args.dry_run and step.name != "preflight":
            for argv_ in commands(step.name, out, budget):
                print("    " + " ".join(argv_))
            continue
        if timeout < min(step.expected_s, 60):
            report.append(f"| {step.name} | {step.expected_s:.0f} | – | skipped: {left:.0f} s left of the deadline |")
            print(f"           skipped: {left:.0f} s left", flush=True)
            failed = True
            continue
        status, took = run_step(step, out, env, timeout, budget)
        failed |= status != "passed"
        report.append(f"| {step.name} | {step.expected_s:.0f} | {took:.0f} | {status} |")
        print(f"[{time.monotonic() - started:6.1f} s] {step.name}: {status} in {took:.0f} s\n"
              + tail(out / "raw" / f"{step.name}.log"), flush=True)
    report.append(f"\ntotal {time.monotonic() - started:.0f} s")
    (out / "session.md").write_text("\n".join(report) + "\n")
    e2e = out / "raw" / "e2e"
    if e2e.exists():
        with tarfile.open(out / "e2e.tar.gz", "w:gz") as tar:
            tar.add(e2e, arcname="e2e")
    with tarfile.open(out / "logs.tar.gz", "w:gz") as tar:
        for path in sorted((out / "raw").iterdir()):
            if path.name != "e2e":
                tar.add(path, arcname=f"raw/{path.name}")
    shutil.rmtree(out / "raw")
    print("\n".join(report))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
