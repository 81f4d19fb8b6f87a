"""A Triton kernel repository's kernels, and the tests that exercise them on a CPU, found by reading its files.

What ``roofwatch init`` needs to give a kernel library a first suite that finishes: a library's
whole test tree runs for hours under Triton's interpreter and much of it needs a GPU, but the
tests of its kernels are usually a small part, and most of those run on a CPU.

**Kernel modules.** A module of the repository that defines a function decorated with
``triton.jit`` (``@triton.jit``, ``@triton.jit(...)``, ``@jit`` imported from triton, under any
alias, beside ``@triton.autotune``/``@triton.heuristics``). Its *launchers* are its top-level
functions (and methods) that launch one of them (``kernel[grid](...)``): what a benchmark calls.

**Kernel tests.** A test file (``test_*.py``, ``*_test.py``) that imports a kernel module, either
directly or through one module of the repository in between (the host wrapper or autograd layer
of a kernel, ``mylib.transformers.rms_norm`` over ``mylib.ops.rms_norm``). An import is resolved
to the module that defines what it names: ``from mylib.ops import rms_norm_fwd`` follows the
package's ``__init__`` re-exports (``from .rms_norm import rms_norm_fwd``, ``from .x import *``)
to ``mylib.ops.rms_norm``. A test that reaches kernels only through longer chains (a model built
from layers built from kernels) is an integration test and is left out.

**CUDA-only tests** (left out, each with its reason): a kernel test file is taken as needing a
CUDA device when any of these holds —

1. a module-level ``pytestmark`` or ``pytest.skip(..., allow_module_level=True)`` guarded by a
   negated or compared CUDA query (``not torch.cuda.is_available()``,
   ``torch.cuda.device_count() < 2``, ``get_device_capability() >= (9, 0)``), directly or through
   a module-level name bound to one: on a CPU every test in it skips anyway;
2. it imports a library that only runs on NVIDIA GPUs (``CUDA_ONLY_IMPORTS``: CUTLASS's DSL,
   cuda-python / cuTile, flash-attn, ...), itself or through a repository module that importing it
   loads (module-level imports, not those inside functions, ``if`` or ``try``);
3. it hard-codes a CUDA device (``device="cuda"``, ``torch.device("cuda:0")``, ``.to("cuda")``,
   ``.cuda()``, ``DEVICE = "cuda"``) and has no CPU path: no ``"cpu"`` string anywhere in it and
   no call that picks a device at run time (a function whose name holds ``device``, such as
   ``infer_device()`` or ``get_device()``).

A file can still hold single tests that need a GPU (a ``skipif`` on one test): pytest skips those.

Pure file reading (``ast``), bounded like the rest of ``init``: files are read as a commit's are
(``tree_files``), at most ``SOURCE_FILE_COUNT`` of them; what cannot be read is named in ``skipped``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from roofwatch.common.limits import INIT_FILE_LIMIT
from roofwatch.workers.declared_requirements import read_text

SOURCE_FILE_COUNT = 20_000  # Python files read to find kernels (a large library has a few thousand)
REEXPORT_DEPTH = 6  # package __init__ re-exports followed from one import
CUDA_ONLY_IMPORTS = frozenset({"cutlass", "cuda", "cuda_tile", "flash_attn", "flash_attn_interface", "apex",
                               "pycuda", "cupy", "deep_gemm", "transformer_engine", "nvshmem"})
CUDA_QUERIES = frozenset({"is_available", "device_count", "get_device_capability", "get_device_properties",
                          "get_device_name"})
SKIPPED_PARTS = frozenset({".git", ".hg", ".venv", "venv", "env", ".tox", ".nox", "node_modules", "build", "dist",
                           "site-packages", "__pycache__", ".eggs", ".mypy_cache", ".pytest_cache", "docs"})


@dataclass(frozen=True)
class KernelModule:
    name: str  # dotted import name, e.g. mylib.ops.rms_norm
    path: str  # relative to the repository root
    kernels: tuple[str, ...]  # the @triton.jit functions
    launchers: tuple[str, ...]  # functions that launch one, with their parameters: "rms_norm(x, weight, eps)"


@dataclass
class KernelRepository:
    modules: list[KernelModule] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)  # kernel test files a CPU can run, relative paths
    tested: set[str] = field(default_factory=set)  # kernel modules those tests reach
    imports: set[str] = field(default_factory=set)  # outside top-level names importing those tests imports
    cuda_only: list[tuple[str, str]] = field(default_factory=list)  # (test file, why it needs a GPU)
    other_tests: int = 0  # test files that reach no kernel (integration, utilities)
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Module:
    name: str
    path: str
    package: bool
    tree: ast.Module


def find(root: Path, src_layout: bool) -> KernelRepository:
    """The kernel modules of the tree at ``root`` and its kernel tests that run on a CPU."""
    found = KernelRepository()
    modules = _modules(root, src_layout, found.skipped)
    by_name = {module.name: module for module in modules}
    kernel_modules = {m.name: m for m in modules if not _is_test(m.path) and _kernels(m.tree)}
    found.modules = [KernelModule(m.name, m.path, _kernels(m.tree), _launchers(m.tree, _kernels(m.tree)))
                     for m in sorted(kernel_modules.values(), key=lambda m: m.path)]
    if not kernel_modules:
        return found
    resolver = _Resolver(by_name)
    for module in sorted((m for m in modules if _is_test(m.path)), key=lambda m: m.path):
        used = resolver.uses(module)
        reached = used & kernel_modules.keys() or {
            name for name in used if name in by_name and resolver.uses(by_name[name]) & kernel_modules.keys()}
        if not reached:
            found.other_tests += 1
            continue
        loads = _imported_on_load(module, by_name, resolver)
        why = cuda_only(module.tree) or next(
            (f"importing it loads {name} (through the repository's modules), which runs only on NVIDIA GPUs"
             for name in sorted(loads & CUDA_ONLY_IMPORTS)), None)
        if why is None:
            found.tests.append(module.path)
            found.tested |= reached & kernel_modules.keys() or {
                kernel for name in reached for kernel in resolver.uses(by_name[name]) & kernel_modules.keys()}
            found.imports |= loads
        else:
            found.cuda_only.append((module.path, why))
    return found


def _imported_on_load(start: _Module, by_name: dict[str, _Module], resolver: _Resolver) -> set[str]:
    """The outside top-level names that importing ``start`` imports: the module-level imports (not those
    inside functions, ``if`` or ``try``) of every repository module loaded on the way, packages included."""
    roots = {name.split(".")[0] for name in by_name}
    seen: set[str] = set()
    outside: set[str] = set()
    pending = [start.name]
    while pending:
        name = pending.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        parts = name.split(".")
        pending += [".".join(parts[:i]) for i in range(1, len(parts))]  # each package's __init__ runs first
        for base, imported in _imports(by_name[name], top_level_only=True):
            top = base.split(".")[0]
            if top and top not in roots:
                outside.add(top)
            elif base:
                pending += sorted(resolver._defining(base, imported if imported != "*" else "*", 0))
    return outside


def cuda_only(tree: ast.Module) -> str | None:
    """Why the test file needs a CUDA device (rules 1–3 of the module docstring), or None."""
    gated = _cuda_gated_names(tree)
    for statement in tree.body:
        if _module_skip(statement, gated):
            return f"every test skips without CUDA (line {statement.lineno})"
    tests = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]
    marks = {name for statement in tree.body
             if isinstance(statement, ast.Assign) and _skip_without_cuda(statement.value, gated)
             for name in (t.id for t in statement.targets if isinstance(t, ast.Name))}
    if tests and all(any(_skip_without_cuda(d, gated) or _dotted(d) in marks for d in test.decorator_list)
                     for test in tests):
        return f"every test is marked to skip without CUDA (line {tests[0].lineno})"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if node.module and node.level == 0 else [])
            for name in names:
                if name.split(".")[0] in CUDA_ONLY_IMPORTS:
                    return f"imports {name}, which runs only on NVIDIA GPUs (line {node.lineno})"
    line = _hard_coded_cuda(tree)
    if line is not None and not _has_cpu_path(tree):
        return f"hard-codes a CUDA device (line {line}) and has no CPU path"
    return None


def _modules(root: Path, src_layout: bool, skipped: list[str]) -> list[_Module]:
    found: list[_Module] = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if any(part in SKIPPED_PARTS or part.startswith(".") for part in relative.parts[:-1]):
            continue
        if not all(part.isidentifier() for part in (*relative.parts[:-1], relative.stem)):
            continue  # not importable as a module (a script folder with a dash, a stray name)
        if len(found) >= SOURCE_FILE_COUNT:
            skipped.append(f"more than {SOURCE_FILE_COUNT} Python files: the rest were not searched for kernels")
            break
        text = read_text(root, relative.as_posix(), INIT_FILE_LIMIT, skipped)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        except (RecursionError, MemoryError, ValueError) as exc:
            skipped.append(f"{relative.as_posix()!r}: not parsed ({type(exc).__name__}); not searched for kernels")
            continue
        parts = list(relative.parts)
        if src_layout and parts[0] == "src" and len(parts) > 1:
            parts = parts[1:]
        package = parts[-1] == "__init__.py"
        parts = parts[:-1] if package else [*parts[:-1], relative.stem]
        if parts:
            found.append(_Module(".".join(parts), relative.as_posix(), package, tree))
    return found


def _is_test(path: str) -> bool:
    """A test file in a test folder (``tests/``, ``test/``, ``unit_tests/``...): benchmarks, examples and
    scripts named like tests are not the library's tests."""
    *folders, name = path.split("/")
    return (name.startswith("test_") or name.endswith("_test.py")) and any(
        folder in ("test", "tests") or folder.endswith(("_test", "_tests")) for folder in folders)


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name → what it refers to in triton (``triton``, ``triton.jit``), from the file's imports."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton":
                    aliases[alias.asname or "triton"] = "triton"
        elif isinstance(node, ast.ImportFrom) and node.module == "triton" and node.level == 0:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"triton.{alias.name}"
    return aliases


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _kernels(tree: ast.Module) -> tuple[str, ...]:
    aliases = _aliases(tree)
    if not aliases:
        return ()
    kernels: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                head, _, rest = _dotted(target).partition(".")
                qualified = aliases.get(head, "") + (f".{rest}" if rest else "")
                if qualified == "triton.jit":
                    kernels.append(node.name)
                    break
    return tuple(kernels)


