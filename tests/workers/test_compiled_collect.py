"""Compile suites end to end: real Triton compiles for sm_90 on a CPU-only machine, in the sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.sample_repo import commit, init
from support.tests_support import pytest_env
from support.triton_repo import build_history

from roofwatch.common.envelope import CompiledArtifactRecord, DeviceInfo, Envelope, SuiteResult
from roofwatch.common.jobs import Job
from roofwatch.workers.compiled.artifacts_file import parse_compiled_json
from roofwatch.workers.runner import run_job

ROOT = Path(__file__).resolve().parents[2]
DEVICE = DeviceInfo(device_class="CPU test", fingerprint="test")


def run(tmp_path: Path, repo: Path, sha: str, data: str = "data") -> Envelope:
    job = Job(run_id=1, idempotency_key="run-1", repository="acme/tiles", clone_url=str(repo), sha=sha,
              data_dir=str(tmp_path / data))
    return run_job(job, DEVICE)


def compiled(envelope: Envelope) -> SuiteResult:
    [suite] = [s for s in envelope.suites if s.kind == "compile"]
    return suite


def by_kernel(artifacts: list[CompiledArtifactRecord]) -> dict[str, CompiledArtifactRecord]:
    return {a.kernel.rsplit(".", 1)[-1]: a for a in artifacts}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    repo = tmp_path_factory.mktemp("tiles") / "source"
    return repo, build_history(repo)


def test_every_launched_kernel_is_compiled_for_sm90(tmp_path: Path, history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    envelope = run(tmp_path, repo, shas["base"])
    suite = compiled(envelope)
    assert (envelope.status, suite.status, suite.reason) == ("succeeded", "passed", "")
    kernels = by_kernel(suite.artifacts)
    assert set(kernels) == {"_matmul_kernel", "_scale_kernel"}
    matmul = kernels["_matmul_kernel"]
    assert matmul.target == "sm_90" and matmul.status == "compiled"
    assert matmul.specialization == "bf16, BLOCK_M=64 BLOCK_N=64 BLOCK_K=64, w4 s3"
    assert matmul.registers and matmul.registers > 0
    assert matmul.shared_bytes and matmul.shared_bytes > 0  # the pipelined tiles live in shared memory
    assert matmul.instructions.get("wgmma", 0) > 0  # Hopper tensor cores for a bf16 tl.dot
    assert len(matmul.sass_hash) == 64 and matmul.toolchain.startswith("triton ")
    scale = kernels["_scale_kernel"]
    assert scale.specialization == "fp32, BLOCK=1024, w4 s3"
    assert matmul.tests == ["test_matmul"] and scale.tests == ["test_scale"]
    assert scale.instructions["global_load"] > 0 and scale.instructions["fp32"] > 0
    assert "wgmma" not in scale.instructions


def test_hashes_are_stable_across_runs_and_comment_only_commits(
        tmp_path: Path, history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    # Separate data dirs: separate homes, so the second run cannot reuse the first one's Triton cache.
    first = by_kernel(compiled(run(tmp_path, repo, shas["base"], "one")).artifacts)
    again = by_kernel(compiled(run(tmp_path, repo, shas["base"], "two")).artifacts)
    commented = by_kernel(compiled(run(tmp_path, repo, shas["comment"], "two")).artifacts)
    for name in first:
        assert first[name].sass_hash == again[name].sass_hash == commented[name].sass_hash
        assert first[name].registers == commented[name].registers


def test_a_bigger_tile_shows_in_registers_and_shared_memory(
        tmp_path: Path, history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    before = by_kernel(compiled(run(tmp_path, repo, shas["base"])).artifacts)["_matmul_kernel"]
    after = by_kernel(compiled(run(tmp_path, repo, shas["bigger"])).artifacts)["_matmul_kernel"]
    assert after.specialization == "bf16, BLOCK_M=128 BLOCK_N=128 BLOCK_K=64, w4 s3"
    assert after.sass_hash != before.sass_hash
    assert after.registers > before.registers  # type: ignore[operator]
    assert after.shared_bytes > before.shared_bytes  # type: ignore[operator]


def test_too_much_shared_memory_fails_with_the_reason(tmp_path: Path, history: tuple[Path, dict[str, str]]) -> None:
    repo, shas = history
    envelope = run(tmp_path, repo, shas["too_big"])
    suite = compiled(envelope)
    assert (envelope.status, suite.status) == ("failed", "failed")
    matmul = by_kernel(suite.artifacts)["_matmul_kernel"]
    assert matmul.status == "failed"
    assert "out of resource: shared memory" in matmul.reason and "Hardware limit: 232448" in matmul.reason
    assert "_matmul_kernel" in suite.reason and "out of resource: shared memory" in suite.reason
    assert by_kernel(suite.artifacts)["_scale_kernel"].status == "compiled"


def test_a_repository_without_triton_kernels_compiles_nothing_and_passes(tmp_path: Path) -> None:
    repo = tmp_path / "plain"
    init(repo)
    sha = commit(repo, "Plain Python", {
        "pyproject.toml": '[[tool.roofwatch.suites]]\nname = "compiled"\nkind = "compile"\n'
                          'command = "python -m pytest checks -q -p no:cacheprovider"\n',
        "checks/test_plain.py": "def test_sum():\n    assert sum([1, 2]) == 3\n"}, 1)
    suite = compiled(run(tmp_path, repo, sha))
    assert (suite.status, suite.artifacts, suite.reason) == ("passed", [], "")


def test_unknown_target_is_a_config_error(tmp_path: Path) -> None:
    repo = tmp_path / "bad"
    init(repo)
    sha = commit(repo, "Bad target", {
        "pyproject.toml": '[[tool.roofwatch.suites]]\nname = "compiled"\nkind = "compile"\n'
                          'command = "python -m pytest"\ntargets = ["sm_91"]\n'}, 1)
    envelope = run(tmp_path, repo, sha)
    assert envelope.status == "errored" and "unknown compile target 'sm_91'" in envelope.reason


def _compile_own(tmp_path: Path, name: str) -> dict[str, CompiledArtifactRecord]:
    """roofwatch's own matmul and copy benchmarks under the compile plugin, with a cache of their own."""
    output = tmp_path / f"{name}.json"
    env = pytest_env(TRITON_CACHE_DIR=str(tmp_path / f"cache-{name}"), HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/benchmarks/test_matmul_attention.py::test_matmul",
         "suites/benchmarks/test_elementwise.py::test_copy", "-q", "-p", "no:cacheprovider", "--benchmark-disable",
         "-p", "roofwatch.workers.compiled.plugin", f"--roofwatch-compiled={output}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {f"{a.kernel}[{a.specialization}] {a.target}": a for a in parse_compiled_json(output)}


def test_roofwatch_kernels_compile_for_sm90_with_stable_hashes(tmp_path: Path) -> None:
    first, second = _compile_own(tmp_path, "one"), _compile_own(tmp_path, "two")
    kernels = {a.kernel for a in first.values()}
    assert kernels == {"kernels.matmul._matmul_kernel", "kernels.copy._copy_kernel"}
    # Every Hopper autotune config of the bf16 GEMM that survives the kernel's own pruning, not one winner.
    assert sum(a.kernel.endswith("_matmul_kernel") for a in first.values()) == 8
    for key, artifact in first.items():
        assert artifact.status == "compiled" and artifact.target == "sm_90", artifact.reason
        assert artifact.registers and artifact.registers > 0
        assert second[key].sass_hash == artifact.sass_hash
    assert all(a.instructions.get("wgmma") for a in first.values() if a.kernel.endswith("_matmul_kernel"))
