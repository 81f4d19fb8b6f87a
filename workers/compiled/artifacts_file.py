"""Read the artifacts file a compile suite wrote, and decide the suite's status from it."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from roofwatch.common.envelope import CompiledArtifactRecord
from roofwatch.common.errors import ResultFileError
from roofwatch.result_files.suite_results import load_json, read_result


def parse_compiled_json(path: Path) -> list[CompiledArtifactRecord]:
    if not path.is_file() and not path.is_symlink():
        raise ResultFileError("the compile suite wrote no artifacts file (did its pytest load roofwatch.workers.compiled.plugin?)")
    data = load_json(read_result(path, "artifacts file"), "artifacts file")
    try:
        return [CompiledArtifactRecord.model_validate(item) for item in data["artifacts"]]
    except (KeyError, TypeError, ValidationError) as exc:
        raise ResultFileError(f"artifacts file is not valid: {exc}") from exc


def failure_summary(artifacts: list[CompiledArtifactRecord]) -> str:
    """'' when every specialization compiled for every target; otherwise the first compiler reasons."""
    failed = [a for a in artifacts if a.status == "failed"]
    if not failed:
        return ""
    lines = [f"{a.kernel}[{a.specialization}] {a.target}: {a.reason}" for a in failed[:5]]
    more = f"\n... and {len(failed) - 5} more" if len(failed) > 5 else ""
    return f"{len(failed)} kernel specialization(s) failed to compile:\n" + "\n".join(lines) + more