def _launchers(tree: ast.Module, kernels: tuple[str, ...]) -> tuple[str, ...]:
    """Functions and methods that launch a kernel of the module (``kernel[grid](...)``), with their parameters."""
    launchers: list[str] = []
    names = set(kernels)
    functions = [("", node) for node in tree.body if isinstance(node, ast.FunctionDef)]
    functions += [(f"{node.name}.", method) for node in tree.body if isinstance(node, ast.ClassDef)
                  for method in node.body if isinstance(method, ast.FunctionDef)]
    for prefix, node in functions:
        if node.name in names or (node.name.startswith("_") and not prefix):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Subscript) \
                    and _dotted(inner.func.value).rsplit(".", 1)[-1] in names:
                parameters = [a.arg for a in (*node.args.posonlyargs, *node.args.args) if a.arg not in ("self", "ctx")]
                launchers.append(f"{prefix}{node.name}({', '.join(parameters)})")
                break
    return tuple(launchers)


class _Resolver:
    """The repository modules an importing module uses, re-exports of packages followed."""

    def __init__(self, modules: dict[str, _Module]) -> None:
        self.modules = modules
        self._uses: dict[str, set[str]] = {}

    def uses(self, module: _Module) -> set[str]:
        if module.name not in self._uses:
            self._uses[module.name] = set()  # an import cycle ends here
            self._uses[module.name] = {target for base, name in _imports(module)
                                       for target in self._defining(base, name, 0)}
        return self._uses[module.name]

    def _defining(self, base: str, name: str | None, depth: int) -> set[str]:
        """The modules that define ``name`` imported from ``base`` (None: the module itself, ``*``: all it has)."""
        if name not in (None, "*") and f"{base}.{name}" in self.modules:
            return {f"{base}.{name}"}
        module = self.modules.get(base)
        if module is None:
            return set()
        if name is None or not module.package or depth >= REEXPORT_DEPTH:
            return {base}
        found: set[str] = set()
        for source, imported in _imports(module, top_level_only=True):
            if name == "*":
                found |= self._defining(source, imported, depth + 1)
            elif imported in (name, "*"):
                found |= self._defining(source, name, depth + 1)
        return found or {base}


