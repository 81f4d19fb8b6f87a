"""roofwatch's import graph as import-linter builds it (grimp, imports inside functions included).

Run as a script (``python tests/support/import_graph.py``) it prints, as JSON, the graph's size and every
import cycle among the parts of the code and among the modules of ``service`` and ``workers``:
the test runs it in a fresh interpreter, so it can point it at a copy of the tree with a
planted import.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import grimp

ROOTS = ("roofwatch", "kernels", "suites")

# Packages beside the ground floor that the workers and the service both stand on.
NEUTRAL_FLOORS = ("ab", "git", "suite_config", "result_files")


def part(module: str) -> str:
    """The part of the code a module belongs to: a package of ``service``, ``workers``, ``dashboard``,
    the ground floor ``common``, a neutral floor (``NEUTRAL_FLOORS``), the harness (the rest of
    ``roofwatch``), ``kernels`` or ``suites``."""
    names = module.split(".")
    if names[0] != "roofwatch":
        return names[0]
    if len(names) >= 3 and names[1] == "service":
        return f"service.{names[2]}"
    if len(names) >= 2 and names[1] in ("service", "workers", "dashboard", "common", *NEUTRAL_FLOORS):
        return names[1]
    return "harness"


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every group of two or more nodes that reach each other (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
        if node not in index:
            visit(node)
    return sorted(found)


def report() -> dict[str, object]:
    # no cache: the guard reads the files as they are (a cache keyed on timestamps has missed a move)
    graph = grimp.build_graph(*ROOTS, cache_dir=None)
    ours = {m for m in graph.modules if m.split(".")[0] in ROOTS}
    imports = {m: {n for n in graph.find_modules_directly_imported_by(m) if n in ours} for m in ours}
    parts: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports.items():
        parts[part(module)] |= {part(t) for t in targets if part(t) != part(module)}

    def within(prefix: str) -> dict[str, set[str]]:
        return {m: {t for t in ts if t.startswith(prefix)} for m, ts in imports.items() if m.startswith(prefix)}

    return {
        "modules": len(ours), "imports": sum(len(t) for t in imports.values()),
        "part_edges": sorted([a, b] for a, targets in parts.items() for b in targets),
        "part_cycles": strongly_connected(parts),
        "service_cycles": strongly_connected(within("roofwatch.service.")),
        "workers_cycles": strongly_connected(within("roofwatch.workers.")),
    }


if __name__ == "__main__":
    json.dump(report(), sys.stdout)
