"""Symmetric row-wise int8 quantization and a weight-only int8 matmul (W8A16).

``quantize_int8_rowwise`` maps each row ``x`` to ``q = round(x / scale)`` with
``scale = max|x| / 127``, rounding half to even and clamping to ``[-127, 127]`` (-128 is never
produced, so the grid is symmetric). A row of zeros gets ``scale = 0`` and ``q = 0``. The
divisions are IEEE round-to-nearest (``tl.div_rn``), so ``q`` equals torch's result bit for bit,
not merely within one step.

``w8a16_matmul`` multiplies fp16/bf16 activations ``(M, K)`` by int8 weights ``(N, K)`` with one
fp32 scale per output channel: int8 tiles are widened to the activation dtype in registers
(every int8 is exact in fp16 and bf16), accumulated in fp32 by ``tl.dot``, and the scale is
applied once per output in the epilogue, since it factors out of the sum over ``K``.
"""

import os

import torch
import triton
import triton.language as tl

__all__ = [
    "ACTIVATION_DTYPES",
    "QMAX",
    "ROW_BLOCK",
    "SUPPORTED_DTYPES",
    "dequantize_int8_rowwise",
    "dequantize_int8_rowwise_reference",
    "quantize_bytes",
    "quantize_flops",
    "quantize_int8_rowwise",
    "quantize_int8_rowwise_reference",
    "w8a16_bytes",
    "w8a16_flops",
    "w8a16_matmul",
    "w8a16_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATION_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)

QMAX = 127
# A row up to this long is quantized from one block; longer rows are streamed twice.
ROW_BLOCK = 4096
_DEQUANT_BLOCK = 1024

# triton.jit picks compiled or interpreted execution from this variable when it decorates a
# kernel; the matmul's autotuner must agree with it, since timing configs means nothing when
# every program runs in numpy. The interpreter (Triton 3.9) also multiplies bf16 dot operands
# as their raw 16-bit patterns and converts int8 -> bf16 wrongly, so there, and only there, a
# bf16 tile product is taken in fp32: the same exact products and fp32 sums the tensor cores
# give, through numpy.
_INTERPRETING = os.environ.get("TRITON_INTERPRET", "0") == "1"


@triton.jit
def _round_half_even(y):
    # libdevice.rint has no interpreter implementation, so round-half-even is spelled out.
    # Exact for |y| < 2**23: y - floor(y) is exact, and so is the parity test on an integer.
    r = tl.floor(y)
    frac = y - r
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return r + ((frac > 0.5) | ((frac == 0.5) & odd)).to(tl.float32)


@triton.jit
def _quantize_rowwise_kernel(
    x_ptr,
    q_ptr,
    scale_ptr,
    x_row_stride,
    q_row_stride,
    n_cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    q_row = q_ptr + row * q_row_stride
    offsets = tl.arange(0, BLOCK)

    # Pass 1: the row's absolute maximum, kept per lane and reduced once.
    absmax = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        absmax = tl.maximum(absmax, tl.abs(x))
    scale = tl.div_rn(tl.max(absmax, axis=0), 127.0)
    tl.store(scale_ptr + row, scale)

    # Pass 2: quantize. A zero row divides 0 by 1 instead of 0 by 0. A row that fits one block
    # is re-read from L1, a longer one mostly from L2.
    divisor = tl.where(scale == 0.0, 1.0, scale)
    for start in range(0, n_cols, BLOCK):
        cols = start + offsets
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        q = _round_half_even(tl.div_rn(x, divisor))
        q = tl.minimum(tl.maximum(q, -127.0), 127.0)
        tl.store(q_row + cols, q.to(tl.int8), mask=mask)


@triton.jit
def _dequantize_rowwise_kernel(
    q_ptr,
    scale_ptr,
    out_ptr,
    q_row_stride,
    out_row_stride,
    n_cols,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    scale = tl.load(scale_ptr + row)
    q = tl.load(q_ptr + row * q_row_stride + cols, mask=mask, other=0).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, (q * scale).to(out_ptr.dtype.element_ty), mask=mask)


def _matmul_configs() -> list[triton.Config]:
    if _INTERPRETING:
        # Small tiles keep numpy's per-program work short; K and N of the tests are not
        # multiples of them, so the masked edges are still exercised.
        return [triton.Config({"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, num_warps=4)]
    return [
        # Decode (M <= 16): a GEMV bound by reading the int8 weights; long K tiles, many N blocks.
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 256, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 8}, num_warps=4, num_stages=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=4, num_stages=4),
        # Prefill: square-ish tiles for reuse, as in the Triton matmul tutorial.
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, num_warps=4, num_stages=4),
    ]


@triton.autotune(configs=_matmul_configs(), key=["M", "N", "K"])
@triton.jit
def _w8a16_matmul_kernel(
    a_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_wn,
    stride_wk,
    stride_om,
    stride_on,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
):
    # Grouped launch order (Triton matmul tutorial): GROUP_M row blocks sweep the N blocks
    # together, so a weight tile is reused from L2 by several row blocks before eviction.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    # Rows and columns past the edge wrap onto valid ones, so the loads need no M/N mask;
    # the store below drops them. Offsets are int32: each operand must stay below 2**31
    # elements (14336 x 4096 is 5.9e7).
    offs_am = offs_m % M
    offs_wn = offs_n % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    # The weight tile is read as (BLOCK_K, BLOCK_N), i.e. already transposed for the dot.
    w_ptrs = w_ptr + offs_wn[None, :] * stride_wn + offs_k[:, None] * stride_wk

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        w = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0)
        if DOT_IN_FP32:
            acc = tl.dot(a.to(tl.float32), w.to(tl.float32), acc)
        else:
            # Dequantize in registers: int8 -> activation dtype is exact; the scale waits.
            acc = tl.dot(a, w.to(a.dtype), acc)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk

    scale = tl.load(scale_ptr + offs_wn)
    out = (acc * scale[None, :]).to(out_ptr.dtype.element_ty)
    out_ptrs = out_ptr + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, out, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _row_block(cols: int) -> int:
    return min(triton.next_power_of_2(max(cols, 1)), ROW_BLOCK)


def _num_warps(block: int) -> int:
    if block >= 4096:
        return 8
    if block >= 1024:
        return 4
    return 2


def _check_out(name: str, out: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> None:
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != device:
        raise ValueError(f"{name} must be {shape} {dtype} on {device}, got {tuple(out.shape)} {out.dtype} on {out.device}")
    if len(shape) == 2 and shape[1] > 1 and out.stride(1) != 1:
        raise ValueError(f"{name} must be contiguous along its last dimension")
    if len(shape) == 1 and shape[0] > 1 and out.stride(0) != 1:
        raise ValueError(f"{name} must be contiguous")


def quantize_int8_rowwise(
    x: torch.Tensor, out: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8 quantization of a 2-D tensor.

    Args:
        x: ``(rows, cols)`` fp32, fp16 or bf16, finite; any row stride.
        out: optional ``(q, scale)``: an int8 ``(rows, cols)`` tensor contiguous along its
            last dimension and a contiguous fp32 ``(rows,)`` tensor, both on ``x.device``.

    Returns:
        ``(q, scale)``: int8 ``q`` in ``[-127, 127]`` and fp32 ``scale = max|row| / 127``
        (0 for a zero row), so that ``q * scale`` approximates ``x`` within ``scale / 2``.
    """
    if x.ndim != 2:
        raise ValueError(f"quantize_int8_rowwise expects a 2-D tensor, got {x.ndim}-D")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"quantize_int8_rowwise supports {SUPPORTED_DTYPES}, got {x.dtype}")
    rows, cols = x.shape
    if cols > 1 and x.stride(1) != 1:
        x = x.contiguous()
    if out is None:
        q = torch.empty((rows, cols), dtype=torch.int8, device=x.device)
        scale = torch.empty(rows, dtype=torch.float32, device=x.device)
    else:
        q, scale = out
        _check_out("q", q, (rows, cols), torch.int8, x.device)
        _check_out("scale", scale, (rows,), torch.float32, x.device)
    if rows == 0:
        return q, scale
    block = _row_block(cols)
    _quantize_rowwise_kernel[(rows,)](
        x, q, scale, x.stride(0), q.stride(0), cols, BLOCK=block, num_warps=_num_warps(block)
    )
    return q, scale


def dequantize_int8_rowwise(
    q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype = torch.float32, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``q * scale[:, None]`` computed in fp32 and stored as ``dtype``.

    Args:
        q: ``(rows, cols)`` int8; any row stride.
        scale: ``(rows,)`` fp32.
        dtype: fp32, fp16 or bf16 output dtype.
        out: optional ``(rows, cols)`` tensor of ``dtype``, contiguous along its last dimension.

    Returns:
        ``(rows, cols)`` tensor of ``dtype``.
    """
    if q.ndim != 2 or q.dtype != torch.int8:
        raise ValueError(f"q must be a 2-D int8 tensor, got {q.ndim}-D {q.dtype}")
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"dequantize_int8_rowwise supports {SUPPORTED_DTYPES}, got {dtype}")
    rows, cols = q.shape
    if scale.shape != (rows,) or scale.dtype != torch.float32:
        raise ValueError(f"scale must be a ({rows},) fp32 tensor, got {tuple(scale.shape)} {scale.dtype}")
    if cols > 1 and q.stride(1) != 1:
        q = q.contiguous()
    scale = scale.contiguous()
    if out is None:
        out = torch.empty((rows, cols), dtype=dtype, device=q.device)
    else:
        _check_out("out", out, (rows, cols), dtype, q.device)
    if out.numel() == 0:
        return out
    grid = (rows, triton.cdiv(cols, _DEQUANT_BLOCK))
    _dequantize_rowwise_kernel[grid](q, scale, out, q.stride(0), out.stride(0), cols, BLOCK=_DEQUANT_BLOCK, num_warps=4)
    return out


def w8a16_matmul(
    a: torch.Tensor, w_q: torch.Tensor, scale: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``a @ (w_q * scale[:, None]).T`` with int8 weights dequantized in registers.

    Args:
        a: ``(M, K)`` fp16 or bf16 activations; any strides.
        w_q: ``(N, K)`` int8 weights, one row per output channel (``nn.Linear`` layout).
        scale: ``(N,)`` fp32 per-output-channel scales, as ``quantize_int8_rowwise`` returns.
        out: optional ``(M, N)`` tensor of ``a.dtype`` that receives the result.

    Returns:
        ``(M, N)`` tensor of ``a.dtype``, accumulated in fp32.
    """
    if a.ndim != 2 or w_q.ndim != 2:
        raise ValueError(f"w8a16_matmul expects 2-D operands, got {a.ndim}-D and {w_q.ndim}-D")
    if a.dtype not in ACTIVATION_DTYPES:
        raise TypeError(f"w8a16_matmul activations must be one of {ACTIVATION_DTYPES}, got {a.dtype}")
    if w_q.dtype != torch.int8:
        raise TypeError(f"w8a16_matmul weights must be int8, got {w_q.dtype}")
    (M, K), (N, K_w) = a.shape, w_q.shape
    if K != K_w:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, w_q is {tuple(w_q.shape)}")
    if scale.shape != (N,) or scale.dtype != torch.float32:
        raise ValueError(f"scale must be a ({N},) fp32 tensor, got {tuple(scale.shape)} {scale.dtype}")
    scale = scale.contiguous()
    if out is None:
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    elif tuple(out.shape) != (M, N) or out.dtype != a.dtype or out.device != a.device:
        raise ValueError(f"out must be ({M}, {N}) {a.dtype} on {a.device}, got {tuple(out.shape)} {out.dtype}")
    if out.numel() == 0:
        return out
    if K == 0:
        return out.zero_()

    def grid(meta: dict[str, int]) -> tuple[int]:
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    _w8a16_matmul_kernel[grid](
        a, w_q, scale, out, M, N, K,
        a.stride(0), a.stride(1), w_q.stride(0), w_q.stride(1), out.stride(0), out.stride(1),
        DOT_IN_FP32=_INTERPRETING and a.dtype == torch.bfloat16,
    )
    return out


def quantize_int8_rowwise_reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same quantization in torch: fp32 IEEE division, ``torch.round`` (half to even).

    ``quantize_int8_rowwise`` must match both outputs exactly; it is also the eager baseline
    of the benchmarks.
    """
    xf = x.to(torch.float32)
    absmax = xf.abs().amax(dim=1)
    # A tensor divisor, not the Python scalar: on CUDA torch turns division by a scalar into
    # multiplication by its reciprocal, 1 ulp off IEEE division for some rows (seen on an H100).
    scale = absmax / torch.full_like(absmax, QMAX)
    divisor = torch.where(scale == 0, torch.ones_like(scale), scale)
    q = torch.round(xf / divisor[:, None]).clamp(-QMAX, QMAX).to(torch.int8)
    return q, scale


def dequantize_int8_rowwise_reference(
    q: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``q * scale[:, None]`` in fp64, cast to ``out_dtype``."""
    return (q.to(torch.float64) * scale.to(torch.float64)[:, None]).to(out_dtype)


def w8a16_reference(
    a: torch.Tensor, w_q: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """``a @ dequantize(w_q, scale).T`` with both the dequantization and the matmul in fp64."""
    w = dequantize_int8_rowwise_reference(w_q, scale)
    return (a.to(torch.float64) @ w.T).to(out_dtype)


# Quantize: per element an abs, a compare for the max, a divide, the rounding and a clamp,
# counted as 4 FLOP (rounding and clamp as one each, the abs as none). Compulsory bytes: the
# input read once, int8 written once, one fp32 scale per row.
_QUANTIZE_FLOPS_PER_ELEMENT = 4


def quantize_flops(rows: int, cols: int) -> int:
    """FLOP of one ``quantize_int8_rowwise`` call on a ``(rows, cols)`` input."""
    return _QUANTIZE_FLOPS_PER_ELEMENT * rows * cols


def quantize_bytes(rows: int, cols: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``quantize_int8_rowwise`` call, in bytes."""
    return rows * cols * (dtype.itemsize + torch.int8.itemsize) + rows * torch.float32.itemsize


# W8A16: 2 * M * N * K FLOP for the multiply-adds (the int8 widening is not counted, the
# M * N scale multiplies are negligible). Compulsory bytes: activations and int8 weights read
# once, scales read once, output written once. At decode sizes (M ~ 1-16) the arithmetic
# intensity is ~2 * M FLOP per weight byte: the kernel is bound by reading the weights, and
# halving them versus fp16 is the point of W8A16.
def w8a16_flops(m: int, n: int, k: int) -> int:
    """FLOP of one ``w8a16_matmul`` of ``(m, k)`` activations by ``(n, k)`` int8 weights."""
    return 2 * m * n * k


def w8a16_bytes(m: int, n: int, k: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``w8a16_matmul``, in bytes."""
    return (m * k + m * n) * dtype.itemsize + n * k * torch.int8.itemsize + n * torch.float32.itemsize