def _imports(module: _Module, top_level_only: bool = False) -> Iterable[tuple[str, str | None]]:
    """(module, name) for every import: ``name`` None for ``import a.b``, ``"*"`` for a star import."""
    nodes = module.tree.body if top_level_only else ast.walk(module.tree)
    package = module.name if module.package else module.name.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue
                anchor = parts[:len(parts) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                yield base, alias.name


def _mentions_cuda_query(node: ast.AST, gated: set[str]) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and inner.attr in CUDA_QUERIES and "cuda" in _dotted(inner.value):
            return True
        if isinstance(inner, ast.Name) and inner.id in gated:
            return True
    return False


def _cuda_gated_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to an expression (or a function) that queries CUDA."""
    gated: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and _mentions_cuda_query(statement.value, gated):
            gated |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
        elif isinstance(statement, ast.FunctionDef) and _mentions_cuda_query(statement, gated):
            gated.add(statement.name)
    return gated


def _negated_cuda_query(node: ast.AST, gated: set[str]) -> bool:
    """A condition that is true on a machine without CUDA: ``not <query>`` or a comparison of one."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.UnaryOp) and isinstance(inner.op, ast.Not) and _mentions_cuda_query(inner, gated):
            return True
        if isinstance(inner, ast.Compare) and _mentions_cuda_query(inner, gated):
            return True
    return False


def _skip_without_cuda(node: ast.AST, gated: set[str]) -> bool:
    """A ``skipif`` mark (or a list of marks holding one) whose condition holds without CUDA."""
    return any(_negated_cuda_query(call, gated) for call in ast.walk(node)
               if isinstance(call, ast.Call) and _dotted(call.func).endswith("skipif"))


def _module_skip(statement: ast.stmt, gated: set[str]) -> bool:
    if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark"
                                                 for t in statement.targets):
        return _skip_without_cuda(statement.value, gated)
    if isinstance(statement, ast.If) and _negated_cuda_query(statement.test, gated):
        return any(isinstance(call, ast.Call) and _dotted(call.func).endswith("skip")
                   and any(k.arg == "allow_module_level" for k in call.keywords)
                   for inner in statement.body for call in ast.walk(inner))
    return False


def _is_cuda(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (
        node.value == "cuda" or node.value.startswith("cuda:"))


def _hard_coded_cuda(tree: ast.Module) -> int | None:
    """The line of the first CUDA device the file names as a device, or None."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = _dotted(node.func)
            if any(k.arg == "device" and _is_cuda(k.value) for k in node.keywords):
                return node.lineno
            if func.endswith(("torch.device", ".to")) and node.args and _is_cuda(node.args[0]):
                return node.lineno
            if isinstance(node.func, ast.Attribute) and node.func.attr == "cuda" and not node.args:
                return node.lineno
        elif isinstance(node, ast.Assign) and _is_cuda(node.value) and any(
                isinstance(t, ast.Name) and "device" in t.id.lower() for t in node.targets):
            return node.lineno
    return None


def _has_cpu_path(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == "cpu":
            return True
        if isinstance(node, ast.Call):
            func = _dotted(node.func)
            if "device" in func.rsplit(".", 1)[-1].lower() and not func.endswith("torch.device") \
                    and ".cuda." not in f".{func}":
                return True
    return False
