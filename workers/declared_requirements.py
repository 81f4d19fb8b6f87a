"""What a repository declares it needs, read without running any of it.

``roofwatch init`` asks, of each import a suite makes and roofwatch's interpreter lacks, whether the
project declares it, and in which optional extra. Projects say so in four places, all read here:

- ``pyproject.toml``: ``[project] dependencies`` and ``optional-dependencies``;
- dynamic metadata: ``[tool.setuptools.dynamic] dependencies = { file = [...] }`` and
  ``optional-dependencies.<extra> = { file = [...] }`` (requirements files);
- ``setup.cfg``: ``[options] install_requires`` and ``[options.extras_require]``;
- ``setup.py``: the ``install_requires`` and ``extras_require`` keywords of its ``setup(...)`` call,
  **parsed with ``ast``, never executed** (a setup.py is a program of the tree's author). A value
  is read when it is a literal, a name bound to one, a ``+`` of such, or a call of a function of
  the same file taking no arguments, whose ``return`` values (every branch: a platform switch
  declares the union of what any platform needs) are read the same way. A computed value that
  names a ``*.txt`` file of the tree (``open("requirements.txt").read().splitlines()``, a
  ``read_requirements("requirements.txt")`` helper) is read as that requirements file. Anything
  else is left out and said so (``skipped``).

Every requirement is parsed as PEP 508 says; text that is not a requirement is named in
``skipped`` and never installed. Files are read as a commit's are (``tree_files``): no links, at
most ``INIT_FILE_LIMIT`` each.
"""

from __future__ import annotations

import ast
import configparser
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from roofwatch.common.errors import SuiteConfigError, UnsafePath
from roofwatch.common.limits import INIT_FILE_LIMIT, PYPROJECT_LIMIT
from roofwatch.common.tree_files import read_in
from roofwatch.suite_config.declared import parse_toml

RESOLVE_DEPTH = 8  # names and calls followed from a setup() keyword before giving up
REQUIREMENTS_FILE = re.compile(r"^[\w./-]+\.txt$")


@dataclass(frozen=True)
class Declared:
    """One declared requirement: its text (PEP 508, marker dropped), the extra that declares it
    (``None``: a base dependency) and the file it was read from."""

    requirement: str
    extra: str | None
    source: str


def declared(root: Path, skipped: list[str]) -> dict[str, Declared]:
    """Normalised distribution name → where the project declares it; a base dependency wins over an extra."""
    found: dict[str, Declared] = {}
    pyproject = read_pyproject(root, skipped)
    project = pyproject.get("project")
    if isinstance(project, dict):
        _add(found, _strings(project.get("dependencies")), None, "pyproject.toml", skipped)
        extras = project.get("optional-dependencies")
        for extra, group in (extras.items() if isinstance(extras, dict) else ()):
            _add(found, _strings(group), str(extra), "pyproject.toml", skipped)
    _dynamic(root, pyproject, found, skipped)
    _setup_cfg(root, found, skipped)
    _setup_py(root, found, skipped)
    return found


def read_pyproject(root: Path, skipped: list[str]) -> dict[str, object]:
    text = read_text(root, "pyproject.toml", PYPROJECT_LIMIT, skipped)
    if text is None:
        return {}
    try:
        return parse_toml(text, "pyproject.toml")
    except SuiteConfigError as exc:
        skipped.append(f"{exc}; the requirements it declares are not known")
        return {}


def read_text(root: Path, relative: str, limit: int, skipped: list[str]) -> str | None:
    """``root/relative`` as text, read as a commit's files are; None (and why, in ``skipped``) otherwise."""
    try:
        data = read_in(root, relative, limit)
    except UnsafePath as exc:
        skipped.append(f"{exc}")
        return None
    return None if data is None else data.decode("utf-8", errors="replace")


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _add(found: dict[str, Declared], texts: list[str], extra: str | None, source: str, skipped: list[str]) -> None:
    for text in texts:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            skipped.append(f"{source}: {_one_line(text)[:200]!r} is not a requirement (PEP 508); not installed")
            continue
        requirement.marker = None
        name = normal(requirement.name)
        if name not in found or (extra is None and found[name].extra is not None):
            found[name] = Declared(str(requirement), extra, source)


def _requirements_file(root: Path, name: str, skipped: list[str]) -> list[str] | None:
    """The requirement lines of a pip requirements file (options, includes and comments left out)."""
    text = read_text(root, name, INIT_FILE_LIMIT, skipped)
    if text is None:
        return None
    lines = (line.split(" #", 1)[0].strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith(("#", "-"))]


def _dynamic(root: Path, pyproject: dict[str, object], found: dict[str, Declared], skipped: list[str]) -> None:
    tool = pyproject.get("tool")
    setuptools = tool.get("setuptools") if isinstance(tool, dict) else None
    dynamic = setuptools.get("dynamic") if isinstance(setuptools, dict) else None
    if not isinstance(dynamic, dict):
        return
    groups: list[tuple[str | None, object]] = [(None, dynamic.get("dependencies"))]
    extras = dynamic.get("optional-dependencies")
    groups += [(str(extra), spec) for extra, spec in (extras.items() if isinstance(extras, dict) else ())]
    for extra, spec in groups:
        files = spec.get("file") if isinstance(spec, dict) else None
        for name in [files] if isinstance(files, str) else _strings(files):
            lines = _requirements_file(root, name, skipped)
            if lines is not None:
                _add(found, lines, extra, name, skipped)


