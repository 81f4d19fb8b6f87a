"""A Triton kernel repository whose history plants compiled-code changes.

Commits, oldest first (names are the keys of the returned dict):

- ``base``     a tiled matmul (64x64x64 tiles, 3 stages) and an elementwise scale kernel
- ``comment``  neutral: comments added inside the kernel, shifting its lines
- ``bigger``   the matmul tile grows to 128x128x64: more registers and shared memory
- ``too_big``  the tile grows to 256x256x128 with 4 stages: more shared memory than Hopper has

The checks call the kernels the way a user does; under the compile plugin they are recorded,
not run, so the suite needs no GPU.
"""

from __future__ import annotations

from pathlib import Path

from support.sample_repo import commit, init

PYPROJECT = """\
[project]
name = "triton-tiles"
version = "0.0.1"

[[tool.roofwatch.suites]]
name = "compiled"
kind = "compile"
command = "python -m pytest checks -q -p no:cacheprovider"
targets = ["sm_90"]
timeout = 600
"""

KERNELS = """\
import torch
import triton
import triton.language as tl

TILE = (64, 64, 64)
NUM_STAGES = 3


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty))


@triton.jit
def _scale_kernel(x_ptr, out_ptr, factor, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def matmul(a, b):
    m, k = a.shape
    _, n = b.shape
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    bm, bn, bk = TILE
    _matmul_kernel[(triton.cdiv(m, bm), triton.cdiv(n, bn))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=NUM_STAGES)
    return c


def scale(x, factor):
    out = torch.empty_like(x)
    _scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, factor, x.numel(), BLOCK=1024)
    return out
"""

CHECKS = """\
import torch

from tiles import matmul, scale


def test_matmul():
    a = torch.randn(512, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 512, dtype=torch.bfloat16)
    torch.testing.assert_close(matmul(a, b), (a.float() @ b.float()).to(torch.bfloat16), atol=1e-1, rtol=1e-2)


def test_scale():
    x = torch.randn(4096)
    torch.testing.assert_close(scale(x, 2.0), x * 2.0)
"""

COMMENTED = KERNELS.replace(
    "    acc = tl.zeros(",
    "    # The accumulator stays in fp32 whatever the inputs are:\n"
    "    # bf16 partial sums would lose the low bits of long K loops.\n"
    "    acc = tl.zeros(")


def build_history(repo: Path) -> dict[str, str]:
    init(repo)
    files = {"pyproject.toml": PYPROJECT, "tiles.py": KERNELS, "checks/test_tiles.py": CHECKS}
    shas = {"base": commit(repo, "Tiled matmul and scale kernels", files, 1)}
    shas["comment"] = commit(repo, "Explain the fp32 accumulator", {"tiles.py": COMMENTED}, 2)
    shas["bigger"] = commit(repo, "Matmul: 128x128 tiles",
                            {"tiles.py": COMMENTED.replace("TILE = (64, 64, 64)", "TILE = (128, 128, 64)")}, 3)
    shas["too_big"] = commit(repo, "Matmul: 256x256x128 tiles, 4 stages", {"tiles.py": COMMENTED.replace(
        "TILE = (64, 64, 64)", "TILE = (256, 256, 128)").replace("NUM_STAGES = 3", "NUM_STAGES = 4")}, 4)
    return shas
