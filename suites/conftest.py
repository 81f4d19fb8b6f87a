"""Shared pytest setup for the suites: interpreter mode without a GPU, and fixed seeds.

``kernel_benchmark`` comes from roofwatch's pytest plugin (``roofwatch.pytest_plugin``), as it
does for any repository in an environment with roofwatch installed.

``triton.jit`` decides at decoration time whether a kernel is compiled or interpreted, so
``TRITON_INTERPRET`` must be in the environment before any ``kernels`` module is imported.
pytest imports this file before collecting the test modules under ``suites/``, which is the
earliest point a suite controls. Without a GPU there is nothing to compile for; the
interpreter runs the same kernel source on CPU tensors with numpy, so correctness is checked
everywhere and CI machines need no accelerator.
"""

import os
import random

import numpy as np
import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

SEED = 0


@pytest.fixture(autouse=True)
def _fixed_seeds() -> None:
    """Reseed every generator a test might touch, so a failure reproduces on rerun."""
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
