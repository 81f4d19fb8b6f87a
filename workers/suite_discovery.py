"""Suites for a repository that has never heard of roofwatch, found by reading its files.

What ``roofwatch init`` looks for, each a step a newcomer would otherwise learn by failing:

- **pytest-benchmark tests**: test files (``test_*.py``, ``*_test.py``) with a test function
  taking the ``benchmark`` fixture; their folders become one ``benchmark`` suite
  (``--benchmark-only``, so plain tests beside them do not run twice);
- **plain tests**: a ``tests``/``test`` folder with test files that are not benchmarks becomes
  a ``correctness`` suite (``--benchmark-skip``, so benchmarks there are not timed twice);
- **a src/ layout**: ``src/<package>/__init__.py`` means the package is not importable from
  the worktree's root, so the suites get ``env = { PYTHONPATH = "src" }`` (added before the
  worktree, which stays on the path);
- **what the suites import and this environment lacks**: a top-level import of a benchmark or
  test file that roofwatch's interpreter cannot find and that the project declares (in
  ``[project] dependencies`` or an optional extra) is installed by the suites' ``setup`` into
  the repository's setup cache (once per ``pyproject.toml``); one it does not declare is named
  in a comment, for the user to resolve.

Pure file reading (``ast``, ``tomllib``): nothing is imported from or run in the repository.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

SKIPPED_DIRS = frozenset({".git", ".hg", ".venv", "venv", "env", ".tox", ".nox", "node_modules", "build", "dist",
                          "site-packages", "__pycache__", ".eggs", ".mypy_cache", ".pytest_cache", "docs"})
# Import names that differ from the distribution that provides them (the common ones).
IMPORT_TO_DISTRIBUTION = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn", "cv2": "opencv-python",
                          "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "attr": "attrs", "google": "protobuf"}
REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
BENCHMARK_TEST = re.compile(r"def\s+test\w*\s*\([^)]*\bbenchmark\b", re.S)


@dataclass
class Discovery:
    root: Path
    benchmark_dirs: list[str] = field(default_factory=list)
    test_dirs: list[str] = field(default_factory=list)
    src_layout: bool = False
    package: str = ""  # the project's own import name, when found
    install: list[str] = field(default_factory=list)  # requirements the suites import and this env lacks
    unresolved: list[str] = field(default_factory=list)  # imports neither installed nor declared
    benchmark_files: int = 0


def discover(root: Path) -> Discovery:
    found = Discovery(root=root)
    pyproject = _pyproject(root)
    found.src_layout, found.package = _layout(root)
    benchmark_dirs: set[str] = set()
    test_dirs: set[str] = set()
    imports: set[str] = set()
    for path in _test_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        folder = path.parent.relative_to(root).as_posix()
        top = folder.split("/", 1)[0]
        if BENCHMARK_TEST.search(text):
            benchmark_dirs.add(folder)
            found.benchmark_files += 1
            imports |= _imports(text)
        elif top in ("tests", "test"):
            test_dirs.add(top)
            imports |= _imports(text)
    found.benchmark_dirs = _outermost(benchmark_dirs)
    found.test_dirs = sorted(test_dirs)
    local = _local_modules(root) | {found.package}
    declared = _declared(pyproject)
    for name in sorted(imports - local):
        if name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None:
            continue
        requirement = declared.get(_normal(IMPORT_TO_DISTRIBUTION.get(name, name)))
        if requirement is not None:
            found.install.append(requirement)
        else:
            found.unresolved.append(name)
    return found


def suites_toml(found: Discovery) -> str:
    """The suites file ``found`` asks for, commented so it can be read and edited."""
    lines = [f"# Suites for {found.root.name}, written by `roofwatch init`: edit freely.",
             "# Keep it (every run and confirmation A/B uses it):",
             "#   roofwatch repo add OWNER/NAME --clone-url PATH --suites THIS_FILE",
             "# or use it once: roofwatch run --repo PATH --suites THIS_FILE --last 5",
             "# or paste these tables into the repository's pyproject.toml.", ""]
    env = '{ PYTHONPATH = "src" }' if found.src_layout else None
    setup = ('pip install --target "$ROOFWATCH_SETUP_CACHE/python" ' + " ".join(f"'{r}'" for r in found.install)
             if found.install else None)

    def table(name: str, kind: str, command: str, why: str) -> None:
        lines.extend(["[[tool.roofwatch.suites]]", f"# {why}", f'name = "{name}"', f'kind = "{kind}"',
                      f"command = {_quoted(command)}"])
        if env:
            lines.append(f"# src/ layout: the package is imported from src/ (added before the worktree)\nenv = {env}")
        if setup:
            lines.append("# the suites import these and roofwatch's environment lacks them: installed once per "
                         f"pyproject.toml\nsetup = {_quoted(setup)}")
            lines.append('setup_inputs = ["pyproject.toml"]')
        lines.append("")

    if found.benchmark_dirs:
        table("benchmarks", "benchmark", f"python -m pytest {' '.join(found.benchmark_dirs)} -q --benchmark-only",
              f"{found.benchmark_files} pytest-benchmark file(s); roofwatch adds --benchmark-json")
    if found.test_dirs:
        table("tests", "correctness", f"python -m pytest {' '.join(found.test_dirs)} -q --benchmark-skip",
              "the plain tests; roofwatch adds --junitxml")
    for name in found.unresolved:
        lines.append(f"# NOTE: the suites import {name!r}, which is neither installed here nor declared in "
                     "pyproject.toml: add it to `setup` above")
    return "\n".join(lines).rstrip() + "\n"


def _quoted(text: str) -> str:
    return "'" + text + "'" if "'" not in text else '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pyproject(root: Path) -> dict[str, object]:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _layout(root: Path) -> tuple[bool, str]:
    src = root / "src"
    if src.is_dir():
        packages = sorted(p.parent.name for p in src.glob("*/__init__.py"))
        if packages:
            return True, packages[0]
    packages = sorted(p.parent.name for p in root.glob("*/__init__.py")
                      if p.parent.name not in SKIPPED_DIRS and p.parent.name not in ("tests", "test"))
    return False, packages[0] if packages else ""


def _test_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in parts[:-1]):
            continue
        if path.name.startswith("test_") or path.name.endswith("_test.py"):
            found.append(path)
    return found


def _imports(text: str) -> set[str]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _local_modules(root: Path) -> set[str]:
    """Names importable from the tree itself: top-level and src/ packages and modules, conftest helpers."""
    names: set[str] = set()
    for base in (root, root / "src"):
        if base.is_dir():
            names |= {p.stem for p in base.glob("*.py")} | {p.name for p in base.iterdir() if p.is_dir()}
    for path in _test_files(root):
        names |= {p.stem for p in path.parent.glob("*.py")}
    return names


def _declared(pyproject: dict[str, object]) -> dict[str, str]:
    """Normalised distribution name → requirement, from dependencies and every optional extra."""
    project = pyproject.get("project")
    if not isinstance(project, dict):
        return {}
    requirements = list(project.get("dependencies") or [])
    for group in (project.get("optional-dependencies") or {}).values():
        requirements += list(group or [])
    declared: dict[str, str] = {}
    for requirement in requirements:
        match = REQUIREMENT_NAME.match(str(requirement))
        if match:
            declared.setdefault(_normal(match[1]), str(requirement).split(";")[0].strip())
    return declared


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _outermost(folders: set[str]) -> list[str]:
    """The folders, without those inside another listed one (pytest collects those already)."""
    ordered = sorted(folders, key=lambda f: (f.count("/"), f))
    kept: list[str] = []
    for folder in ordered:
        if not any(folder == k or folder.startswith(k + "/") or k == "." for k in kept):
            kept.append(folder)
    return sorted(kept)
