"""The rounds plugin in a real pytest process: which benchmarks run, in which order, and the record of it."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from roofwatch.workers.rounds.install import Selection, install_plugin, plugin_args, read_calibration, read_order

TESTS = {
    "test_a.py": "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2, 3])\ndef test_one(n):\n    pass\n\n\n"
                 "def test_two():\n    pass\n",
    "test_b.py": "def test_three():\n    pass\n\n\ndef test_four():\n    pass\n",
}


def run(tmp_path: Path, selection: Selection, *extra: str) -> tuple[list[str], list[str]]:
    """(node ids pytest ran, node ids the plugin recorded) for ``selection``."""
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    for name, text in TESTS.items():
        (tree / name).write_text(text)
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=tmp_path))
    args, record = plugin_args(selection, scratch)
    root = install_plugin(scratch)
    done = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-p", "no:randomly",
                           *args, *extra], cwd=tree, capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode in (0, 5), done.stdout + done.stderr
    ran = [line.split(" ")[0] for line in done.stdout.splitlines() if " PASSED" in line]
    return ran, read_order(record)


def test_a_keep_list_runs_only_those_benchmarks_by_name(tmp_path: Path) -> None:
    ran, recorded = run(tmp_path, Selection(frozenset({"test_one[2]", "test_four"}), None))
    assert sorted(ran) == ["test_a.py::test_one[2]", "test_b.py::test_four"] and recorded == ran


def test_a_seed_gives_one_order_and_another_seed_another(tmp_path: Path) -> None:
    first, recorded = run(tmp_path, Selection(None, 7))
    again, _ = run(tmp_path, Selection(None, 7))
    assert first == again == recorded and len(first) == 6
    orders = {tuple(run(tmp_path, Selection(None, seed))[0]) for seed in (1, 2, 3, 4, 5)}
    assert len(orders) > 1
    for order in orders:  # a module's tests stay together: its fixtures are set up once
        modules = [node.split("::")[0] for node in order]
        assert modules == sorted(modules, key=modules.index) and len(set(modules)) == 2
        assert modules.index("test_b.py") in (0, 4)


def test_the_suites_own_deselection_stands(tmp_path: Path) -> None:
    ran, _ = run(tmp_path, Selection(frozenset({"test_two", "test_three"}), 3), "-k", "not three")
    assert ran == ["test_a.py::test_two"]


def test_a_record_that_is_not_the_plugins_reads_as_nothing(tmp_path: Path) -> None:
    record = tmp_path / "rounds.json"
    for text in ("not json", json.dumps({"order": "x"}), json.dumps({"order": [1, "a::b"]})):
        record.write_text(text)
        assert read_order(record) in ([], ["a::b"])
    (tmp_path / "link.json").symlink_to(record)
    assert read_order(tmp_path / "link.json") == []


# A repository of two benchmark modules, a lazy import, and Triton kernels run by the interpreter.
RAN_TREE = {
    "pkg/__init__.py": "",
    "pkg/a.py": "def a():\n    return 1\n",
    "pkg/b.py": "from pkg import util\n\n\ndef b():\n    return util.helper()\n",
    "pkg/util.py": "def helper():\n    return 2\n",
    "pkg/late.py": "def late():\n    return 3\n",
    "pkg/kern.py": '''\
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, factor, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=2)], key=["n"])
@triton.jit
def _tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def scale(x):
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, 2.0, x.numel(), BLOCK=256, num_warps=8)
    return out


def tuned(x):
    out = torch.empty_like(x)
    _tuned_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel())
    return out
''',
    "bench/conftest.py": "import os\n\nos.environ['TRITON_INTERPRET'] = '1'\n",
    "bench/test_a.py": "from pkg.a import a\n\n\ndef test_a(benchmark):\n    benchmark(a)\n\n\ndef test_plain():\n    a()\n",
    "bench/test_b.py": "import pkg.b\n\n\ndef test_b(benchmark):\n    benchmark(pkg.b.b)\n",
    # Imported by name at run time: no import statement names it, the modules new after the test do.
    "bench/test_lazy.py": "import importlib\n\n\ndef test_lazy(benchmark):\n"
                          "    benchmark(importlib.import_module('pkg.late').late)\n",
    "bench/test_k.py": "import torch\n\nfrom pkg.kern import scale, tuned\n\nX = torch.randn(1000)\n\n\n"
                       "def test_scale(benchmark):\n    benchmark.pedantic(scale, (X,), rounds=40)\n\n\n"
                       "def test_tuned(benchmark):\n    benchmark.pedantic(tuned, (X,), rounds=2)\n",
}


def test_each_benchmark_records_the_files_it_imported_and_the_kernels_it_launched(tmp_path: Path) -> None:
    from support.tests_support import pytest_env

    from roofwatch.workers.rounds.install import read_record

    tree = tmp_path / "tree"
    for name, text in RAN_TREE.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    args, record = plugin_args(Selection(None, 5), scratch, tree)
    done = subprocess.run([sys.executable, "-m", "pytest", "bench", "-q", "-p", "no:cacheprovider",
                           "--benchmark-min-rounds=2", "--benchmark-max-time=0.001", *args], cwd=tree,
                          capture_output=True, text=True,
                          env=pytest_env(PYTHONPATH=f"{tree}:{install_plugin(scratch)}"))
    assert done.returncode == 0, done.stdout + done.stderr
    ran = read_record(record).ran
    assert sorted(ran) == ["test_a", "test_b", "test_lazy", "test_scale", "test_tuned"]  # benchmarks only
    files = {name: sorted(found["files"]) for name, found in ran.items()}
    # Each module's own code, never the other module's, though pytest imported both before either ran.
    assert files["test_a"] == ["bench/conftest.py", "bench/test_a.py", "pkg/__init__.py", "pkg/a.py"]
    assert files["test_b"] == ["bench/conftest.py", "bench/test_b.py", "pkg/__init__.py", "pkg/b.py", "pkg/util.py"]
    assert files["test_lazy"] == ["bench/conftest.py", "bench/test_lazy.py", "pkg/__init__.py", "pkg/late.py"]
    assert files["test_scale"] == ["bench/conftest.py", "bench/test_k.py", "pkg/__init__.py", "pkg/kern.py"]
    assert ran["test_a"]["files"]["pkg/a.py"] == hashlib.sha256(RAN_TREE["pkg/a.py"].encode()).hexdigest()[:16]
    assert all(found["complete"] for found in ran.values())
    (launch,) = ran["test_scale"]["kernels"]  # forty rounds: one distinct launch
    assert {k: v for k, v in launch.items() if k != "source"} == {
        "kernel": "pkg.kern._scale_kernel", "BLOCK": 256, "num_warps": 8, "dtypes": "float32"}
    (tuned,) = ran["test_tuned"]["kernels"]
    assert tuned["kernel"] == "pkg.kern._tuned_kernel" and tuned["BLOCK"] == 128 and tuned["num_warps"] == 2
    assert tuned["autotuned"] == "BLOCK=128 num_warps=2 num_ctas=1 num_stages=3"
    assert ran["test_a"]["kernels"] == []


def test_a_record_of_what_ran_is_read_within_its_bounds(tmp_path: Path) -> None:
    from roofwatch.workers.rounds import ran
    from roofwatch.workers.rounds.install import read_record

    path = tmp_path / "rounds.json"
    files = {f"f{i}.py": "h" for i in range(ran.FILES_LIMIT + 5)}
    path.write_text(json.dumps({"order": [], "ran": {
        "big": {"files": files, "kernels": [], "complete": True},
        "odd": {"files": {"a.py": 1}, "kernels": [{"kernel": "k", "nested": {"x": 1}, "num_warps": 4}, "junk"],
                "complete": True},
        "not_a_record": [1, 2], "no_kernels": {"files": {}},
    }}))
    found = read_record(path).ran
    assert sorted(found) == ["big", "odd"]
    assert len(found["big"]["files"]) == ran.FILES_LIMIT and found["big"]["complete"] is False
    assert found["odd"] == {"files": {}, "kernels": [{"kernel": "k", "num_warps": 4}], "complete": False}


# Each call of the benchmarked function leaves a line in calls.txt: how many calls a process made is
# then a count, not a timing. 2 ms a call is far above pytest-benchmark's calibration target.
COUNTED = ("import time\n\n\ndef work():\n    with open('calls.txt', 'a') as f:\n        f.write('.')\n"
           "    time.sleep(0.002)\n\n\ndef test_counted(benchmark):\n    benchmark(work)\n")
FIXED_ROUNDS = ["--benchmark-min-rounds=5", "--benchmark-max-time=0.000001", "--benchmark-disable-gc"]


def measure(tmp_path: Path, selection: Selection, *extra: str) -> tuple[int, dict[str, tuple[int, float]]]:
    """(calls the process made, the calibration it recorded) for one benchmark process."""
    tree = tmp_path / "counted"
    tree.mkdir(exist_ok=True)
    (tree / "test_counted.py").write_text(COUNTED)
    (tree / "calls.txt").write_text("")
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=tmp_path))
    args, record = plugin_args(selection, scratch)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           *FIXED_ROUNDS, *args, *extra], cwd=tree, capture_output=True, text=True,
                          env={"PYTHONPATH": str(install_plugin(scratch)), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    return len((tree / "calls.txt").read_text()), read_calibration(record)


def test_a_later_round_reuses_the_first_rounds_calibration(tmp_path: Path) -> None:
    # Round one calibrates (one call finds that one iteration is enough), times 5 rounds, then makes
    # the one untimed call pytest-benchmark returns the result of.
    calls, calibration = measure(tmp_path, Selection(None, 1))
    (iterations, seconds), = calibration.values()
    assert calls == 1 + 5 + 1 and list(calibration) == ["test_counted"] and iterations == 1 and seconds >= 0.002
    # A later round given that calibration does not calibrate again.
    calls, again = measure(tmp_path, Selection(None, 2, calibration))
    assert calls == 5 + 1 and again == {}
    # With warm-up on, pytest-benchmark's calibration warms up as well (up to 4 calls, within the max
    # time) before the warm-up rounds proper (4 calls): a reused calibration skips the first, never
    # the second.
    warm = ["--benchmark-warmup=on", "--benchmark-warmup-iterations=4"]
    calls, _ = measure(tmp_path, Selection(None, 3), *warm)
    assert calls >= 1 + 4 + 5 + 1
    calls, _ = measure(tmp_path, Selection(None, 4, calibration), *warm)
    assert calls == 4 + 5 + 1


def test_a_calibration_record_that_is_not_the_plugins_reads_as_nothing(tmp_path: Path) -> None:
    record = tmp_path / "rounds.json"
    for garbage in ({"calibration": [1, 2]}, {"calibration": {"a": [0, 1.0]}}, {"calibration": {"a": [1, -1]}},
                    {"calibration": {"a": [1.5, 1.0]}}, {"calibration": {"a": [1, float("inf")]}},
                    {"calibration": {"a": [10**12, 1.0]}}, {"calibration": {"a": "1"}}):
        record.write_text(json.dumps(garbage))
        assert read_calibration(record) == {}, garbage
    record.write_text(json.dumps({"calibration": {"a": [3, 0.5], "b": [0, 1]}}))
    assert read_calibration(record) == {"a": (3, 0.5)}
