"""Flash-attention forward: ``softmax(Q Kᵀ · sm_scale + mask) V`` without materializing the scores.

Each program owns ``BLOCK_M`` query rows of one (batch, head) and streams K and V in ``BLOCK_N``
blocks, keeping a running row max ``m``, normalizer ``l`` and un-normalized output ``acc`` in
fp32 (online softmax; Dao et al. 2022, FlashAttention; Triton tutorial 06, fused attention).
Key blocks split into two kinds so that only a few pay for masking: blocks every query row sees
whole (left of the diagonal when causal; all full blocks otherwise) run unmasked, and the
diagonal blocks (causal) or the partial last block (sequence not a multiple of ``BLOCK_N``)
apply the mask. The log-sum-exp of each row's scaled scores is stored for a backward pass.
"""

import math
import os

import torch
import triton
import triton.language as tl

__all__ = [
    "SUPPORTED_DTYPES",
    "SUPPORTED_HEAD_DIMS",
    "attention",
    "attention_bytes",
    "attention_flops",
    "attention_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float16, torch.bfloat16)
SUPPORTED_HEAD_DIMS: tuple[int, ...] = (64, 128)

_INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"

# Hopper tiles as (BLOCK_M, BLOCK_N, num_stages, num_warps), after the tutorial's forward
# search space. BLOCK_M 128 with 8 warps gives two warpgroups of wgmma over the query rows;
# 64-row tiles are for short sequences where 128-row tiles would leave SMs idle.
_HOPPER_TILES = [
    (128, 128, 2, 8),
    (128, 128, 3, 8),
    (128, 64, 3, 4),
    (128, 64, 3, 8),
    (128, 64, 4, 8),
    (64, 64, 4, 4),
    (64, 32, 4, 4),
]
# Hopper's shared memory per block (227 KiB) less a little for layout conversions.
_SHARED_MEMORY_BUDGET = 220 * 1024


def _configs() -> list[triton.Config]:
    if _INTERPRETED:
        # One config: the interpreter runs each program in numpy, so autotuning only costs
        # time. BLOCK_N < BLOCK_M puts two key blocks on the diagonal, so rows whose keys in a
        # block are all masked occur, and the CPU sequence lengths span several blocks.
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 16})]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=stages, num_warps=warps)
        for bm, bn, stages, warps in _HOPPER_TILES
    ]


