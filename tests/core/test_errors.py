"""One error tree: every exception roofwatch defines is a RoofwatchError, defined in one of two modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from roofwatch.service.core import errors

ROOT = Path(__file__).resolve().parents[2]
# The tree's root lives on the ground floor (roofwatch.common, which both sides stand on); the rest in
# roofwatch.service.core.errors.
ERROR_MODULES = {ROOT / "roofwatch" / "common" / "errors.py", ROOT / "service" / "core" / "errors.py"}
# Copied into a suite's sandbox, where no roofwatch is installed: these modules import only the
# standard library, Triton and pytest, so their few errors stay local (a suite failure reports them).
STANDALONE = ROOT / "workers" / "compiled"


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_is_a_roofwatch_error(name: str) -> None:
    assert issubclass(getattr(errors, name), errors.RoofwatchError)


def test_old_homes_re_export_the_same_classes() -> None:
    from roofwatch.service.cli.changepoints import CsvHistoryError
    from roofwatch.service.flows.pull_request import PullRequestError
    from roofwatch.service.github.client import GitHubError
    from roofwatch.service.records.ingest import IngestError
    from roofwatch.service.records.triage import TriageError
    from roofwatch.workers.calibrate import CalibrationError

    assert PullRequestError is errors.PullRequestError and issubclass(PullRequestError, errors.RoofwatchError)
    assert (CsvHistoryError, GitHubError, IngestError, TriageError, CalibrationError) == (
        errors.CsvHistoryError, errors.GitHubError, errors.IngestError, errors.TriageError, errors.CalibrationError)


def _exception_classes_outside_error_modules() -> list[str]:
    found = []
    for path in sorted([*ROOT.glob("service/**/*.py"), *ROOT.glob("workers/**/*.py"), *ROOT.glob("roofwatch/common/*.py")]):
        if path in ERROR_MODULES or "migrations" in path.parts or path.is_relative_to(STANDALONE):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            # A private class (``_Unsupported``) is a signal caught in its own module, never shown to anyone.
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_") and any(
                isinstance(base, ast.Name) and (base.id.endswith(("Error", "Exception")))
                for base in node.bases
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    return found


def test_errors_are_defined_in_one_place() -> None:
    assert _exception_classes_outside_error_modules() == []


def test_the_error_root_imports_nothing() -> None:
    tree = ast.parse((ROOT / "roofwatch" / "common" / "errors.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
