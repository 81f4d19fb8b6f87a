"""Which modules of a repository define Triton kernels, which tests exercise them, and which of those need CUDA."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.kernel_library import FILES, kernel_library

from roofwatch.workers.kernel_tests import cuda_only, find


def test_a_kernel_library_s_kernels_and_the_tests_a_cpu_can_run(tmp_path: Path) -> None:
    kernel_library(tmp_path / "repo")

    found = find(tmp_path / "repo", src_layout=True)

    [module] = found.modules
    assert (module.name, module.path, module.kernels) == ("minikern.ops.scale", "src/minikern/ops/scale.py",
                                                          ("_scale_kernel",))
    assert module.launchers == ("scale(x, alpha)",)
    # test_scale through the package's re-export, test_layers through the host layer in between.
    assert found.tests == ["test/test_layers.py", "test/test_scale.py"]
    assert found.tested == {"minikern.ops.scale"}
    assert dict(found.cuda_only) == {
        "test/test_backend_gpu.py": "every test skips without CUDA (line 6)",
        "test/test_scale_cuda.py": "hard-codes a CUDA device (line 7) and has no CPU path"}
    assert found.other_tests == 1  # test_version reaches no kernel
    assert {"torch", "triton"} <= found.imports and "minikern" not in found.imports


def test_kernels_are_found_under_any_spelling_of_triton_jit(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "import triton as tt\n\n@tt.jit(do_not_specialize=['n'])\ndef k(x):\n    pass\n",
        "pkg/b.py": "from triton import jit\n\n@jit\ndef k(x):\n    pass\n",
        "pkg/c.py": ("import triton\n\n@triton.autotune(configs=[], key=[])\n@triton.jit\ndef k(x):\n    pass\n\n"
                     "class Op:\n    @staticmethod\n    def forward(ctx, x):\n        k[(1,)](x)\n"),
        "pkg/d.py": "import numba\n\n@numba.jit\ndef k(x):\n    pass\n",  # not Triton
        "pkg/e.py": "def jit(f):\n    return f\n\n@jit\ndef k(x):\n    pass\n",  # a jit of its own
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    found = find(tmp_path, src_layout=False)

    assert [m.name for m in found.modules] == ["pkg.a", "pkg.b", "pkg.c"]
    assert found.modules[2].launchers == ("Op.forward(x)",)


def test_a_test_reaching_kernels_only_through_a_model_is_left_out(tmp_path: Path) -> None:
    files = {
        "lib/__init__.py": "", "lib/ops.py": "import triton\n\n@triton.jit\ndef k(x):\n    pass\n",
        "lib/layer.py": "from lib.ops import k\n", "lib/model.py": "from lib.layer import *\n",
        "tests/test_model.py": "from lib.model import Model\n\ndef test_m():\n    pass\n",
        "tests/test_star.py": "from lib.layer import *\n\ndef test_s():\n    pass\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    found = find(tmp_path, src_layout=False)

    assert found.tests == ["tests/test_star.py"] and found.other_tests == 1


CPU_RUNNABLE = {
    "a device picked at run time": "from lib import infer_device\ndevice = infer_device()\n"
                                   "def test_x():\n    t = torch.ones(3, device=device)\n",
    "a cuda-or-cpu choice": 'DEVICE = "cuda" if torch.cuda.is_available() else "cpu"\n',
    "one test skipped without CUDA, others not": (
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\ndef test_gpu():\n    pass\n\n"
        "def test_cpu():\n    pass\n"),
    "a skip on GPUs only": "pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason='cpu only')\n",
    "a comparison with the device name": 'def test_x(device):\n    if device == "cuda":\n        pass\n',
}
CUDA_ONLY = {
    "a module-level skip mark": (
        "pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')]\n",
        "every test skips without CUDA (line 1)"),
    "a skip through a module-level name": (
        "HAS_GPU = torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9\n"
        "pytestmark = pytest.mark.skipif(not HAS_GPU, reason='hopper')\n", "every test skips without CUDA (line 2)"),
    "a compared device count": (
        "pytestmark = pytest.mark.skipif(torch.cuda.device_count() < 2, reason='two GPUs')\n",
        "every test skips without CUDA (line 1)"),
    "a module-level pytest.skip": (
        "if not torch.cuda.is_available():\n    pytest.skip('gpu', allow_module_level=True)\n",
        "every test skips without CUDA (line 1)"),
    "every test marked by a named mark": (
        "needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\n\n"
        "@needs_gpu\ndef test_a():\n    pass\n\n@needs_gpu\ndef test_b():\n    pass\n",
        "every test is marked to skip without CUDA (line 4)"),
    "a CUDA-only library": ("import cutlass.cute as cute\n", "imports cutlass.cute, which runs only on NVIDIA GPUs (line 1)"),
    "flash-attn": ("from flash_attn import flash_attn_func\n",
                   "imports flash_attn, which runs only on NVIDIA GPUs (line 1)"),
    "a hard-coded device keyword": ("def test_x():\n    t = torch.ones(3, device='cuda:0')\n",
                                    "hard-codes a CUDA device (line 2) and has no CPU path"),
    "tensors moved with .cuda()": ("def test_x():\n    t = torch.ones(3).cuda()\n",
                                   "hard-codes a CUDA device (line 2) and has no CPU path"),
    "a CUDA device constant": ('DEVICE = "cuda"\n', "hard-codes a CUDA device (line 1) and has no CPU path"),
    "a capability query is no device choice": (
        "def test_x():\n    torch.cuda.get_device_capability()\n    torch.ones(1, device=torch.device('cuda'))\n",
        "hard-codes a CUDA device (line 3) and has no CPU path"),
}


@pytest.mark.parametrize("source", CPU_RUNNABLE.values(), ids=CPU_RUNNABLE.keys())
def test_a_test_file_with_a_cpu_path_is_kept(source: str) -> None:
    assert cuda_only(ast.parse(source)) is None


@pytest.mark.parametrize(("source", "why"), CUDA_ONLY.values(), ids=CUDA_ONLY.keys())
def test_a_test_file_that_needs_cuda_is_left_out_with_the_reason(source: str, why: str) -> None:
    assert cuda_only(ast.parse(source)) == why


def test_a_test_that_loads_a_cuda_only_library_through_the_package_is_left_out(tmp_path: Path) -> None:
    files = dict(FILES)
    files["src/minikern/ops/cute.py"] = "import cutlass\n\nfrom minikern.ops.scale import scale\n"
    files["test/test_cute.py"] = "from minikern.ops.cute import scale\n\ndef test_c():\n    pass\n"
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    found = find(tmp_path, src_layout=True)

    assert dict(found.cuda_only)["test/test_cute.py"] == (
        "importing it loads cutlass (through the repository's modules), which runs only on NVIDIA GPUs")
    assert "cutlass" not in found.imports
