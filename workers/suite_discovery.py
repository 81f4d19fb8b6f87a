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
- **a Triton kernel repository** (``workers/kernel_tests.py``): modules that define
  ``@triton.jit`` kernels. The plain-tests suite is then narrowed to the tests of those kernels
  that a CPU can run (CUDA-only files left out, each named with why), and ``suites_toml(...,
  interpret=True)`` (no GPU here) runs them in Triton's interpreter (``TRITON_INTERPRET=1``) with
  roofwatch's compatibility layer (``--roofwatch-triton-compat``). Without pytest-benchmark tests,
  ``workers/benchmark_template.py`` writes a ``kernel_benchmark`` file for the kernels those tests
  reach, and a suite runs it;
- **what the suites import and this environment lacks**: an import of a benchmark or test file
  (for kernel tests, also of every repository module importing them loads) that roofwatch's
  interpreter cannot find and that the project declares (``workers/declared_requirements.py``:
  pyproject.toml, its dynamic metadata, setup.cfg, setup.py read with ``ast``) makes the suites
  run in each commit's own environment, ``environment = { project = ".[extras]" }`` with the
  extras that declare them (``workers/environments.py``); one it does not declare is named in
  a comment, for the user to resolve.

Pure file reading (``ast``, ``tomllib``): nothing is imported from or run in the repository. The
tree may be anyone's, so its files are read as a commit's are (``tree_files``): never through a
symbolic link, never past ``INIT_FILE_LIMIT``; a file that cannot be read that way, or parsed, is
left out and named in ``Discovery.skipped`` with why. What the tree says (a folder or file name,
an extra) reaches the suites file only quoted for TOML and the command line, and a requirement's
text never reaches it: the environment is built by pip from the project's own metadata.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement

from roofwatch.common.limits import INIT_FILE_LIMIT
from roofwatch.workers import kernel_tests
from roofwatch.workers.declared_requirements import declared, normal, read_text
from roofwatch.workers.kernel_tests import KernelRepository