def _setup_cfg(root: Path, found: dict[str, Declared], skipped: list[str]) -> None:
    text = read_text(root, "setup.cfg", INIT_FILE_LIMIT, skipped)
    if text is None:
        return
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        skipped.append(f"setup.cfg: not read ({type(exc).__name__}); the requirements it declares are not known")
        return
    if parser.has_option("options", "install_requires"):
        _add(found, _lines(parser.get("options", "install_requires")), None, "setup.cfg", skipped)
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            _add(found, _lines(value), extra, "setup.cfg", skipped)


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines() if line.strip() and not line.strip().startswith(("#", ";"))]


def _setup_py(root: Path, found: dict[str, Declared], skipped: list[str]) -> None:
    text = read_text(root, "setup.py", INIT_FILE_LIMIT, skipped)
    if text is None:
        return
    try:
        tree = ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError) as exc:
        skipped.append(f"setup.py: not parsed ({type(exc).__name__}); the requirements it declares are not known")
        return
    call = _setup_call(tree)
    if call is None:
        return
    reader = _SetupReader(tree, root, skipped)
    for keyword in call.keywords:
        if keyword.arg == "install_requires":
            value = reader.value(keyword.value, {}, 0)
            if isinstance(value, list):
                _add(found, _strings(value), None, "setup.py", skipped)
            else:
                skipped.append(f"setup.py: install_requires (line {keyword.value.lineno}) is computed in a way "
                               "not read without running it; its requirements are not known")
        elif keyword.arg == "extras_require":
            value = reader.value(keyword.value, {}, 0)
            if isinstance(value, dict):
                for extra, group in value.items():
                    if isinstance(extra, str) and isinstance(group, list):
                        _add(found, _strings(group), extra, "setup.py", skipped)
            else:
                skipped.append(f"setup.py: extras_require (line {keyword.value.lineno}) is computed in a way "
                               "not read without running it; its requirements are not known")


def _setup_call(tree: ast.Module) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "setup":
                return node
    return None


class _SetupReader:
    """Literal values of a setup.py's expressions, following module-level names and argument-less
    calls of its own functions; ``None`` where a value would need running the file."""

    def __init__(self, tree: ast.Module, root: Path, skipped: list[str]) -> None:
        self.root, self.skipped = root, skipped
        self.functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
        self.names = _assignments(tree.body)

    def value(self, node: ast.expr, scope: dict[str, ast.expr], depth: int) -> object:
        if depth > RESOLVE_DEPTH:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = [self.value(item, scope, depth + 1) for item in node.elts]
            return None if any(item is None for item in items) else items
        if isinstance(node, ast.Dict):
            keys = [None if key is None else self.value(key, scope, depth + 1) for key in node.keys]
            values = [self.value(item, scope, depth + 1) for item in node.values]
            if any(k is None or v is None for k, v in zip(keys, values, strict=True)):
                return None
            return dict(zip(keys, values, strict=True))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, scope, depth + 1), self.value(node.right, scope, depth + 1)
            return left + right if isinstance(left, list) and isinstance(right, list) else None
        if isinstance(node, ast.Name):
            bound = scope.get(node.id, self.names.get(node.id))
            return None if bound is None else self.value(bound, scope, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args and not node.keywords \
                and node.func.id in self.functions:
            return self._returned(self.functions[node.func.id], depth + 1)
        return self._named_file(node)

    def _returned(self, function: ast.FunctionDef, depth: int) -> object:
        """The union of what the function's ``return`` statements give (lists joined, tables merged)."""
        scope = _assignments(function.body)
        merged: object = None
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                value = self.value(node.value, scope, depth)
                if isinstance(value, list):
                    merged = [*(merged if isinstance(merged, list) else []), *value]
                elif isinstance(value, dict):
                    merged = {**(merged if isinstance(merged, dict) else {}), **value}
                else:
                    return None
        return merged

    def _named_file(self, node: ast.expr) -> list[str] | None:
        """A computed value that names one requirements file of the tree: that file's requirements."""
        names = {item.value for item in ast.walk(node) if isinstance(item, ast.Constant)
                 and isinstance(item.value, str) and REQUIREMENTS_FILE.match(item.value)}
        if len(names) != 1:
            return None
        return _requirements_file(self.root, names.pop(), self.skipped)


def _assignments(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """Names bound by plain assignments in ``body`` (its top level), the last binding winning."""
    bound: dict[str, ast.expr] = {}
    for statement in body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    bound[target.id] = statement.value
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            bound[statement.target.id] = statement.value
    return bound


def _strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _one_line(text: str) -> str:
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or ord(c) == 0x7F or "\ud800" <= c <= "\udfff" else c
                   for c in text)
