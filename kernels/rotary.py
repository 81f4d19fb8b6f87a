"""Rotary position embedding (RoPE) forward, applied to q and k in one launch.

Convention: non-interleaved, "rotate half" (GPT-NeoX, Llama in Hugging Face transformers).
Dimension ``i`` of a head is paired with dimension ``i + head_dim / 2``, not with ``i + 1``
as in the interleaved GPT-J / original-Meta-Llama layout. For position ``s`` and
``i < head_dim / 2``::

    out[..., i]                = x[..., i] * cos[s, i] - x[..., i + head_dim/2] * sin[s, i]
    out[..., i + head_dim / 2] = x[..., i + head_dim/2] * cos[s, i] + x[..., i] * sin[s, i]

which is transformers' ``x * cos + rotate_half(x) * sin`` with its duplicated ``cat((freqs,
freqs))`` tables stored once, as ``(seq, head_dim / 2)``. Position ``s`` is the token's index
along the sequence dimension.

One program handles one token and a block of heads, loading that token's cos/sin row once
for all of them. q and k may have different head counts (grouped-query attention) and any
strides over batch, sequence and heads (e.g. views into a fused qkv projection); head_dim
must be contiguous. The math is fp32 and each output is rounded once.
"""

import torch
import triton
import triton.language as tl

__all__ = [
    "SUPPORTED_DTYPES",
    "rotary",
    "rotary_bytes",
    "rotary_flops",
    "rotary_reference",
]

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)

# Elements of one half-head tile a program holds per stream: 1024 over 4 warps is 8 per
# thread, so x1, x2, cos and sin stay in registers for any head_dim up to 256.
_TILE = 1024
_NUM_WARPS = 4


