"""Each limit on what roofwatch reads is one number: the one in code is the one docs/security.md
and the README state."""

from __future__ import annotations

from pathlib import Path

from roofwatch.common import limits
from roofwatch.common.limits import size_text
from roofwatch.common.settings import WorkerSettings
from roofwatch.service.api import request_limits
from roofwatch.service.cli import consoles

ROOT = Path(__file__).resolve().parents[2]

# The "in code" cell's first name → what the "limit" cell must say.
STATED = {
    "BENCHMARK_FILE_LIMIT": size_text(limits.BENCHMARK_FILE_LIMIT),
    "RESULT_FILE_LIMIT": size_text(limits.RESULT_FILE_LIMIT),
    "JSON_TOKEN_LIMIT": size_text(limits.JSON_TOKEN_LIMIT),
    "JSON_DEPTH_LIMIT": f"{limits.JSON_DEPTH_LIMIT} levels",
    "MAX_BENCHMARKS": f"{limits.MAX_BENCHMARKS:,}",
    "PYPROJECT_LIMIT": size_text(limits.PYPROJECT_LIMIT),
    "SETUP_INPUT_LIMIT": size_text(limits.SETUP_INPUT_LIMIT),
    "INIT_FILE_LIMIT": size_text(limits.INIT_FILE_LIMIT),
    "request_limits.UPLOAD_BYTES": size_text(request_limits.UPLOAD_BYTES),
    "request_limits.CONFIG_BYTES": size_text(request_limits.CONFIG_BYTES),
    "request_limits.OTHER_WRITE_BYTES": size_text(request_limits.OTHER_WRITE_BYTES),
    "consoles.SHOWN_LIMIT": f"{consoles.SHOWN_LIMIT:,} characters",
    "the suite's": "what is left of the suite's `timeout`",
}


def rows_of(path: Path, heading: str) -> list[list[str]]:
    text = path.read_text()
    section = text.split(heading, 1)[1]
    block = section[section.index("\n|"):]
    rows = []
    for line in block.splitlines()[1:]:
        if not line.startswith("|"):
            break
        if set(line) <= set("|-: "):  # the header's rule
            continue
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_each_limit_in_security_md_is_the_one_in_code() -> None:
    header, *rows = rows_of(ROOT / "docs" / "security.md", "## Limits")
    assert header == ["what", "limit", "in code", "past it"]
    named = {}
    for what, limit, in_code, _ in rows:
        name = next((key for key in STATED if in_code.strip("`").startswith(key)), None)
        assert name is not None, f"{what!r}: names no limit this test knows ({in_code})"
        named[name] = limit
        assert limit == STATED[name], (what, limit, STATED[name])
    assert set(named) == set(STATED), set(STATED) - set(named)
    timeout_row = next(row for row in rows if row[1] == STATED["the suite's"])
    assert f"{WorkerSettings.model_fields['suite_timeout'].default:.0f} s" in timeout_row[2]


def test_the_readme_states_the_same_limits() -> None:
    _, *documented = rows_of(ROOT / "docs" / "security.md", "## Limits")
    _, *readme = rows_of(ROOT / "README.md", "## Security")
    assert readme == [row[:2] for row in documented]


def test_sizes_are_written_as_the_docs_write_them() -> None:
    assert [size_text(n) for n in (1024**3, 64 * 1024, 256 * 1024**2, 300, 3 * 1024 + 1)] == [
        "1 GiB", "64 KiB", "256 MiB", "300 bytes", "3073 bytes"]
