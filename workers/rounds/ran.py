"""What each benchmark ran: the repository's Python files it imported and the Triton kernels it launched.

Part of the rounds plugin (``--roofwatch-ran-root=DIR``), so standard library and pytest only, and
it imports nothing a suite did not import itself: kernel launches are watched only once the suite
has imported Triton.

**Files.** A benchmark's files are those of the repository's modules (files under ``DIR``) that
its test can reach: its test module, the conftests above it, every module first imported while the
test ran (``importlib.import_module`` in the measured function), and, transitively, every
repository module one of those imports — by an import statement anywhere in its source (located on
disk, nothing imported) or by naming it in its globals: a module, a function, class or kernel (its
``__module__``), or one held in a dict, list or tuple there (a registry of kernels). Parent
packages (``pkg/__init__.py`` for ``pkg.a``) count, since importing ``pkg.a`` runs them. Modules
imported at collection by *another* test module are not reached, which is the point: two
benchmarks in two test modules do not share each other's code. Import statements are read from
source rather than from what happens to be loaded, so the record does not depend on the order the
tests ran in. Each file is recorded with a hash of its content.

**Kernels.** ``JITFunction.run`` (compiled) and ``InterpretedFunction.run`` (``TRITON_INTERPRET=1``)
are wrapped once per process. Each distinct launch is recorded per benchmark: the kernel's
qualified name, a hash of its source, the launch options it was given (``num_warps``,
``num_stages``, ``num_ctas``, ``maxnreg``), its ``tl.constexpr`` arguments and the dtypes of its
tensor arguments; ``Autotuner.run`` is wrapped too, so an autotuned kernel is recorded once, with
the config the autotuner chose (the configs it benchmarks on the way are not launches of the
benchmark). A benchmark launches the same kernel thousands of times while it is timed: after the
first ``EXAMINED`` launches of a test only a kernel not seen before is examined, so the timed
loop pays one set lookup per launch.

**Bounds.** At most ``FILES_LIMIT`` files and ``LAUNCHES_LIMIT`` distinct launches per benchmark;
a record that hit a bound, or could not watch launches (Triton imported only while the test ran,
or a Triton whose classes are not where this expects them) says ``complete: false`` with the
reason in ``notes``: roofwatch then never calls a move of that benchmark an interaction.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.machinery
import inspect
import os
import sys
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FILES_LIMIT = 200
LAUNCHES_LIMIT = 32  # distinct launches kept per benchmark
EXAMINED = 256  # launches of one test examined in full before only new kernels are
VALUE_CHARS = 60
CONTAINER_ITEMS = 1000  # items of one dict/list/tuple in a module's globals looked into
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """A launch value as JSON: numbers and booleans as they are, anything else as short text."""
    value = getattr(value, "value", value)  # tl.constexpr wraps the value
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return str(value)[:VALUE_CHARS]


class _Launches:
    """One test's kernel launches, as the wrappers see them."""

    def __init__(self) -> None:
        self.kept: dict[str, dict[str, Any]] = {}
        self.kernels: set[int] = set()
        self.examined = 0
        self.dropped = 0
        self.autotuning: list[list[dict[str, Any]]] = []  # the launches inside each running Autotuner.run

    def add(self, launch: dict[str, Any]) -> None:
        if self.autotuning:
            self.autotuning[-1].append(launch)
            return
        key = repr(sorted(launch.items()))
        if key in self.kept:
            return
        if len(self.kept) >= LAUNCHES_LIMIT:
            self.dropped += 1
            return
        self.kept[key] = launch


