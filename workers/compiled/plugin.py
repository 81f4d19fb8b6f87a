"""The pytest plugin behind a ``kind = "compile"`` suite.

The runner copies this package into the suite's scratch folder as ``roofwatch_compiled`` (the
sandbox sees no roofwatch installation) and adds ``-p roofwatch_compiled.plugin
--roofwatch-compiled=FILE`` to the suite's command; outside the sandbox ``-p
roofwatch.workers.compiled.plugin`` works the same. The suite's tests then run with every Triton launch recorded instead of executed
(kernels are compiled, never run: their outputs are garbage, so test outcomes are ignored),
and at the end each distinct specialization is compiled for each target and the artifacts
are written to FILE as JSON::

    {"toolchain": "triton 3.9.0, ptxas 12.9.86", "targets": ["sm_90"], "launches": 53,
     "artifacts": [{"kernel": ..., "specialization": ..., "target": "sm_90", "registers": 168, ...}]}

Any pytest suite works: the tests only have to call the kernels the way they are used.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

import pytest

TARGETS_ENV = "ROOFWATCH_COMPILE_TARGETS"
_STATE = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("roofwatch-compiled", "compile every Triton launch for target GPUs")
    group.addoption("--roofwatch-compiled", metavar="FILE", default=None,
                    help="record Triton launches instead of running them; write the compiled artifacts to FILE")
    group.addoption("--roofwatch-targets", metavar="sm_90,sm_80", default=None,
                    help=f"targets to compile for (default: ${TARGETS_ENV} or sm_90)")


def pytest_configure(config: pytest.Config) -> None:
    output = config.getoption("--roofwatch-compiled")
    if not output:
        return
    # Compiled JITFunctions are what gets recorded; the interpreter would hide them. This runs
    # before any conftest or test module imports a kernel, which is when triton.jit decides.
    os.environ["TRITON_INTERPRET"] = "0"
    from triton.backends.compiler import GPUTarget

    from .launches import LaunchRecorder, recording

    try:  # in the sandbox, the targets module is copied in beside the plugin (compiled.install)
        from .targets import DEFAULT_TARGETS, parse_targets
    except ImportError:  # run from roofwatch's own tree, where it lives with the suite configuration
        from roofwatch.suite_config.targets import DEFAULT_TARGETS, parse_targets

    names = config.getoption("--roofwatch-targets") or os.environ.get(TARGETS_ENV) or ",".join(DEFAULT_TARGETS)
    targets = parse_targets(names)
    # The tests' assertions fail on outputs nobody computed; their tracebacks are noise here.
    config.option.tbstyle = "no"
    stack = ExitStack()
    recorder = stack.enter_context(recording(LaunchRecorder(GPUTarget("cuda", targets[0].capability, 32))))
    config.stash[_STATE] = {"output": Path(output), "targets": targets, "recorder": recorder, "stack": stack,
                            "started": time.perf_counter()}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    state = item.config.stash.get(_STATE, None)
    if state is not None:
        state["recorder"].current_test = item.name
    try:
        return (yield)
    finally:
        if state is not None:
            state["recorder"].current_test = ""


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_STATE, None)
    if state is None:
        return
    state["stack"].close()
    from .toolchain import compile_launch, toolchain_version

    recorder = state["recorder"]
    collected_s = time.perf_counter() - state["started"]
    launches = sorted(recorder.launches.values(), key=lambda launch: (launch.kernel, launch.label(), launch.key))
    labels = _unique_labels(launches)
    artifacts = [compile_launch(launch, labels[launch.key], target, recorder.tests.get(launch.key, []))
                 for launch in launches for target in state["targets"]]
    state["output"].write_text(json.dumps({
        "toolchain": toolchain_version(), "targets": [t.name for t in state["targets"]],
        "launches": len(launches), "collect_s": round(collected_s, 3),
        "compile_s": round(time.perf_counter() - state["started"] - collected_s, 3), "artifacts": artifacts,
    }, indent=1))
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        # The tests ran against kernels that were not executed; only the artifacts count.
        session.exitstatus = pytest.ExitCode.OK


def _unique_labels(launches: list) -> dict[str, str]:
    """Readable labels, with a short digest where two specializations of a kernel read alike
    (they differ in what Triton derived from the arguments: alignment, integers equal to 1)."""
    by_label: dict[tuple[str, str], list[str]] = defaultdict(list)
    for launch in launches:
        by_label[(launch.kernel, launch.label())].append(launch.key)
    labels = {}
    for (_, label), keys in by_label.items():
        for key in keys:
            labels[key] = label if len(keys) == 1 else f"{label} #{key[:6]}"
    return labels
