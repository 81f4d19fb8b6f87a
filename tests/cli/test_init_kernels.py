"""`roofwatch init` on a Triton kernel library: a narrow suite of the kernels' CPU-runnable tests in Triton's
interpreter, the dependencies setup.py declares, and a kernel_benchmark file — each of which runs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

from support.kernel_library import MARKER, kernel_library
from support.sample_repo import commit
from support.tests_support import pytest_env, roofwatch

from roofwatch.suite_config.external import parse_suites_file
from roofwatch.workers.benchmark_template import BENCHMARK_FILE
from roofwatch.workers.suite_discovery import discover, suites_toml

# The benchmark init wrote, finished as its TODO(roofwatch) lines ask.
FINISHED = """\
    x = torch.randn(rows * cols, device=DEVICE, dtype=DTYPE)
    call = lambda: kernels.scale(x, 2.0)  # noqa: E731
    flops = rows * cols  # one multiply per element
    bytes_moved = 2 * rows * cols * x.element_size()  # read x, write out
"""


def suites_of(text: str) -> dict[str, dict[str, object]]:
    return {suite["name"]: suite for suite in tomllib.loads(text)["tool"]["roofwatch"]["suites"]}


def run_suite(repo: Path, suite: dict[str, object], *extra: str) -> subprocess.CompletedProcess[str]:
    """The suite's command as the worker runs it: in the worktree, with the suite's env."""
    argv = shlex.split(str(suite["command"]))
    argv[0] = sys.executable if argv[0] == "python" else argv[0]  # `python` is the interpreter roofwatch runs under
    env = pytest_env(**{str(k): str(v) for k, v in dict(suite["env"]).items()})  # type: ignore[call-overload]
    return subprocess.run([*argv, "-p", "no:cacheprovider", *extra], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300)


def test_init_gives_a_kernel_library_a_narrow_interpreted_suite_and_a_benchmark_file(
        roofwatch_env: Path, tmp_path: Path) -> None:
    repo = tmp_path / "minikern"
    kernel_library(repo)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data"), "ROOFWATCH_AB_MIN_ROUNDS": "2"}

    done = roofwatch(["init", str(repo), "--triton-interpret"], env)

    text = (repo / "roofwatch-suites.toml").read_text()
    suites = suites_of(text)
    assert list(suites) == ["kernel-tests", "kernel-benchmarks"]
    tests, benchmarks = suites["kernel-tests"], suites["kernel-benchmarks"]
    # Only the kernel's tests a CPU runs; the CUDA-only ones named with why, the other one counted.
    assert tests["command"] == ("python -m pytest test/test_layers.py test/test_scale.py -q --benchmark-skip "
                                "--continue-on-collection-errors --roofwatch-triton-compat")
    assert "# left out, CUDA-only: test/test_scale_cuda.py: hard-codes a CUDA device (line 7) and has no CPU path" in text
    assert "# left out, CUDA-only: test/test_backend_gpu.py: every test skips without CUDA (line 6)" in text
    assert "1 test file(s) that reach no kernel" in text
    assert tests["env"] == benchmarks["env"] == {"PYTHONPATH": "src", "TRITON_INTERPRET": "1"}
    assert benchmarks["command"] == f"python -m pytest {BENCHMARK_FILE} -q --benchmark-only"
    # setup.py declares torch and triton (installed here): no environment, no setup, nothing "undeclared".
    assert "setup" not in tests and "environment" not in tests and "NOTE" not in text
    assert "imported but neither installed nor declared" not in done.stdout
    assert "Triton kernels: 1 module(s); their tests a CPU can run: 2 file(s)" in done.stdout
    assert not any(p.name == MARKER for p in tmp_path.rglob("*"))  # setup.py was read, never run

    # The suites run as written: the tests pass in the interpreter, the benchmark skips until written.
    junit = tmp_path / "junit.xml"
    ran = run_suite(repo, tests, f"--junitxml={junit}")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ET.parse(junit).getroot().find("testsuite").get("tests") == "2"  # type: ignore[union-attr]
    skipped = run_suite(repo, benchmarks, "-rs")
    assert skipped.returncode == 0 and "1 skipped" in skipped.stdout, skipped.stdout + skipped.stderr
    assert "write its call (TODO(roofwatch)" in skipped.stdout

    # Committed as written (its benchmarks skip), then finished as the file says; `roofwatch run` with the
    # suites file measures both commits.
    unfinished = commit(repo, "roofwatch benchmarks, as init wrote them", {}, 2)
    bench = (repo / BENCHMARK_FILE).read_text()
    todo = [line for line in bench.splitlines() if "= None  # TODO(roofwatch)" in line]
    assert len(todo) == 3 and "import minikern.ops.scale as kernels" in bench and "scale(x, alpha)" in bench
    for line in todo:
        bench = bench.replace(line + "\n", "")
    bench = bench.replace("    if call is None:", FINISHED + "    if call is None:")
    finished = commit(repo, "roofwatch benchmarks: the scale kernel", {BENCHMARK_FILE: bench}, 3)
    rows = json.loads(roofwatch(["run", "--repo", str(repo), "--suites", str(repo / "roofwatch-suites.toml"),
                                 "--rev", unfinished, "--rev", finished, "--format", "json"], env).stdout)
    assert [(row["sha"], row["state"], row["passed"], row["failed"]) for row in rows] == [
        (unfinished, "succeeded", 2, 0), (finished, "succeeded", 2, 0)], rows
    assert rows[0]["benchmarks"] == 0 and rows[1]["benchmarks"] >= 1, rows


def test_a_declared_import_the_interpreter_lacks_builds_the_commit_s_environment_with_its_extra(tmp_path: Path) -> None:
    repo = tmp_path / "minikern"
    kernel_library(repo)
    (repo / "test" / "test_testkit.py").write_text(
        "import minikern_testkit\nimport nowhere_declared\n\nfrom minikern import scale\n\n"
        "def test_with_kit():\n    assert minikern_testkit and scale\n")

    found = discover(repo)
    text = suites_toml(found, interpret=True)

    assert found.install == ["minikern-testkit>=1.2"] and found.extras == ["test"]  # from setup.py's extras_require
    assert found.unresolved == ["nowhere_declared"]
    stored = parse_suites_file(text)
    assert all(s.environment is not None and s.environment.project == ".[test]" for s in stored.suites)
    assert all(s.setup is None for s in stored.suites)
    # The note says what to do with what is there; no `setup` line to point at.
    note = text[text.index("# NOTE"):]
    assert "'nowhere_declared'" in note and "`environment`" in note and "setup`" not in note


def test_on_a_gpu_the_kernels_compile_and_a_second_init_keeps_the_benchmark_file(tmp_path: Path) -> None:
    repo = tmp_path / "minikern"
    kernel_library(repo)
    env = {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}
    roofwatch(["init", str(repo), "--no-triton-interpret"], env)
    first = (repo / BENCHMARK_FILE).read_text()

    # A second init sees the kernel_benchmark file as the repository's benchmarks and leaves it alone.
    again = roofwatch(["init", str(repo), "--force", "--no-triton-interpret"], env)

    suites = suites_of((repo / "roofwatch-suites.toml").read_text())
    assert list(suites) == ["benchmarks", "kernel-tests"] and (repo / BENCHMARK_FILE).read_text() == first
    assert suites["kernel-tests"]["env"] == {"PYTHONPATH": "src"}  # no TRITON_INTERPRET
    assert "--roofwatch-triton-compat" not in str(suites["kernel-tests"]["command"])
    assert "wrote roofwatch_benchmarks" not in again.stdout
