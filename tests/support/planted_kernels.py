"""Machinery for the planted-bug tests: a correctness suite must catch the bug it exists for.

A plant is a small change (``find`` replaced by ``replace``, exactly once) to one file of a copy
of ``kernels/`` in a temp dir. Selected cases of the repository's suite files then run against
that copy in a subprocess under the Triton interpreter and must fail with a message naming the
error; the same cases against an unmodified copy must pass, so a failure is the plant's doing
and not the harness's. The real tree is never touched.

How the copy wins the import: pytest runs from the temp dir (``python -m`` puts the working
directory first on ``sys.path``) with ``--import-mode=append``, so the repository root it adds
for the ``suites`` package goes last instead of first, and the editable install's finder
comes after ``sys.path``. The real suite's invocation is untouched. (``run_selected`` instead
copies ``suites/`` into the tree as well and runs it from there.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from support.tests_support import pytest_env

__all__ = ["ROOT", "TIMEOUT_S", "Plant", "SelectedPlant", "assert_caught", "assert_passes", "case_name",
           "finish_cases", "planted_tree", "run_cases", "run_selected", "start_cases"]

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600


class Edit(Protocol):
    """What ``planted_tree`` needs of a plant: one replacement in ``kernels/<module>``."""

    @property
    def module(self) -> str: ...

    @property
    def find(self) -> str: ...

    @property
    def replace(self) -> str: ...


@dataclass(frozen=True)
class Plant:
    """A bug: ``find`` replaced by ``replace`` once in ``kernels/<module>``, caught by ``case``."""

    name: str
    module: str
    find: str
    replace: str
    case: str  # node id, relative to the repository root, of a case that must catch it
    message: str  # what the failure must say
    batch: int = 0  # plants of one batch may share a tree and a subprocess


@dataclass(frozen=True)
class SelectedPlant:
    """A bug in ``kernels/<module>``; the cases ``select`` (a ``-k`` expression) picks from
    ``suite`` must then fail with ``message``.

    With ``fails_only`` set, every failing case's id contains it: the bug shows exactly where
    the suite's inputs were designed to expose it.
    """

    module: str
    find: str
    replace: str
    suite: str
    select: str
    message: str
    fails_only: str | None = None


def planted_tree(dest: Path, plants: Iterable[Edit], *, with_suites: bool = False) -> Path:
    """``dest`` holding a copy of ``kernels/`` (and of ``suites/`` when ``with_suites``), with
    every plant in ``plants`` applied."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "kernels", dest / "kernels", ignore=ignore)
    if with_suites:
        shutil.copytree(ROOT / "suites", dest / "suites", ignore=ignore)
    for plant in plants:
        path = dest / "kernels" / plant.module
        source = path.read_text()
        # A plant that no longer matches the kernel would make the suite pass for the wrong
        # reason; say so instead.
        assert source.count(plant.find) == 1, f"kernels/{plant.module} no longer contains {plant.find!r} exactly once"
        path.write_text(source.replace(plant.find, plant.replace))
    return dest


def _interpreter_env(tree: Path, interpret: bool = True) -> dict[str, str]:
    # cwd first on sys.path (python -m) and PYTHONPATH: the copy's kernels shadow the real ones.
    # The repository root next, so the suites import this checkout's roofwatch even where the
    # environment's editable install points at another checkout.
    return pytest_env(TRITON_INTERPRET="1" if interpret else "0", PYTHONPATH=os.pathsep.join([str(tree), str(ROOT)]))


def start_cases(tree: Path, cases: Sequence[str], junit: Path, *, interpret: bool = True) -> subprocess.Popen[str]:
    """Start pytest on ``cases`` (node ids relative to the repository root) against the
    ``kernels`` in ``tree``, writing a junit report to ``junit``; compiled for the GPU when not
    ``interpret``."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *(str(ROOT / case) for case in cases), f"--rootdir={ROOT}",
         "--import-mode=append", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=tree, env=_interpreter_env(tree, interpret), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )


def finish_cases(process: subprocess.Popen[str], junit: Path, expected: int) -> dict[str, ET.Element]:
    """Wait for ``process``; its junit testcases by name, which must number ``expected``."""
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
        raise AssertionError(f"pytest did not finish in {TIMEOUT_S} s:\n{output[-4000:]}") from None
    assert junit.exists(), f"pytest wrote no report (exit {process.returncode}):\n{output[-4000:]}"
    cases = {case.get("name", ""): case for case in ET.parse(junit).iter("testcase")}
    assert len(cases) == expected, f"expected {expected} cases, ran {sorted(cases)}:\n{output[-4000:]}"
    return cases


def run_cases(tree: Path, junit: Path, plants: Sequence[Plant]) -> dict[str, ET.Element]:
    """Run ``plants``' cases against the ``kernels`` in ``tree``; testcases by name."""
    return finish_cases(start_cases(tree, [plant.case for plant in plants], junit), junit, len(plants))


def run_selected(tree: Path, suites: Sequence[str], select: str) -> subprocess.CompletedProcess[str]:
    """Run the cases of ``suites`` (paths in ``tree``) that ``select`` picks, from ``tree``."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *suites, "-q", "-rf", "-p", "no:cacheprovider", "-k", select],
        cwd=tree, env=_interpreter_env(tree), capture_output=True, text=True, timeout=TIMEOUT_S,
    )


def case_name(plant: Plant) -> str:
    """The junit testcase name of ``plant``'s case."""
    return plant.case.rpartition("::")[2]


def assert_passes(plant: Plant, results: dict[str, ET.Element]) -> None:
    """``plant``'s case passed in ``results`` (a run on unmodified kernels)."""
    case = results[case_name(plant)]
    problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
    assert not problems, f"{plant.case} does not pass on the unmodified kernels: {problems[0].get('message')}"


def assert_caught(plant: Plant, results: dict[str, ET.Element]) -> None:
    """``plant``'s case failed in ``results`` (a run with the plant), saying ``plant.message``."""
    failure = results[case_name(plant)].find("failure")
    assert failure is not None, f"the suite missed the planted bug {plant.name!r}: {plant.case} passed"
    report = f"{failure.get('message', '')}\n{failure.text or ''}"
    assert plant.message in report, f"{plant.case} failed, but not with {plant.message!r}:\n{report[-2000:]}"
