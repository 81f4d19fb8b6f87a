"""The harness as a pytest plugin: a kernel repository uses ``kernel_benchmark`` and
``roofwatch.testing`` by having roofwatch installed, with no conftest of roofwatch's.

The repository below has its own ``kernels``, ``suites``, ``service`` and ``dashboard``
packages, the very names roofwatch's own folders carry, and runs under the real ``roofwatch
run`` (sandboxed, embedded mode), so its results must reach the database.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib.metadata import entry_points
from pathlib import Path

from sqlmodel import Session, create_engine, select
from support.sample_repo import commit, init
from support.tests_support import roofwatch

from roofwatch import testing as public_api
from roofwatch.workers import bubblewrap

ROOT = Path(__file__).resolve().parents[2]

PYPROJECT = """\
[project]
name = "acme-kernels"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "correctness"
kind = "correctness"
command = "python -m pytest suites/correctness -q -p no:cacheprovider"
timeout = 300

[[tool.roofwatch.suites]]
name = "benchmarks"
kind = "benchmark"
command = "python -m pytest suites/benchmarks -q -p no:cacheprovider --benchmark-only"
timeout = 300
"""

# Every package says whose it is, so a test can tell the repository's own from roofwatch's.
OWN = 'OWNER = "acme"\n'

SCALE = """\
import torch


def scale(x, a, out=None):
    out = torch.empty_like(x) if out is None else out
    torch.mul(x, a, out=out)
    return out
"""

CORRECTNESS = """\
import pytest
import torch

import dashboard
import kernels
import service
import suites
from kernels.scale import scale
from roofwatch.testing import assert_close, assert_guard_intact, poisoned_output, record_errors, tolerance_for


def test_every_package_is_the_repositorys_own():
    assert kernels.OWNER == suites.OWNER == service.OWNER == dashboard.OWNER == "acme"


@pytest.mark.filterwarnings("ignore:record_property is incompatible")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_scale(dtype, record_property):
    x = torch.randn(1000, generator=torch.Generator().manual_seed(0)).to(dtype)
    out, guard = poisoned_output(x)
    scale(x, 3.0, out=out)
    assert_guard_intact(guard, "out")
    record_errors(record_property, assert_close(out, 3.0 * x.double(), tolerance_for(dtype)))
"""

BENCHMARKS = """\
import torch

from kernels.scale import scale

N = 1 << 16


def test_scale_speed(kernel_benchmark):
    x = torch.randn(N)
    out = torch.empty_like(x)
    result = kernel_benchmark(lambda: scale(x, 3.0, out=out), flops=N, bytes=8 * N, dtype="fp32",
                              shape=str(N), impl="acme")
    assert result is out