class Recorder:
    """Records what each benchmark of one pytest session ran (see the module docstring)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._hashes: dict[str, str | None] = {}
        self._refs: dict[str, tuple[int, set[str]]] = {}
        self._import_names: dict[str, set[str]] = {}
        self._located: dict[str, tuple[str, bool] | None] = {}
        self._sources: dict[int, str] = {}
        self._hooked = False
        self._hook_error = ""
        self.current: _Launches | None = None
        self._before: set[str] = set()
        self._triton_before = False

    # --- a test's lifetime ---------------------------------------------------------------------

    def begin(self) -> None:
        self._before = set(sys.modules)
        self._triton_before = "triton" in sys.modules
        if self._triton_before:
            self.watch_kernels()
        self.current = _Launches()

    def end(self, item: Any) -> dict[str, Any]:
        launches, self.current = self.current or _Launches(), None
        notes: list[str] = []
        imported = [name for name in set(sys.modules) - self._before]
        starts = [getattr(getattr(item, "module", None), "__name__", ""), *imported]
        files = self._files(starts, self._conftests(item))
        if len(files) > FILES_LIMIT:
            notes.append(f"more than {FILES_LIMIT} files: the first {FILES_LIMIT} by path are kept")
            files = dict(sorted(files.items())[:FILES_LIMIT])
        if "triton" in sys.modules and not self._triton_before and not self._hooked:
            notes.append("Triton was first imported while the benchmark ran: its launches were not watched")
        if self._hook_error and "triton" in sys.modules:
            notes.append(f"kernel launches could not be watched: {self._hook_error}"[:300])
        if launches.dropped:
            notes.append(f"more than {LAUNCHES_LIMIT} distinct launches: {launches.dropped} not kept")
        kernels = sorted(launches.kept.values(), key=lambda k: (k["kernel"], repr(sorted(k.items()))))
        record: dict[str, Any] = {"files": dict(sorted(files.items())), "kernels": kernels, "complete": not notes}
        if notes:
            record["notes"] = notes
        return record

    # --- files ---------------------------------------------------------------------------------

    def _path_of(self, module: Any) -> str | None:
        """The module's file relative to the root (posix), or None when it is not the repository's."""
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            return None
        real = os.path.realpath(file)
        if not real.startswith(self.root + os.sep):
            return None
        return Path(os.path.relpath(real, self.root)).as_posix()

    def _hash(self, relative: str) -> str | None:
        if relative not in self._hashes:
            try:
                self._hashes[relative] = _digest(Path(self.root, relative).read_bytes())
            except OSError:
                self._hashes[relative] = None
        return self._hashes[relative]

    def _conftests(self, item: Any) -> list[Any]:
        """The conftest modules whose folder holds the test's file: their fixtures and hooks apply to it."""
        path = os.path.realpath(str(getattr(item, "path", "") or getattr(item, "fspath", "")))
        found = []
        for plugin in item.config.pluginmanager.get_plugins():
            file = getattr(plugin, "__file__", None)
            if isinstance(plugin, types.ModuleType) and isinstance(file, str) \
                    and os.path.basename(file) == "conftest.py" \
                    and path.startswith(os.path.dirname(os.path.realpath(file)) + os.sep):
                found.append(plugin)
        return found

    def _files(self, names: Iterable[str], modules: Iterable[Any]) -> dict[str, str]:
        """The closure of ``names`` and ``modules`` over the repository's imports (see the module docstring).

        A module is followed through its source's import statements, located on disk without importing
        anything, so what a benchmark's record holds does not depend on what other tests of the process
        happened to import before it; a loaded module is also followed through its globals."""
        files: dict[str, str] = {}
        seen: set[str] = set()
        stack: list[tuple[str, Any]] = [(n, sys.modules.get(n)) for n in names if n]
        stack += [(getattr(m, "__name__", ""), m) for m in modules]
        while stack:
            name, module = stack.pop()
            if not name or name in seen:
                continue
            seen.add(name)
            located = self._locate(name, module)
            if located is None:
                continue  # not the repository's: the environment's, recorded as the environment
            relative, is_package = located
            digest = self._hash(relative)
            if digest is not None:
                files[relative] = digest
            parts = name.split(".")
            referenced = {".".join(parts[:i]) for i in range(1, len(parts))} | self._imports(relative, name, is_package)
            if module is not None:
                referenced |= self._referenced(name, module)
            stack += [(n, sys.modules.get(n)) for n in referenced - seen]
        return files

    def _locate(self, name: str, module: Any) -> tuple[str, bool] | None:
        """(file relative to the root, is a package) of the module ``name``, or None when it is not the
        repository's: a loaded module's ``__file__``; else found on disk as Python's path finder would,
        without importing it or its parents."""
        if module is not None:
            relative = self._path_of(module)
            return None if relative is None else (relative, hasattr(module, "__path__"))
        if name in self._located:
            return self._located[name]
        found: tuple[str, bool] | None = None
        top, _, rest = name.partition(".")
        parent = sys.modules.get(top)
        try:
            places: list[str] = []
            if parent is not None:
                file = getattr(parent, "__file__", None)
                places = list(getattr(parent, "__path__", None) or ([file] if isinstance(file, str) and not rest else []))
            elif (spec := importlib.machinery.PathFinder.find_spec(top)) is not None:
                places = list(spec.submodule_search_locations or ([spec.origin] if spec.origin and not rest else []))
            for part in (rest.split(".") if rest else []):
                places = [p for place in places for p in (os.path.join(place, part),) if os.path.isdir(p)] \
                    or [f for place in places for f in (os.path.join(place, part + ".py"),) if os.path.isfile(f)]
            for place in places:
                file = os.path.join(place, "__init__.py") if os.path.isdir(place) else place
                real = os.path.realpath(file)
                if real.endswith(".py") and os.path.isfile(real) and real.startswith(self.root + os.sep):
                    found = (Path(os.path.relpath(real, self.root)).as_posix(), os.path.isdir(place))
                    break
        except (ImportError, ValueError, OSError):
            found = None
        self._located[name] = found
        return found

    def _referenced(self, name: str, module: Any) -> set[str]:
        """The modules ``module``'s globals name (memoised while its globals keep their size)."""
        try:
            values = list(vars(module).values())
        except TypeError:
            return set()
        cached = self._refs.get(name)
        if cached is not None and cached[0] == len(values):
            return cached[1]
        found: set[str] = set()
        for value in values:
            if isinstance(value, types.ModuleType) and value.__name__.rpartition(".")[0] == name:
                # Importing ``pkg.a`` anywhere sets ``pkg.a`` on the package: that is not the package
                # using it. What the package's own code imports, ``_imports`` reads from its source.
                continue
            _modules_of(value, found, depth=0)
        self._refs[name] = (len(values), found)
        return found

    def _imports(self, relative: str, name: str, is_package: bool) -> set[str]:
        """The modules the file's import statements could name (anywhere in it, lazy ones too)."""
        names = self._import_names.get(relative)
        if names is None:
            names = self._import_names[relative] = _import_statements(Path(self.root, relative), name, is_package)
        return names

    # --- kernels -------------------------------------------------------------------------------

    def watch_kernels(self) -> None:
        """Wrap Triton's launch entry points, once per process (the suite has imported Triton)."""
        if self._hooked or self._hook_error:
            return
        try:
            from triton.runtime.autotuner import Autotuner
            from triton.runtime.jit import JITFunction

            classes: list[type] = [JITFunction]
            try:
                from triton.runtime.interpreter import InterpretedFunction

                classes.append(InterpretedFunction)
            except ImportError:
                pass
        except Exception as exc:  # noqa: BLE001 - any Triton: a record that says so, never a failed suite
            self._hook_error = f"{type(exc).__name__}: {exc}"
            return
        for cls in classes:
            cls.run = self._launch_wrapper(cls.run)  # type: ignore[attr-defined]
        Autotuner.run = self._autotune_wrapper(Autotuner.run)  # type: ignore[method-assign]
        self._hooked = True

    def _launch_wrapper(self, run: Any) -> Any:
        recorder = self

        def run_recorded(fn: Any, *args: Any, **kwargs: Any) -> Any:
            launches = recorder.current
            if launches is not None and not kwargs.get("warmup"):
                launches.examined += 1
                if launches.examined <= EXAMINED or id(fn) not in launches.kernels or launches.autotuning:
                    launches.kernels.add(id(fn))
                    try:
                        launches.add(recorder._launch(fn, args, kwargs))
                    except Exception as exc:  # noqa: BLE001 - never break the launch being watched
                        launches.add({"kernel": _kernel_name(fn), "error": f"{type(exc).__name__}"[:VALUE_CHARS]})
            return run(fn, *args, **kwargs)

        run_recorded.__wrapped__ = run  # type: ignore[attr-defined]
        return run_recorded

    def _autotune_wrapper(self, run: Any) -> Any:
        recorder = self

        def run_autotuned(tuner: Any, *args: Any, **kwargs: Any) -> Any:
            launches = recorder.current
            if launches is None:
                return run(tuner, *args, **kwargs)
            launches.autotuning.append([])
            try:
                return run(tuner, *args, **kwargs)
            finally:
                inner = launches.autotuning.pop()
                if inner:
                    # The last launch is the one made with the chosen config; the others were its trials.
                    chosen = dict(inner[-1])
                    chosen["autotuned"] = _config_text(getattr(tuner, "best_config", None))
                    launches.add(chosen)

        run_autotuned.__wrapped__ = run  # type: ignore[attr-defined]
        return run_autotuned

    def _launch(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        python_fn = getattr(fn, "fn", None)
        names = list(getattr(fn, "arg_names", None) or [])
        bound = dict(zip(names, args))
        bound.update({k: v for k, v in kwargs.items() if k not in ("grid", "warmup")})
        launch: dict[str, Any] = {"kernel": _kernel_name(fn), "source": self._source(fn, python_fn)}
        for name in _constexpr_names(fn, python_fn):
            if name in bound:
                launch[name] = _plain(bound[name])
        for option in LAUNCH_OPTIONS:
            if option in kwargs and kwargs[option] is not None:
                launch[option] = _plain(kwargs[option])
        dtypes = sorted({str(value.dtype).removeprefix("torch.") for value in bound.values()
                         if hasattr(value, "dtype") and hasattr(value, "data_ptr")})
        if dtypes:
            launch["dtypes"] = ",".join(dtypes)[:VALUE_CHARS]
        return launch

    def _source(self, fn: Any, python_fn: Any) -> str:
        cached = self._sources.get(id(fn))
        if cached is None:
            source = getattr(fn, "src", None)
            if not isinstance(source, str):
                try:
                    source = inspect.getsource(python_fn)
                except (OSError, TypeError):
                    source = repr(getattr(python_fn, "__code__", python_fn))
            cached = self._sources[id(fn)] = _digest(source.encode())
        return cached


def _import_statements(path: Path, name: str, is_package: bool) -> set[str]:
    """Every module an ``import`` or ``from … import`` in the file at ``path`` could name (absolute names)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return set()
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".") if package else []
                base = ".".join(parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts)
                stem = ".".join(p for p in (base, node.module or "") if p)
            else:
                stem = node.module or ""
            if stem:
                found.add(stem)
                found.update(f"{stem}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def _kernel_name(fn: Any) -> str:
    python_fn = getattr(fn, "fn", fn)
    return f"{getattr(python_fn, '__module__', '?')}.{getattr(python_fn, '__qualname__', '?')}"[:200]


def _constexpr_names(fn: Any, python_fn: Any) -> list[str]:
    """The kernel's ``tl.constexpr`` parameters (a JITFunction knows them; the interpreter's annotations say)."""
    params = getattr(fn, "params", None)
    if params:
        return [p.name for p in params if getattr(p, "is_constexpr", False)]
    annotations = getattr(python_fn, "__annotations__", None) or {}
    return [name for name, note in annotations.items()
            if "constexpr" in (note if isinstance(note, str) else getattr(note, "__name__", repr(note)))]


def _config_text(config: Any) -> str:
    """An autotune config as one short line: ``BLOCK=128 num_warps=8 num_stages=3``."""
    if config is None:
        return "unknown"
    try:
        values = dict(config.all_kwargs())
    except Exception:  # noqa: BLE001 - a Triton whose Config differs: its own words
        return str(config)[:VALUE_CHARS * 2]
    values.pop("ir_override", None)
    return " ".join(f"{k}={_plain(v)}" for k, v in values.items() if v is not None)[:VALUE_CHARS * 2]


def _modules_of(value: Any, found: set[str], depth: int) -> None:
    """Add the modules ``value`` comes from: a module itself, a function's, class's or kernel's module,
    an instance's class's, and (two levels deep) those of the items of a dict, list, tuple or set."""
    try:
        if isinstance(value, types.ModuleType):
            found.add(value.__name__)
            return
        if isinstance(value, (dict, list, tuple, set, frozenset)):
            if depth < 2:
                items = value.values() if isinstance(value, dict) else value
                for index, item in enumerate(items):
                    if index >= CONTAINER_ITEMS:
                        break
                    _modules_of(item, found, depth + 1)
            return
        module = getattr(value, "__module__", None)
        if isinstance(module, str):
            found.add(module)
        # A kernel's function (Triton's launchers have ``run`` and keep it as ``fn``), a partial's.
        inner = getattr(value, "fn", None) if hasattr(type(value), "run") else None
        if isinstance(value, functools.partial):
            inner = value.func
        inner_module = getattr(inner, "__module__", None)
        if isinstance(inner_module, str):
            found.add(inner_module)
    except Exception:  # noqa: BLE001 - an object whose attributes raise names nothing
        return
