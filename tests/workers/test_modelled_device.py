"""``[tool.roofwatch.device]``: a repository measured on the device it models, with that device's roofs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.sample_repo import CHECKS, GOOD_KERNEL, commit, init

from roofwatch.common.envelope import DeviceInfo, Envelope
from roofwatch.common.errors import SuiteConfigError
from roofwatch.common.jobs import Job
from roofwatch.workers import modelled_device
from roofwatch.workers.runner import run_job

HOST = DeviceInfo(device_class="CPU Example 9000", fingerprint="f" * 32, hostname="ci-7", torch_version="2.13.0")
MODEL = {"name": "demo accelerator", "bandwidth": 2.5e8, "flops": {"fp32": 1.0e9}}


def _doc(device: Any) -> dict[str, Any]:
    return {"tool": {"roofwatch": {"device": device}}}


def test_a_declared_device_is_read() -> None:
    model = modelled_device.declared(_doc(MODEL))
    assert model is not None
    assert (model.device_class, model.bandwidth, model.flops) == ("demo accelerator (modelled)", 2.5e8, {"fp32": 1e9})
    assert modelled_device.declared({"tool": {"roofwatch": {"min_effect": 0.02}}}) is None
    assert modelled_device.declared({}) is None


@pytest.mark.parametrize(("device", "message"), [
    ({**MODEL, "bandwidth": 0}, "bandwidth: Input should be greater than 0"),
    ({**MODEL, "bandwidth": float("inf")}, "finite"),
    ({**MODEL, "flops": {}}, "flops"),
    ({**MODEL, "flops": {"fp33": 1e9}}, "unknown dtype 'fp33'"),
    ({**MODEL, "flops": {"fp32": -1.0}}, "flops.fp32 must be a positive"),
    ({**MODEL, "name": ""}, "name"),
    ({**MODEL, "peak": 3}, "peak: Extra inputs are not permitted"),
    ("a string", "valid dictionary"),
])
def test_a_device_that_cannot_be_a_roof_is_refused_by_name(device: Any, message: str) -> None:
    with pytest.raises(SuiteConfigError, match=r"\[tool.roofwatch.device\]") as refused:
        modelled_device.declared(_doc(device))
    assert message in str(refused.value)


def test_runs_on_a_model_are_stored_under_the_models_name_roofs_and_own_epoch() -> None:
    model = modelled_device.declared(_doc(MODEL))
    assert model is not None
    device = modelled_device.on_model(HOST, model)
    assert device.device_class == "demo accelerator (modelled)"
    assert (device.peak_bandwidth, device.peak_flops, device.peaks_source) == (2.5e8, {"fp32": 1e9}, "modelled")
    assert device.hostname == "ci-7" and device.torch_version == "2.13.0"
    assert device.fingerprint != HOST.fingerprint and len(device.fingerprint) == 32
    assert modelled_device.on_model(HOST, model).fingerprint == device.fingerprint  # stable
    faster = modelled_device.declared(_doc({**MODEL, "bandwidth": 5e8}))
    other_host = HOST.model_copy(update={"fingerprint": "e" * 32})
    assert faster is not None
    assert modelled_device.on_model(HOST, faster).fingerprint != device.fingerprint  # a new model: a new epoch
    assert modelled_device.on_model(other_host, model).fingerprint != device.fingerprint  # a new host too


def _tree(tmp_path: Path, pyproject: str) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "pyproject.toml").write_text(pyproject)
    return tree


COMMIT_DEVICE = '[tool.roofwatch.device]\nname = "commit model"\nbandwidth = 1e9\nflops = { fp32 = 2e9 }\n'
STORED_DEVICE = '[tool.roofwatch.device]\nname = "stored model"\nbandwidth = 3e9\nflops = { bf16 = 4e9 }\n'


@pytest.mark.parametrize(("pyproject", "stored", "expected"), [
    ("[project]\nname = 'x'\n", "", "CPU Example 9000"),  # no model: the host
    (COMMIT_DEVICE, "", "commit model (modelled)"),
    (COMMIT_DEVICE, STORED_DEVICE, "stored model (modelled)"),  # the stored config wins, as for min_effect
    ("[project]\nname = 'x'\n", STORED_DEVICE, "stored model (modelled)"),
    (COMMIT_DEVICE, "[[tool.roofwatch.suites]]\nname='b'\nkind='benchmark'\ncommand='true'\n", "commit model (modelled)"),
])
def test_the_device_a_run_is_stored_under(tmp_path: Path, pyproject: str, stored: str, expected: str) -> None:
    assert modelled_device.device_for(HOST, _tree(tmp_path, pyproject), stored).device_class == expected


CORRECTNESS = ('\n[[tool.roofwatch.suites]]\nname = "correctness"\nkind = "correctness"\n'
               'command = "python -m pytest checks -q -p no:cacheprovider"\n')


def _run(tmp_path: Path, pyproject: str) -> Envelope:
    """``run_job`` on a real git repository whose correctness suite passes, in the sandbox."""
    repo = tmp_path / "source"
    init(repo)
    sha = commit(repo, "Add kernel", {"kernel.py": GOOD_KERNEL, "checks/test_kernel.py": CHECKS,
                                      "pyproject.toml": pyproject + CORRECTNESS}, 1)
    job = Job(run_id=1, idempotency_key="k", repository="acme/model", clone_url=str(repo), sha=sha,
              data_dir=str(tmp_path / "data"))
    return run_job(job, HOST)


def test_a_run_of_a_modelled_repository_carries_the_model_in_its_envelope(tmp_path: Path) -> None:
    envelope = _run(tmp_path, COMMIT_DEVICE)
    assert envelope.status == "succeeded", (envelope.reason, [s.reason for s in envelope.suites])
    assert envelope.device.device_class == "commit model (modelled)"
    assert (envelope.device.peak_bandwidth, envelope.device.peaks_source) == (1e9, "modelled")


def test_a_malformed_model_errors_the_run_with_the_reason(tmp_path: Path) -> None:
    envelope = _run(tmp_path, '[tool.roofwatch.device]\nname = "m"\nbandwidth = -1\nflops = { fp32 = 1e9 }\n')
    assert envelope.status == "errored"
    assert "[tool.roofwatch.device] bandwidth" in envelope.reason