"""


def _kernel_repository(repo: Path) -> str:
    init(repo)
    return commit(repo, "scale kernel with its suites", {
        "pyproject.toml": PYPROJECT,
        "kernels/__init__.py": OWN, "kernels/scale.py": SCALE,
        "suites/__init__.py": OWN,
        "suites/correctness/__init__.py": "", "suites/correctness/test_scale.py": CORRECTNESS,
        "suites/benchmarks/__init__.py": "", "suites/benchmarks/test_scale_speed.py": BENCHMARKS,
        "service/__init__.py": OWN, "dashboard/__init__.py": OWN,
    }, 1)


def test_a_repository_with_its_own_kernels_suites_service_and_dashboard_uses_the_plugin(tmp_path: Path) -> None:
    from roofwatch.service.core.models import Benchmark, Commit, Measurement, Run, SuiteExecution, TestOutcome

    repo, data = tmp_path / "acme", tmp_path / "data"
    sha = _kernel_repository(repo)
    assert not list(repo.rglob("conftest.py"))
    done = roofwatch(["run", "--repo", str(repo), "--last", "1"], {"ROOFWATCH_DATA_DIR": str(data)}, check=False)

    engine = create_engine(f"sqlite:///{data / 'roofwatch.db'}")
    with Session(engine) as session:
        run, commit_ = session.exec(select(Run, Commit).where(Run.commit_id == Commit.id)).one()
        suites = {s.name: (s.status, s.reason, s.output_tail[-2000:]) for s in session.exec(select(SuiteExecution).where(SuiteExecution.run_id == run.id))}
        outcomes = {o.test_id: o for o in session.exec(select(TestOutcome).where(TestOutcome.run_id == run.id))}
        measured = session.exec(select(Benchmark, Measurement).where(Measurement.benchmark_id == Benchmark.id)).all()
    engine.dispose()

    assert (commit_.sha, run.state) == (sha, "succeeded"), (done.stdout, suites)
    assert {name: status for name, (status, *_) in suites.items()} == {"correctness": "passed", "benchmarks": "passed"}, suites
    assert {o.outcome for o in outcomes.values()} == {"passed"} and len(outcomes) == 3
    fp16 = next(o for test_id, o in outcomes.items() if "fp16" in test_id)
    assert fp16.max_abs_err is not None and fp16.max_rel_err is not None  # recorded through roofwatch.testing
    [(benchmark, measurement)] = measured
    assert (benchmark.name, benchmark.impl, benchmark.dtype, benchmark.shape) == ("test_scale_speed", "acme", "fp32", "65536")
    assert (benchmark.flops, benchmark.bytes) == (65536.0, 524288.0)
    # kernel_benchmark's adaptive host timer took the samples, at least its minimum count.
    assert measurement.n == len(measurement.samples) >= 5 and measurement.median > 0


def test_the_plugin_is_the_pytest11_entry_point_and_loads_without_torch() -> None:
    [plugin] = [ep for ep in entry_points(group="pytest11") if ep.name == "roofwatch"]
    assert plugin.value == "roofwatch.pytest_plugin"
    # Every pytest run in an environment with roofwatch loads the plugin: it must not pay for torch.
    probe = "import sys, roofwatch.pytest_plugin; print(sorted({'torch', 'triton'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_the_sandbox_sees_the_installed_harness_and_nothing_else_of_the_checkout() -> None:
    bubblewrap.check()
    # With an editable install the package lies in the checkout, next to the service and its data.
    probe = (f"import os, roofwatch.pytest_plugin; print(os.path.dirname(roofwatch.__file__), "
             f"os.path.exists({str(ROOT / 'service')!r}), os.path.exists({str(ROOT / 'pyproject.toml')!r}))")
    argv = bubblewrap.command([sys.executable, "-c", probe], bubblewrap.Isolation(devices=()), cwd=Path("/"))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    package = Path(public_api.__file__).parent.resolve()
    assert done.stdout.split() == [str(package), "False", "False"]


def test_the_wheel_carries_the_harness_and_its_entry_point(tmp_path: Path) -> None:
    # What `pip install roofwatch` puts in site-packages, not what the editable install maps.
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], check=True, capture_output=True, timeout=300)
    [wheel] = tmp_path.glob("roofwatch-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        [entry_points_txt] = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        declared = archive.read(entry_points_txt).decode()
    assert {"roofwatch/pytest_plugin.py", "roofwatch/testing.py", "roofwatch/harness.py", "roofwatch/timing.py"} <= names
    assert "[pytest11]\nroofwatch = roofwatch.pytest_plugin" in declared


def test_the_public_correctness_api_is_what_docs_harness_documents() -> None:
    assert set(public_api.__all__) == {
        "GUARD", "INPUT_CANARY", "LAYOUTS", "ErrorStats", "LayoutCase", "Placed", "RoundingStats", "Tolerance",
        "assert_close", "assert_correctly_rounded", "assert_exposes", "assert_guard_intact",
        "assert_within_torch_error", "dtype_name", "error_stats", "guarded", "kernel_store_rounding", "large",
        "layout_cases", "place", "poisoned_output", "randn", "record_errors", "record_rounding", "round_once",
        "shape_id", "tolerance_for", "ulp",
    }
    assert all(getattr(public_api, name).__module__.startswith("roofwatch.")
               for name in public_api.__all__ if name not in ("GUARD", "INPUT_CANARY", "LAYOUTS"))