SKIPPED_DIRS = kernel_tests.SKIPPED_PARTS
# Import names that differ from the distribution that provides them (the common ones).
IMPORT_TO_DISTRIBUTION = {"yaml": "pyyaml", "PIL": "pillow", "sklearn": "scikit-learn", "cv2": "opencv-python",
                          "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "attr": "attrs", "google": "protobuf"}
# For a file that does not parse: a test function whose parameters (within the first 500
# characters: past that each "def test(" would rescan the file to its next parenthesis) name
# the fixture.
BENCHMARK_TEST = re.compile(r"def\s+test\w*\s*\([^)]{0,500}\b(kernel_)?benchmark\b")
# The fixtures that make a test a pytest-benchmark test: pytest-benchmark's, and roofwatch's over it.
BENCHMARK_FIXTURES = ("benchmark", "kernel_benchmark")
# What an extra may be called in `environment = { project = ".[extras]" }` (suite_config checks the same).
EXTRA_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
DOCS = "roofwatch's docs"  # the docs/ folder of roofwatch's repository, as other hints name it


@dataclass
class Discovery:
    root: Path
    benchmark_dirs: list[str] = field(default_factory=list)
    test_dirs: list[str] = field(default_factory=list)
    src_layout: bool = False
    package: str = ""  # the project's own import name, when found
    install: list[str] = field(default_factory=list)  # requirements the suites import and this env lacks
    extras: list[str] = field(default_factory=list)  # the project's extras that declare them
    unresolved: list[str] = field(default_factory=list)  # imports neither installed nor declared
    benchmark_files: int = 0
    kernels: KernelRepository = field(default_factory=KernelRepository)
    skipped: list[str] = field(default_factory=list)  # files and requirements left out, each with why


def discover(root: Path) -> Discovery:
    found = Discovery(root=root)
    found.src_layout, found.package = _layout(root)
    benchmark_dirs: set[str] = set()
    test_dirs: set[str] = set()
    imports: set[str] = set()
    test_imports: set[str] = set()
    for path in _test_files(root):
        relative = path.relative_to(root).as_posix()
        if not _plain_text(relative):
            found.skipped.append(f"{relative!r}: the name holds control characters or bytes that are not UTF-8")
            continue
        text = read_text(root, relative, INIT_FILE_LIMIT, found.skipped)
        if text is None:
            continue
        folder = path.parent.relative_to(root).as_posix()
        top = folder.split("/", 1)[0]
        tree = _parsed(text, relative, found.skipped)
        if _takes_benchmark(tree) if tree is not None else BENCHMARK_TEST.search(text):
            benchmark_dirs.add(folder)
            found.benchmark_files += 1
            imports |= _imports(tree)
        elif top in ("tests", "test"):
            test_dirs.add(top)
            test_imports |= _imports(tree)
    found.benchmark_dirs = _outermost(benchmark_dirs)
    found.test_dirs = sorted(test_dirs)
    found.kernels = kernel_tests.find(root, found.src_layout)
    found.skipped += found.kernels.skipped
    # What the suite that runs imports: the kernel tests (and what loading them loads), else every plain test.
    imports |= found.kernels.imports if found.kernels.tests else test_imports
    local = _local_modules(root) | {found.package}
    requirements = declared(root, found.skipped)
    extras: set[str] = set()
    for name in sorted(imports - local):
        if name in sys.stdlib_module_names or importlib.util.find_spec(name) is not None:
            continue
        requirement = requirements.get(normal(IMPORT_TO_DISTRIBUTION.get(name, name)))
        if requirement is None:
            found.unresolved.append(name)
            continue
        found.install.append(requirement.requirement)
        if requirement.extra is not None:
            if EXTRA_NAME.match(requirement.extra):
                extras.add(requirement.extra)
            else:
                found.skipped.append(f"{requirement.source}: the extra {_one_line(requirement.extra)[:100]!r} that "
                                     f"declares {requirement.requirement} cannot be named in `environment`; add it by hand")
    found.extras = sorted(extras)
    return found


def suites_toml(found: Discovery, interpret: bool = False, generated_benchmarks: str | None = None) -> str:
    """The suites file ``found`` asks for, commented so it can be read and edited.

    ``interpret``: this machine has no GPU, so a kernel repository's suites run its kernels in
    Triton's interpreter. ``generated_benchmarks``: the ``kernel_benchmark`` file ``init`` wrote
    (relative to the root), which a suite of its own runs.
    """
    lines = [f"# Suites for {_one_line(found.root.name)}, written by `roofwatch init`: edit freely.",
             "# Keep it (every run and confirmation A/B uses it):",
             "#   roofwatch repo add OWNER/NAME --clone-url PATH --suites THIS_FILE",
             "# or use it once: roofwatch run --repo PATH --suites THIS_FILE --last 5",
             "# or paste these tables into the repository's pyproject.toml.", ""]
    kernels = found.kernels
    kernel_repository = bool(kernels.modules)
    interpreted = interpret and kernel_repository
    env = {"PYTHONPATH": "src"} if found.src_layout else {}
    if interpreted:
        env["TRITON_INTERPRET"] = "1"
    extras = f"[{','.join(found.extras)}]" if found.extras else ""
    environment = f'{{ project = ".{extras}" }}' if found.install else None

    if found.src_layout:
        lines.append("# src/ layout: the package is imported from src/ (PYTHONPATH, added before the worktree).")
    if interpreted:
        lines += ["# No GPU here (`roofwatch doctor`): Triton runs the kernels in its interpreter on CPU tensors",
                  "# (TRITON_INTERPRET=1; remove it for a GPU worker). --roofwatch-triton-compat patches the interpreter's",
                  "# gaps (libdevice math, float scalar arguments) and warns on bf16 arithmetic, which it computes wrongly:",
                  f"# {DOCS}/track-your-repository.md#triton-kernel-repositories"]
    if environment:
        names = ", ".join(sorted({Requirement(text).name for text in found.install}))
        lines += [f"# The suites import {names}: roofwatch's interpreter lacks them and the project",
                  "# declares them, so each commit runs in its own virtual environment (its torch and triton as it pins",
                  "# them), built once per pyproject.toml/setup.py content, offline from ROOFWATCH_WHEEL_DIR when set:",
                  f"# {DOCS}/suites.md"]
    if found.src_layout or interpreted or environment:
        lines.append("")

    def table(name: str, kind: str, command: str, why: list[str]) -> None:
        lines.extend(["[[tool.roofwatch.suites]]", *(f"# {line}" for line in why), f'name = "{name}"',
                      f'kind = "{kind}"', f"command = {_quoted(command)}"])
        if env:
            lines.append("env = { " + ", ".join(f'{key} = "{value}"' for key, value in env.items()) + " }")
        if environment:
            lines.append(f"environment = {environment}")
        lines.append("")

    compat = " --roofwatch-triton-compat" if interpreted else ""
    if found.benchmark_dirs:
        table("benchmarks", "benchmark", f"python -m pytest {shlex.join(found.benchmark_dirs)} -q --benchmark-only{compat}",
              [f"{found.benchmark_files} pytest-benchmark file(s); roofwatch adds --benchmark-json"])
    if kernels.tests:
        why = [f"the tests of the {len(kernels.modules)} Triton kernel module(s) that a CPU can run "
               f"({len(kernels.tests)} file(s)); roofwatch adds --junitxml"]
        if kernels.cuda_only or kernels.other_tests:
            why.append(f"left out: {len(kernels.cuda_only)} CUDA-only file(s) (below) and {kernels.other_tests} test "
                       "file(s) that reach no kernel (integration tests)")
        why.append("--continue-on-collection-errors: a file that cannot be imported here fails alone, not the suite")
        table("kernel-tests", "correctness", f"python -m pytest {shlex.join(kernels.tests)} -q --benchmark-skip"
              f" --continue-on-collection-errors{compat}", why)
    elif found.test_dirs:
        table("tests", "correctness", f"python -m pytest {shlex.join(found.test_dirs)} -q --benchmark-skip{compat}",
              ["the plain tests; roofwatch adds --junitxml"])
    if generated_benchmarks is not None and not found.benchmark_dirs:
        folder = generated_benchmarks.rsplit("/", 1)[0]
        table("kernel-benchmarks", "benchmark", f"python -m pytest {shlex.quote(generated_benchmarks)} -q --benchmark-only",
              [f"{generated_benchmarks}, written by roofwatch init: one kernel_benchmark per kernel module, each skipped",
               "until its call is written (and its FLOPs/bytes: roofline); commit it. To time older commits with it,",
               f'add suites_from = "main" and suite_paths = ["{folder}"]. {DOCS}/harness.md'])
    for path, reason in kernels.cuda_only:
        lines.append(f"# left out, CUDA-only: {_one_line(path)}: {reason}")
    for name in found.unresolved:
        lines.append(f"# NOTE: the suites import {name!r}, which is neither installed here nor declared by the project "
                     "(pyproject.toml,\n# setup.cfg, setup.py)" + (
                         ": it may come with a package the environment installs; if the suite cannot import it, "
                         "declare it\n# in the project (or an extra named in `environment`)" if environment else
                         ": declare it in the project and add `environment = { project = \".[extra]\" }`\n# to the "
                         "suites, or install it where roofwatch runs"))
    return "\n".join(lines).rstrip() + "\n"


def _quoted(text: str) -> str:
    """``text`` as a TOML string: a literal one when it can be, else a basic one with escapes."""
    if "'" not in text and _plain_text(text):
        return "'" + text + "'"
    escaped = "".join(f"\\u{ord(c):04x}" if c in _CONTROL or c in '"\\' else c for c in text)
    return '"' + escaped + '"'


_CONTROL = frozenset(chr(code) for code in (*range(0x20), 0x7F))


def _plain_text(text: str) -> bool:
    """No control characters and nothing that cannot be written as UTF-8 (a name's stray bytes)."""
    return not any(c in _CONTROL or "\ud800" <= c <= "\udfff" for c in text)


def _one_line(text: str) -> str:
    return "".join(f"\\x{ord(c):02x}" if c in _CONTROL or "\ud800" <= c <= "\udfff" else c for c in text)


def _layout(root: Path) -> tuple[bool, str]:
    src = root / "src"
    if src.is_dir() and not src.is_symlink():
        packages = sorted(p.parent.name for p in src.glob("*/__init__.py") if not p.parent.is_symlink())
        if packages:
            return True, packages[0]
    packages = sorted(p.parent.name for p in root.glob("*/__init__.py")
                      if p.parent.name not in SKIPPED_DIRS and p.parent.name not in ("tests", "test")
                      and not p.parent.is_symlink())
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


def _parsed(text: str, relative: str, skipped: list[str]) -> ast.Module | None:
    try:
        return ast.parse(text)
    except SyntaxError:
        return None  # pytest will say what is wrong with it when the suite runs
    except (RecursionError, MemoryError, ValueError) as exc:
        skipped.append(f"{relative!r}: not parsed ({type(exc).__name__}: nested too deeply or not text); "
                       "its imports are not known")
        return None


def _takes_benchmark(tree: ast.Module) -> bool:
    """A test function (or method) with a ``benchmark`` or ``kernel_benchmark`` parameter: pytest-benchmark's
    fixture, or roofwatch's over it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            arguments = node.args
            if any(a.arg in BENCHMARK_FIXTURES
                   for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)):
                return True
    return False


def _imports(tree: ast.Module | None) -> set[str]:
    if tree is None:
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


def _outermost(folders: set[str]) -> list[str]:
    """The folders, without those inside another listed one (pytest collects those already)."""
    ordered = sorted(folders, key=lambda f: (f.count("/"), f))
    kept: list[str] = []
    for folder in ordered:
        if not any(folder == k or folder.startswith(k + "/") or k == "." for k in kept):
            kept.append(folder)
    return sorted(kept)