def _prune_configs(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Drop tiles taller than the sequence needs and pipelines that overflow shared memory."""
    head_dim = kwargs["HEAD_DIM"]
    itemsize = named_args["q_ptr"].element_size()
    seq_len = named_args["seq_len"]
    kept = []
    for config in configs:
        bm, bn = config.kwargs["BLOCK_M"], config.kwargs["BLOCK_N"]
        # Q tile, plus a K and a V tile per pipeline stage.
        smem = (bm + 2 * bn * config.num_stages) * head_dim * itemsize
        if smem <= _SHARED_MEMORY_BUDGET and (bm <= 64 or seq_len > 64):
            kept.append(config)
    return kept


@triton.jit
def _attn_fwd_inner(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_kn,
    stride_vn,
    lo,
    hi,
    offs_m,
    offs_d,
    seq_len,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASKED: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST_OPERANDS: tl.constexpr,
):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = k_base + cols[:, None] * stride_kn + offs_d[None, :]
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :]
        if MASKED:
            k = tl.load(k_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            k = tl.load(k_ptrs)
        if UPCAST_OPERANDS:
            k = k.to(tl.float32)
        qk = tl.dot(q, tl.trans(k))
        # Scores are kept in log2 units (qk_scale carries log2(e)) so exp2 replaces exp.
        if MASKED:
            visible = cols[None, :] < seq_len
            if CAUSAL:
                visible = visible & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(visible, qk * qk_scale, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        # Key 0 is visible to every query and lies in the first block each program visits,
        # so m_new is finite from the first block on and no -inf - (-inf) NaN arises.
        p = tl.math.exp2(qk)
        # The max grew from m_i to m_new: what was summed so far is rescaled to the new max.
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq_len, other=0.0)
        else:
            v = tl.load(v_ptrs)
        # P in the input dtype feeds the tensor cores at full rate, as in the tutorial and
        # FlashAttention; its rounding is one ulp of weights that sum to one.
        p = p.to(v.dtype)
        if UPCAST_OPERANDS:
            p = p.to(tl.float32)
            v = v.to(tl.float32)
        acc = tl.dot(p, v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=_configs(),
    key=["seq_len", "HEAD_DIM", "CAUSAL"],
    prune_configs_by=None if _INTERPRETED else {"early_config_prune": _prune_configs},
)
@triton.jit
def _attn_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    lse_ptr,
    sm_scale,
    stride_qz,
    stride_qh,
    stride_qm,
    stride_kz,
    stride_kh,
    stride_kn,
    stride_vz,
    stride_vh,
    stride_vn,
    stride_oz,
    stride_oh,
    stride_om,
    num_heads,
    seq_len,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    UPCAST_OPERANDS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    # The diagonal stage starts at start_m * BLOCK_M, which must begin a key block.
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    # Batch × heads runs along the grid's x axis: y and z stop at 65,535 blocks, which 2,048 × 32
    # heads already pass, while x reaches 2**31 - 1.
    start_m = tl.program_id(1)
    if CAUSAL:
        # Row blocks further down see more keys; launching them first keeps the last wave short.
        start_m = tl.num_programs(1) - 1 - start_m
    off_hz = tl.program_id(0)
    off_z = (off_hz // num_heads).to(tl.int64)
    off_h = (off_hz % num_heads).to(tl.int64)
    q_base = q_ptr + off_z * stride_qz + off_h * stride_qh
    k_base = k_ptr + off_z * stride_kz + off_h * stride_kh
    v_base = v_ptr + off_z * stride_vz + off_h * stride_vh
    o_base = o_ptr + off_z * stride_oz + off_h * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < seq_len
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :], mask=row_ok[:, None], other=0.0)
    if UPCAST_OPERANDS:
        q = q.to(tl.float32)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634  # log2(e)

    if CAUSAL:
        # Keys left of this row block's diagonal: every row sees all of them.
        diagonal = start_m * BLOCK_M
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, 0, diagonal, offs_m, offs_d,
            seq_len, qk_scale, BLOCK_N, False, CAUSAL, UPCAST_OPERANDS,
        )
        # The diagonal block: key j is visible to row i only when j <= i.
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, diagonal,
            tl.minimum(diagonal + BLOCK_M, seq_len), offs_m, offs_d,
            seq_len, qk_scale, BLOCK_N, True, CAUSAL, UPCAST_OPERANDS,
        )
    else:
        full_blocks_end = (seq_len // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, 0, full_blocks_end, offs_m, offs_d,
            seq_len, qk_scale, BLOCK_N, False, CAUSAL, UPCAST_OPERANDS,
        )
        # The partial last block, if any: keys past seq_len are masked out.
        acc, l_i, m_i = _attn_fwd_inner(
            acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, full_blocks_end, seq_len, offs_m, offs_d,
            seq_len, qk_scale, BLOCK_N, True, CAUSAL, UPCAST_OPERANDS,
        )

    acc = acc / l_i[:, None]
    # Natural-log LSE of the scaled scores: m and l are in log2 units.
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453  # ln(2)
    tl.store(lse_ptr + off_hz.to(tl.int64) * seq_len + offs_m, lse, mask=row_ok)
    o_ptrs = o_base + offs_m[:, None] * stride_om + offs_d[None, :]
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if q.ndim != 4:
        raise ValueError(f"attention expects (batch, heads, seq, head_dim) tensors, got {q.ndim}-D q")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"q, k and v must have one shape, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"attention supports {SUPPORTED_DTYPES}, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype or k.device != q.device or v.device != q.device:
        raise ValueError("q, k and v must share dtype and device")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {q.shape[-1]}")


def _check_out(out: torch.Tensor, q: torch.Tensor) -> None:
    if out.shape != q.shape or out.dtype != q.dtype or out.device != q.device:
        raise ValueError(
            f"out must match q: got {tuple(out.shape)} {out.dtype} on {out.device}, "
            f"expected {tuple(q.shape)} {q.dtype} on {q.device}"
        )
    if out.stride(-1) != 1:
        raise ValueError("out must be contiguous along its last dimension")


def _last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    sm_scale: float | None = None,
    *,
    out: torch.Tensor | None = None,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention forward, as ``F.scaled_dot_product_attention``.

    Args:
        q, k, v: ``(batch, heads, seq, head_dim)`` fp16 or bf16 tensors of one shape, head_dim
            64 or 128, any strides (a non-unit last-dimension stride is copied first).
        causal: query ``i`` attends to keys ``j <= i`` only.
        sm_scale: positive factor on ``q @ kᵀ`` before the softmax; ``None`` means
            ``1 / sqrt(head_dim)``.
        out: optional tensor shaped and typed like ``q``, contiguous along its last dimension,
            that receives the output (every element is written).
        return_lse: also return the log-sum-exp of each row's scaled (and masked) scores.

    Returns:
        ``o``, ``(batch, heads, seq, head_dim)`` of ``q.dtype`` (``out`` when given); with
        ``return_lse``, ``(o, lse)`` where ``lse`` is ``(batch, heads, seq)`` fp32 (natural log).
    """
    _check_inputs(q, k, v)
    batch, heads, seq_len, head_dim = q.shape
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    if not sm_scale > 0:
        # The unmasked blocks take the row max of the raw scores before scaling.
        raise ValueError(f"sm_scale must be positive, got {sm_scale}")
    q, k, v = (_last_dim_contiguous(x) for x in (q, k, v))
    if out is None:
        o = torch.empty((batch, heads, seq_len, head_dim), dtype=q.dtype, device=q.device)
    else:
        _check_out(out, q)
        o = out
    lse = torch.empty((batch, heads, seq_len), dtype=torch.float32, device=q.device)
    if o.numel() > 0:

        def grid(meta: dict) -> tuple[int, int]:
            return (batch * heads, triton.cdiv(seq_len, meta["BLOCK_M"]))

        _attn_fwd_kernel[grid](
            q, k, v, o, lse, sm_scale,
            q.stride(0), q.stride(1), q.stride(2),
            k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            o.stride(0), o.stride(1), o.stride(2),
            heads, seq_len,
            HEAD_DIM=head_dim,
            CAUSAL=causal,
            # Interpreter only: it "does not support operations on bfloat16" (Triton debugging
            # guide) and multiplies bf16 bit patterns in tl.dot; fp32 operands holding the same
            # values give the tensor cores' exact products.
            UPCAST_OPERANDS=_INTERPRETED and q.dtype == torch.bfloat16,
        )  # fmt: skip
    return (o, lse) if return_lse else o


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    sm_scale: float | None = None,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output and per-row log-sum-exp computed in fp64 by torch.

    Args:
        q, k, v, causal, sm_scale: as for ``attention``.
        out_dtype: dtype of the output; ``None`` casts back to ``q.dtype``. Pass
            ``torch.float64`` to measure a kernel's error against the unrounded values.

    Returns:
        ``(o, lse)``: ``o`` of ``out_dtype``, ``lse`` (natural log) in fp64.
    """
    head_dim, seq_len = q.shape[-1], q.shape[-2]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    scores = (q.to(torch.float64) @ k.to(torch.float64).transpose(-2, -1)) * sm_scale
    if causal:
        hidden = torch.ones((seq_len, seq_len), dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    o = torch.softmax(scores, dim=-1) @ v.to(torch.float64)
    return o.to(q.dtype if out_dtype is None else out_dtype), lse


# Two matmuls per (batch, head): S = Q Kᵀ and O = P V, each 2 * seq * seq * head_dim FLOP ->
# 4 * B * H * S² * D. Causal attention skips the blocks above the diagonal, so half of that is
# counted (the convention of the Triton tutorial and FlashAttention); the softmax's exp and
# sums are O(S²) without the D factor and are left out. Compulsory bytes: q, k, v read once and
# o written once; the (B, H, S) fp32 log-sum-exp is under 2 % of o at head_dim 64 and ignored.
def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int, causal: bool) -> int:
    """Matmul FLOPs of one ``attention`` forward, in FLOP (halved when causal)."""
    flops = 4 * batch * heads * seq_len * seq_len * head_dim
    return flops // 2 if causal else flops


def attention_bytes(batch: int, heads: int, seq_len: int, head_dim: int, dtype: torch.dtype) -> int:
    """Compulsory memory traffic of one ``attention`` forward, in bytes (q, k, v read; o written)."""
    return 4 * batch * heads * seq_len * head_dim * dtype.itemsize