@triton.jit
def _rotate_heads(
    x_ptr,
    out_ptr,
    head_start,
    n_heads,
    x_head_stride,
    out_head_stride,
    cos,
    sin,
    HALF: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    # int64: a head stride of a (batch, heads, seq, head_dim) layout is seq * head_dim, and
    # heads * that passes 2**31 on long contexts.
    heads = head_start + tl.arange(0, BLOCK_H).to(tl.int64)
    dims = tl.arange(0, BLOCK_HALF)
    mask = (heads < n_heads)[:, None] & (dims < HALF)[None, :]
    x1_ptrs = x_ptr + heads[:, None] * x_head_stride + dims[None, :]
    out1_ptrs = out_ptr + heads[:, None] * out_head_stride + dims[None, :]
    x1 = tl.load(x1_ptrs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x1_ptrs + HALF, mask=mask, other=0.0).to(tl.float32)
    out1 = x1 * cos - x2 * sin
    out2 = x2 * cos + x1 * sin
    tl.store(out1_ptrs, out1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out1_ptrs + HALF, out2.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_kernel(
    q_ptr,
    k_ptr,
    q_out_ptr,
    k_out_ptr,
    cos_ptr,
    sin_ptr,
    seq_len,
    n_q_heads,
    n_k_heads,
    q_batch_stride,
    q_seq_stride,
    q_head_stride,
    k_batch_stride,
    k_seq_stride,
    k_head_stride,
    q_out_batch_stride,
    q_out_seq_stride,
    q_out_head_stride,
    k_out_batch_stride,
    k_out_seq_stride,
    k_out_head_stride,
    cos_seq_stride,
    sin_seq_stride,
    HALF: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    head_block = tl.program_id(1)
    batch = token // seq_len
    pos = token % seq_len

    dims = tl.arange(0, BLOCK_HALF)
    cos = tl.load(cos_ptr + pos * cos_seq_stride + dims, mask=dims < HALF, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + pos * sin_seq_stride + dims, mask=dims < HALF, other=0.0).to(tl.float32)
    cos = cos[None, :]
    sin = sin[None, :]

    # Grid axis 1 covers q's head blocks, then k's: one launch, and one load of the table
    # row per token and head block.
    n_q_blocks = tl.cdiv(n_q_heads, BLOCK_H)
    if head_block < n_q_blocks:
        _rotate_heads(
            q_ptr + batch * q_batch_stride + pos * q_seq_stride,
            q_out_ptr + batch * q_out_batch_stride + pos * q_out_seq_stride,
            head_block * BLOCK_H,
            n_q_heads,
            q_head_stride,
            q_out_head_stride,
            cos,
            sin,
            HALF,
            BLOCK_H,
            BLOCK_HALF,
        )
    else:
        _rotate_heads(
            k_ptr + batch * k_batch_stride + pos * k_seq_stride,
            k_out_ptr + batch * k_out_batch_stride + pos * k_out_seq_stride,
            (head_block - n_q_blocks) * BLOCK_H,
            n_k_heads,
            k_head_stride,
            k_out_head_stride,
            cos,
            sin,
            HALF,
            BLOCK_H,
            BLOCK_HALF,
        )


def _check_heads(name: str, t: torch.Tensor, like: torch.Tensor) -> None:
    if t.ndim != 4:
        raise ValueError(f"{name} must be (batch, seq, heads, head_dim), got {t.ndim}-D")
    if t.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"rotary supports {SUPPORTED_DTYPES}, got {t.dtype} for {name}")
    b, s, _, d = like.shape
    if t.shape[0] != b or t.shape[1] != s or t.shape[3] != d or t.dtype != like.dtype or t.device != like.device:
        raise ValueError(
            f"{name} must match q in batch, seq, head_dim, dtype and device: got {tuple(t.shape)} "
            f"{t.dtype} on {t.device}, q is {tuple(like.shape)} {like.dtype} on {like.device}"
        )


def _unit_last_stride(t: torch.Tensor) -> bool:
    return t.shape[-1] == 1 or t.stride(-1) == 1


def rotary(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_out: torch.Tensor | None = None,
    k_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate q and k by their positions' angles (non-interleaved / rotate-half convention).

    Args:
        q: ``(batch, seq, q_heads, head_dim)`` fp32, fp16 or bf16; ``head_dim`` even. Any
            strides over the first three dimensions; a strided ``head_dim`` is copied first.
        k: ``(batch, seq, k_heads, head_dim)`` of q's dtype and device; ``k_heads`` may differ.
        cos, sin: ``(seq, head_dim / 2)`` tables, any supported dtype (usually fp32), the
            angle of pair ``i`` at position ``s`` being ``s * theta ** (-2i / head_dim)``.
        q_out, k_out: optional outputs shaped like q and k, contiguous along ``head_dim``.

    Returns:
        ``(q_out, k_out)``: the given outputs, else new contiguous tensors. q and k are
        left unchanged.
    """
    _check_heads("q", q, q)
    _check_heads("k", k, q)
    batch, seq, n_q_heads, head_dim = q.shape
    n_k_heads = k.shape[2]
    if head_dim % 2:
        raise ValueError(f"head_dim must be even to split into rotated pairs, got {head_dim}")
    half = head_dim // 2
    for name, table in (("cos", cos), ("sin", sin)):
        if table.shape != (seq, half):
            raise ValueError(f"{name} must be (seq, head_dim / 2) = {(seq, half)}, got {tuple(table.shape)}")
        if table.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"rotary supports {SUPPORTED_DTYPES}, got {table.dtype} for {name}")
        if table.device != q.device:
            raise ValueError(f"{name} must be on q's device {q.device}, got {table.device}")
    q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device) if q_out is None else q_out
    k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device) if k_out is None else k_out
    for name, out, like in (("q_out", q_out, q), ("k_out", k_out, k)):
        if out.shape != like.shape or out.dtype != like.dtype or out.device != like.device:
            raise ValueError(
                f"{name} must match {name[0]}: got {tuple(out.shape)} {out.dtype} on {out.device}, "
                f"expected {tuple(like.shape)} {like.dtype} on {like.device}"
            )
        if not _unit_last_stride(out):
            raise ValueError(f"{name} must be contiguous along head_dim, got strides {out.stride()}")
    if q.numel() == 0 and k.numel() == 0:
        return q_out, k_out

    q, k, cos, sin = (t if _unit_last_stride(t) else t.contiguous() for t in (q, k, cos, sin))
    block_half = triton.next_power_of_2(half)
    block_h = min(triton.next_power_of_2(max(n_q_heads, n_k_heads)), max(1, _TILE // block_half))
    grid = (batch * seq, triton.cdiv(n_q_heads, block_h) + triton.cdiv(n_k_heads, block_h))
    _rotary_kernel[grid](
        q,
        k,
        q_out,
        k_out,
        cos,
        sin,
        seq,
        n_q_heads,
        n_k_heads,
        *q.stride()[:3],
        *k.stride()[:3],
        *q_out.stride()[:3],
        *k_out.stride()[:3],
        cos.stride(0),
        sin.stride(0),
        HALF=half,
        BLOCK_H=block_h,
        BLOCK_HALF=block_half,
        num_warps=_NUM_WARPS,
    )
    return q_out, k_out


def rotary_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x`` rotated by the tables, computed in fp64 by torch (one of q or k at a time).

    Args:
        x: ``(batch, seq, heads, head_dim)`` tensor of any floating dtype.
        cos, sin: ``(seq, head_dim / 2)`` tables; their values, upcast, are the angles used.
        out_dtype: dtype of the result; ``None`` casts back to ``x.dtype``. Pass
            ``torch.float64`` to measure a kernel's error against the unrounded values.
    """
    half = x.shape[-1] // 2
    x64 = x.to(torch.float64)
    x1, x2 = x64[..., :half], x64[..., half:]
    c = cos.to(torch.float64)[None, :, None, :]
    s = sin.to(torch.float64)[None, :, None, :]
    result = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
    return result.to(x.dtype if out_dtype is None else out_dtype)


# Per rotated pair: two multiplies and a subtract for the first output, two multiplies and an
# add for the second -> 6 FLOP per pair, 3 FLOP per element of q and k.
# Bytes are the compulsory traffic: q and k read once and written once, the cos and sin tables
# read once (later batches find them in L2) -> 2 * (q + k elements) * itemsize
# + 2 * seq * head_dim / 2 * table itemsize.
_FLOPS_PER_ELEMENT = 3


def rotary_flops(batch: int, seq: int, q_heads: int, k_heads: int, head_dim: int) -> int:
    """Floating-point operations of one ``rotary`` call on q and k, in FLOP."""
    return _FLOPS_PER_ELEMENT * batch * seq * (q_heads + k_heads) * head_dim


def rotary_bytes(
    batch: int,
    seq: int,
    q_heads: int,
    k_heads: int,
    head_dim: int,
    dtype: torch.dtype,
    table_dtype: torch.dtype = torch.float32,
) -> int:
    """Compulsory memory traffic of one ``rotary`` call on q and k, in bytes."""
    heads_bytes = 2 * batch * seq * (q_heads + k_heads) * head_dim * dtype.itemsize
    table_bytes = 2 * seq * (head_dim // 2) * table_dtype.itemsize
    return heads_bytes + table_bytes
