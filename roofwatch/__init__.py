"""roofwatch: one import name for everything it installs.

The service, its workers and its dashboard are ``roofwatch.service``, ``roofwatch.workers`` and
``roofwatch.dashboard`` (the top-level folders of the same names, linked here), so a kernel
repository's own ``kernels``, ``suites``, ``service`` or ``dashboard`` packages shadow nothing of
roofwatch. The measuring harness a repository imports stands alone (no service code). Its public
surface:

- ``roofwatch.pytest_plugin``: the ``pytest11`` entry point ``roofwatch``, loaded by pytest in
  any environment where roofwatch is installed. It registers the ``kernel_benchmark`` and
  ``kernel_timer`` fixtures.
- ``roofwatch.testing``: correctness checks against an fp64 reference (per-dtype and
  torch-relative tolerances, NaN-poisoned outputs, guard canaries, error properties).
- ``roofwatch.timing`` and ``roofwatch.harness``: the timers behind the fixture, for suites
  that need a timer of their own.
- ``roofwatch.roofline``: attainable performance under the compute and memory roofs (cache
  levels included) and the fraction of it one call reached.
- ``roofwatch.triton_interpreter``: what GPU kernel libraries use that Triton's interpreter
  lacks (libdevice math, float scalar arguments), patched where probes find it missing, and one
  warning for the bf16 arithmetic it computes wrongly; ``--roofwatch-triton-compat`` in pytest.

This package imports neither torch nor triton at import time, so loading the plugin costs a
pytest run that benchmarks nothing almost no start-up time.
"""
