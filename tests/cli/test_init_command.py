"""`roofwatch init` on a tree someone else wrote: it stays inside it, reads little, says what it
left out and why, and what the tree declares never reaches the suites file as shell."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from support.sample_repo import commit, init
from support.tests_support import roofwatch

BENCHMARK = """\
import evilmod


def test_copy(benchmark):
    benchmark(sum, range(10))
"""
# A benchmark file outside the tree, which a link inside it points at.
HOST_BENCHMARK = """\
import hostonlymod


def test_secret(benchmark):
    benchmark(sum, range(10))
"""
MARKER = "touched-by-a-dependency"
PYPROJECT = f"""\
[project]
name = "victim"
version = "1"
dependencies = [
    "evilmod' $(touch {MARKER}) 'x",
    "evilmod @ https://example.com/evilmod.whl?x='$(touch${{IFS}}{MARKER})'",
    "numpy>=1.20,<99; python_version >= '3'",
]
"""


def write_tree(root: Path, host: Path) -> None:
    init(root)
    commit(root, "A benchmark", {"bench/test_copy.py": BENCHMARK, "pyproject.toml": PYPROJECT}, 1)
    (host / "test_secret.py").write_text(HOST_BENCHMARK)
    (root / "linked").mkdir()
    os.symlink(host / "test_secret.py", root / "linked" / "test_host.py")
    os.symlink(host, root / "linked_folder")
    with (root / "bench" / "test_huge.py").open("wb") as huge:  # 400 MB, sparse
        huge.truncate(400 * 1024 * 1024)
    (root / "bench" / "test_deep.py").write_text("x = " + "-" * 200_000 + "1\n")


def test_init_stays_in_the_tree_reads_bounded_explains_and_quotes(tmp_path: Path) -> None:
    root, host = tmp_path / "victim", tmp_path / "host"
    host.mkdir()
    write_tree(root, host)

    done = roofwatch(["init", str(root)], {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}, check=False)

    shown = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in shown, shown
    text = (root / "roofwatch-suites.toml").read_text()
    suites = tomllib.loads(text)["tool"]["roofwatch"]["suites"]
    assert [s["command"] for s in suites] == ["python -m pytest bench -q --benchmark-only"]
    assert "hostonlymod" not in text and "linked" not in text
    # What was left out, and why, in the words of the tree's own paths.
    assert "left out: 'linked/test_host.py' is or goes through a symbolic link; it is not read" in shown
    assert "left out: 'bench/test_huge.py' is 419430400 bytes, over the 1 MiB limit" in shown
    assert "left out: 'bench/test_deep.py': not parsed (MemoryError" in shown
    assert "is not a requirement (PEP 508); not installed" in shown

    # What the tree declares never reaches the suites file as text: the environment is built by pip from the
    # project's own metadata, so no requirement is ever run as shell.
    assert suites[0]["environment"] == {"project": "."} and "setup" not in suites[0]
    assert MARKER not in text and "example.com" not in text and "$(" not in text
    assert "# The suites import evilmod: " in text  # the distribution's name, a PEP 508 name, only
    assert not any(p.name == MARKER for p in tmp_path.rglob("*"))


def test_init_explains_a_pyproject_it_cannot_read(tmp_path: Path) -> None:
    root = tmp_path / "nested"
    init(root)
    nested = 'name = "nested"\n[tool.x]\ndeep = ' + "[" * 100_000 + "]" * 100_000 + "\n"
    commit(root, "Deep", {"pyproject.toml": "[project]\n" + nested, "tests/test_plain.py": "def test_x():\n    pass\n"}, 1)

    done = roofwatch(["init", str(root)], {"ROOFWATCH_DATA_DIR": str(tmp_path / "data")}, check=False)

    shown = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in shown, shown
    assert "left out: pyproject.toml is nested too deeply to read; the requirements it declares are not known" in shown
    [suite] = tomllib.loads((root / "roofwatch-suites.toml").read_text())["tool"]["roofwatch"]["suites"]
    assert suite["command"] == "python -m pytest tests -q --benchmark-skip"
