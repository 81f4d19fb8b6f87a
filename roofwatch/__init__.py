"""roofwatch's measuring harness, installed under a name no kernel repository uses for itself.

A kernel repository's own ``kernels``, ``suites``, ``service`` or ``dashboard`` packages shadow
roofwatch's folders of the same names on a suite's ``PYTHONPATH``; nothing a repository imports
from roofwatch lives under them. The public surface:

- ``roofwatch.pytest_plugin``: the ``pytest11`` entry point ``roofwatch``, loaded by pytest in
  any environment where roofwatch is installed. It registers the ``kernel_benchmark`` and
  ``kernel_timer`` fixtures.
- ``roofwatch.testing``: correctness checks against an fp64 reference (per-dtype and
  torch-relative tolerances, NaN-poisoned outputs, guard canaries, error properties).
- ``roofwatch.timing`` and ``roofwatch.harness``: the timers behind the fixture, for suites
  that need a timer of their own.

This package imports neither torch nor triton at import time, so loading the plugin costs a
pytest run that benchmarks nothing almost no start-up time.
"""
