"""A small Triton kernel library as a new user brings it to ``roofwatch init``.

Shaped like Liger-Kernel: ``src/minikern/ops/scale.py`` holds a ``@triton.jit`` kernel and its
launcher, ``src/minikern/__init__.py`` re-exports the launcher, ``src/minikern/layers.py`` wraps
it (a host layer over the kernel), and ``setup.py`` declares the dependencies through a function
(the way platform-switching libraries do) and runs code at import that must never run. The tests:

- ``test/test_scale.py``: the kernel through the package's re-export, on whichever device there is;
- ``test/test_layers.py``: the kernel through the host layer (one module in between);
- ``test/test_scale_cuda.py``: hard-codes ``device="cuda"``: CUDA-only;
- ``test/test_backend_gpu.py``: ``pytestmark`` skips it without CUDA: CUDA-only;
- ``test/test_version.py``: reaches no kernel.

No pytest-benchmark tests, so ``init`` writes a ``kernel_benchmark`` file.
"""

from __future__ import annotations

from pathlib import Path

from support.sample_repo import commit, init

MARKER = "setup-py-was-executed"

SETUP_PY = f"""\
import pathlib
import subprocess

from setuptools import find_packages, setup

pathlib.Path("{MARKER}").touch()  # a setup.py is a program: init must read it, never run it


def platform_requirements():
    try:
        subprocess.run(["nvidia-smi"], check=True)
        return ["torch>=2.0", "triton>=3.0"]
    except FileNotFoundError:
        return ["torch>=2.0", "triton>=3.0"]


TEST = ["pytest>=7", "minikern-testkit>=1.2"]

setup(
    name="minikern",
    version="0.1",
    package_dir={{"": "src"}},
    packages=find_packages(where="src"),
    install_requires=platform_requirements(),
    extras_require={{"test": TEST, "plots": ["matplotlib"]}},
)
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "minikern"
version = "0.1"
dynamic = ["dependencies", "optional-dependencies"]
"""
SCALE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha, mask=mask)


def scale(x, alpha):
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 128),)](x, out, alpha, n, BLOCK=128)
    return out
"""
INIT = "from .ops.scale import scale\n\n__version__ = \"0.1\"\n"
LAYERS = """\
import torch

from minikern.ops.scale import scale


class Scale(torch.nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return scale(x, self.alpha)
"""
TEST_SCALE = """\
import torch

from minikern import scale

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_scale_odd_shape():
    x = torch.randn(1000, device=DEVICE)
    torch.testing.assert_close(scale(x, 2.5), x * 2.5)
"""
TEST_LAYERS = """\
import torch

from minikern.layers import Scale


def test_layer(device=None):
    x = torch.randn(300, device="cuda" if torch.cuda.is_available() else "cpu")
    torch.testing.assert_close(Scale(3.0)(x), x * 3.0)
"""
TEST_SCALE_CUDA = """\
import torch

from minikern.ops.scale import scale


def test_scale_on_the_gpu():
    x = torch.randn(4096, device="cuda")
    torch.testing.assert_close(scale(x, 2.0), x * 2.0)
"""
TEST_BACKEND_GPU = """\
import pytest
import torch

from minikern.ops import scale as ops

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def test_large():
    x = torch.randn(1 << 24, device="cuda")
    torch.testing.assert_close(ops.scale(x, 2.0), x * 2.0)
"""
TEST_VERSION = """\
from minikern.version import VERSION


def test_version():
    assert VERSION == "0.1"
"""

FILES = {
    "setup.py": SETUP_PY, "pyproject.toml": PYPROJECT, "src/minikern/__init__.py": INIT,
    "src/minikern/ops/__init__.py": "", "src/minikern/ops/scale.py": SCALE, "src/minikern/layers.py": LAYERS,
    "src/minikern/version.py": 'VERSION = "0.1"\n',
    "test/test_scale.py": TEST_SCALE, "test/test_layers.py": TEST_LAYERS, "test/test_scale_cuda.py": TEST_SCALE_CUDA,
    "test/test_backend_gpu.py": TEST_BACKEND_GPU, "test/test_version.py": TEST_VERSION,
}


def kernel_library(repo: Path) -> str:
    """The library as one commit in a new git repository at ``repo``; its SHA."""
    init(repo)
    return commit(repo, "minikern: a scale kernel", FILES, 1)
