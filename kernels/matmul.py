"""Dense matrix multiply ``C = A @ B`` with fp32 accumulation.

One tiled kernel serves fp16, bf16 and fp8 e4m3. Each program computes a ``BLOCK_M x BLOCK_N``
tile of C, walking K in ``BLOCK_K`` steps; programs are numbered in groups of
``GROUP_SIZE_M`` tile rows so that tiles running at the same time share rows of A and columns of
B in L2 (Triton tutorial 03, "L2 cache optimizations"). fp16/bf16 results are stored in the
input dtype; fp8 e4m3 takes one fp32 scale per tensor and stores bf16, as ``torch._scaled_mm``.
"""

import os

import torch
import triton
import triton.language as tl

__all__ = [
    "FP8_DTYPE",
    "FP8_MIN_CAPABILITY",
    "SUPPORTED_DTYPES",
    "fp8_unsupported_reason",
    "matmul",
    "matmul_bytes",
    "matmul_flops",
    "matmul_reference",
]

FP8_DTYPE = torch.float8_e4m3fn
SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16, FP8_DTYPE)
# Ada (8.9) and Hopper (9.0) are the first with fp8 tensor cores.
FP8_MIN_CAPABILITY = (8, 9)

_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

# Hopper tiles as (BLOCK_M, BLOCK_N, num_stages, num_warps). The 128x256 and 256x128 tiles
# with 8 warps (two warpgroups issuing wgmma) are where large bf16 GEMMs peak; the smaller ones
# keep skinny or small problems from leaving most SMs idle.
_HOPPER_TILES = [
    (128, 256, 3, 8),
    (256, 128, 3, 8),
    (128, 256, 4, 8),
    (128, 128, 4, 8),
    (128, 128, 4, 4),
    (128, 64, 4, 4),
    (64, 128, 4, 4),
    (64, 64, 4, 4),
]
# Each K-slice of a tile row is 128 bytes (BLOCK_K 64 for 16-bit types, 128 for fp8): the
# widest shared-memory swizzle, which wgmma reads without bank conflicts.
_K_SLICE_BYTES = 128
# Hopper's shared memory per block (227 KiB) less a little for the epilogue and barriers.
_SHARED_MEMORY_BUDGET = 220 * 1024


def _configs() -> list[triton.Config]:
    if _INTERPRETED:
        # The interpreter runs one program per tile in numpy: autotuning would only multiply
        # the run time. 32-wide tiles make the CPU shapes (up to 100) span several tiles, and a
        # group of 3 tile rows leaves a partial last group, so grouping and edges are exercised.
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_SIZE_M": 3})]
    return [
        triton.Config(
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": block_k, "GROUP_SIZE_M": 8},
            num_stages=stages,
            num_warps=warps,
        )
        for block_k in (64, 128)
        for bm, bn, stages, warps in _HOPPER_TILES
    ]


def _prune_configs(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Keep the configs whose K-slice is 128 bytes and whose pipeline fits in shared memory."""
    itemsize = named_args["a_ptr"].element_size()
    kept = []
    for config in configs:
        meta = config.kwargs
        stage_bytes = (meta["BLOCK_M"] + meta["BLOCK_N"]) * meta["BLOCK_K"] * itemsize
        if meta["BLOCK_K"] * itemsize == _K_SLICE_BYTES and config.num_stages * stage_bytes <= _SHARED_MEMORY_BUDGET:
            kept.append(config)
    return kept


@triton.autotune(
    configs=_configs(),
    key=["M", "N", "K"],
    prune_configs_by=None if _INTERPRETED else {"early_config_prune": _prune_configs},
)
@triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    scale_a_ptr,
    scale_b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    IS_FP8: tl.constexpr,
    UPCAST_OPERANDS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    # Grouped ordering: consecutive programs sweep GROUP_SIZE_M tile rows column by column,
    # so a wave of programs reuses a few rows of A and columns of B from L2 instead of
    # streaming all of B once per tile row.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge read row/column 0 instead, so the loads need no M/N mask
    # (the store mask drops those lanes); the hints let the compiler vectorize the loads
    # (Triton tutorial 09, persistent matmul). int64: row * stride passes 2**31 on large operands.
    offs_am = tl.where(offs_m < M, offs_m, 0)
    offs_bn = tl.where(offs_n < N, offs_n, 0)
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_M), BLOCK_M).to(tl.int64)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_N), BLOCK_N).to(tl.int64)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            # Zeros past K add nothing to the dot product.
            k_remaining = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_remaining, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_remaining, other=0.0)
        if UPCAST_OPERANDS:
            # Interpreter only: it multiplies bf16 bit patterns as integers (it "does not
            # support operations on bfloat16", Triton debugging guide). Products of bf16 values
            # are exact in fp32, so this matches the tensor cores' bf16 x bf16 -> fp32.
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if IS_FP8:
            # Hopper's fp8 wgmma accumulates in reduced precision; folding into the fp32
            # accumulator after every BLOCK_K (128) products bounds that error, as cuBLAS does
            # when fast accumulation is off (torch._scaled_mm's default).
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if IS_FP8:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def fp8_unsupported_reason(device: torch.device) -> str | None:
    """Why fp8 e4m3 ``matmul`` cannot run on ``device``, or ``None`` where it can."""
    if _INTERPRETED:
        return (
            "fp8 e4m3 matmul is not run under the Triton interpreter: it emulates e4m3 through "
            "fp16 in numpy and says nothing about the fp8 tensor-core path this kernel exists for"
        )
    if device.type != "cuda":
        return f"fp8 e4m3 matmul needs a CUDA device, got {device.type}"
    capability = torch.cuda.get_device_capability(device)
    if capability < FP8_MIN_CAPABILITY:
        return (
            f"fp8 e4m3 matmul needs compute capability >= {FP8_MIN_CAPABILITY[0]}.{FP8_MIN_CAPABILITY[1]}; "
            f"{torch.cuda.get_device_name(device)} is {capability[0]}.{capability[1]}"
        )
    return None


def _check_scale(name: str, scale: torch.Tensor | None, device: torch.device) -> torch.Tensor:
    if scale is None:
        raise ValueError(f"fp8 inputs need per-tensor scales: pass {name}")
    if scale.numel() != 1 or scale.dtype != torch.float32 or scale.device != device:
        raise ValueError(
            f"{name} must be one fp32 value on {device}, got {tuple(scale.shape)} {scale.dtype} on {scale.device}"
        )
    return scale


def _check_out(out: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> None:
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != device:
        raise ValueError(
            f"out must be {shape} {dtype} on {device}, got {tuple(out.shape)} {out.dtype} on {out.device}"
        )


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor | None = None,
    *,
    scale_a: torch.Tensor | None = None,
    scale_b: torch.Tensor | None = None,
) -> torch.Tensor:
    """``a @ b``, accumulated in fp32.

    Args:
        a: ``(M, K)`` fp16, bf16 or ``torch.float8_e4m3fn`` tensor, any strides.
        b: ``(K, N)`` tensor of the same dtype and device, any strides. For fp8, a column-major
            ``b`` (``b_t.t()``) is the layout Hopper's fp8 tensor cores read directly.
        out: optional ``(M, N)`` tensor of the output dtype, any strides; every element is written.
        scale_a, scale_b: fp8 only, required: one fp32 value each on the inputs' device;
            the result is ``(a @ b) * scale_a * scale_b``.

    Returns:
        ``(M, N)`` tensor: ``a.dtype`` for fp16/bf16, bf16 for fp8. ``out`` when given.

    Raises:
        ValueError: shapes, devices, dtypes or scales that do not fit together.
        TypeError: an unsupported dtype.
        RuntimeError: fp8 on a device without fp8 tensor cores (see ``fp8_unsupported_reason``).
    """
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul expects 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if a.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"matmul supports {SUPPORTED_DTYPES}, got {a.dtype}")
    if b.dtype != a.dtype or b.device != a.device:
        raise ValueError(f"a and b must share dtype and device, got {a.dtype} on {a.device}, {b.dtype} on {b.device}")
    is_fp8 = a.dtype == FP8_DTYPE
    if is_fp8:
        reason = fp8_unsupported_reason(a.device)
        if reason is not None:
            raise RuntimeError(reason)
        scale_a = _check_scale("scale_a", scale_a, a.device)
        scale_b = _check_scale("scale_b", scale_b, a.device)
    elif scale_a is not None or scale_b is not None:
        raise ValueError("scale_a/scale_b apply to fp8 inputs only")

    (m, k), n = a.shape, b.shape[1]
    out_dtype = torch.bfloat16 if is_fp8 else a.dtype
    if out is None:
        out = torch.empty((m, n), dtype=out_dtype, device=a.device)
    else:
        _check_out(out, (m, n), out_dtype, a.device)
    if m == 0 or n == 0:
        return out

    def grid(meta: dict) -> tuple[int]:
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    _matmul_kernel[grid](
        a,
        b,
        out,
        scale_a,
        scale_b,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        out.stride(0),
        out.stride(1),
        IS_FP8=is_fp8,
        UPCAST_OPERANDS=_INTERPRETED and a.dtype == torch.bfloat16,
    )
    return out


def matmul_reference(
    a: torch.Tensor,
    b: torch.Tensor,
    out_dtype: torch.dtype | None = None,
    *,
    scale_a: torch.Tensor | None = None,
    scale_b: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(a @ b) * scale_a * scale_b`` computed in fp64 by torch.

    Args:
        a, b: as for ``matmul``.
        out_dtype: dtype of the result; ``None`` gives ``matmul``'s output dtype. Pass
            ``torch.float64`` to measure a kernel's error against the unrounded values.
    """
    result = a.to(torch.float64) @ b.to(torch.float64)
    for scale in (scale_a, scale_b):
        if scale is not None:
            result = result * scale.to(torch.float64)
    if out_dtype is None:
        out_dtype = torch.bfloat16 if a.dtype == FP8_DTYPE else a.dtype
    return result.to(out_dtype)


# C[m, n] = sum_k A[m, k] * B[k, n]: one multiply and one add per (m, n, k) -> 2 * M * N * K.
# Compulsory bytes: A and B read once, C written once. Tiles re-read A N/BLOCK_N times and B
# M/BLOCK_M times, but from L2 (the grouped order is there for that), not from HBM.
def matmul_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one ``(M, K) @ (K, N)`` product, in FLOP."""
    return 2 * m * n * k


def matmul_bytes(m: int, n: int, k: int, dtype: torch.dtype, out_dtype: torch.dtype | None = None) -> int:
    """Compulsory memory traffic of one ``matmul`` call, in bytes (A, B read once; C written once).

    ``out_dtype`` defaults to ``matmul``'s output dtype for ``dtype`` (bf16 for fp8).
    """
    if out_dtype is None:
        out_dtype = torch.bfloat16 if dtype == FP8_DTYPE else dtype
    return (m * k + k * n) * dtype.itemsize + m * n * out_dtype.itemsize
