"""Triton cross-entropy (loss and gradient) against an fp64 torch reference.

The kernel cases poison the row losses and the gradient with NaN before the call (an element
never written fails), check that logits and targets are left untouched, and record the
measured errors as junit properties: ``max_abs_err`` / ``max_rel_err`` for the loss,
``grad_max_abs_err`` / ``grad_max_rel_err`` for the gradient.

An fp16/bf16 gradient is also held to correct rounding (``assert_correctly_rounded``): it is
computed in fp32, scaled by 1 / n and rounded once, so a kernel that rounds before the 1 / n of
the mean fails; the share beyond half an ulp is recorded as ``beyond_half_ulp``. (Through
autograd with an incoming gradient other than 1, the stored gradient is rescaled and rounded a
second time: by design, so that no fp32 copy of it is kept; those cases keep the dtype bound.)
Every tensor is tried in a layout of its own (``layout_cases``); small vocabularies expose every
term (eps / V, the 1 / n over rows not ignored, the reduction); gradient rows sum to zero.
"""

import inspect
from collections.abc import Callable

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from kernels.cross_entropy import (
    VOCAB_BLOCK,
    cross_entropy,
    cross_entropy_loss_and_grad,
    cross_entropy_reference,
)
from roofwatch.checks import IGNORE_RECORD_PROPERTY_WARNING, record_errors
from roofwatch.exposure import assert_exposes
from roofwatch.layouts import LayoutCase, layout_cases, place
from roofwatch.rounding import assert_correctly_rounded, kernel_store_rounding, record_rounding, ulp
from roofwatch.tolerances import assert_close, dtype_name, tolerance_for

# See test_softmax.py: roofwatch reads record_property from xunit2 reports despite the warning.
pytestmark = IGNORE_RECORD_PROPERTY_WARNING

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
IGNORE_INDEX = -100

# One row; a vocabulary that is no power of two; one longer than a block and ending mid-block.
# Every third row from the second on is ignored, so the multi-row shapes mix ignored rows in.
SHAPES: list[tuple[int, int]] = [(1, 5000), (4, 1000), (3, 10_000)]
assert any(vocab > VOCAB_BLOCK and vocab % VOCAB_BLOCK for _, vocab in SHAPES)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SEEDS = [0, 1]
# Row losses are fp32 whatever the logits dtype: the inputs are exact in fp32 and so is the
# arithmetic, so they meet the fp32 bound.
LOSS_ROWS_TOLERANCE = tolerance_for(torch.float32)


def _fp32_ulps(vocab: int) -> int:
    """fp32 roundings a gradient element may carry before its store, in ulps of its terms.

    p = exp((x - max) - log(d)) errs by about |x - max| ulps (under 30 where p survives an fp16
    or bf16 rounding) plus the normalizer's depth: log2 of a block and one per streamed block.
    """
    return 64 + vocab // VOCAB_BLOCK


def _grad_terms(logits: torch.Tensor, target: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """p, the target weight and the uniform weight added on absolute values, times 1 / n."""
    vocab = logits.shape[1]
    valid = target != IGNORE_INDEX
    one_hot = torch.nn.functional.one_hot(target.clamp_min(0).long(), vocab).double()
    terms = torch.softmax(logits.double(), dim=-1) + one_hot + label_smoothing / vocab
    return torch.where(valid[:, None], terms / valid.sum().clamp_min(1), 0.0)

LogitsMaker = Callable[[tuple[int, int], torch.Tensor, torch.Generator], torch.Tensor]


def _randn(shape: tuple[int, int], target: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(shape, generator=gen)


def _large(shape: tuple[int, int], target: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    # exp() of fp32 overflows past 88: logits ~1e3 give Inf/NaN unless the row max is
    # subtracted first. 5 sigma (5e3) stays well inside fp16's 65504.
    return torch.randn(shape, generator=gen) * 1e3


def _equal(shape: tuple[int, int], target: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    # A uniform softmax: loss log(vocab), gradient 1/vocab everywhere but the target.
    return torch.full(shape, 7.25)


def _masked(shape: tuple[int, int], target: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    # About half the vocabulary is -inf (a padded or constrained vocabulary), never the
    # target. Row 0 keeps only its target finite, so a streamed row meets whole blocks of
    # -inf first and ends with loss 0 and gradient 0.
    x = torch.randn(shape, generator=gen)
    masked = torch.rand(shape, generator=gen) < 0.5
    masked[0, :] = True
    rows = torch.arange(shape[0])
    valid = target != IGNORE_INDEX
    masked[rows[valid], target[valid]] = False
    return x.masked_fill(masked, float("-inf"))


DISTRIBUTIONS: dict[str, LogitsMaker] = {
    "randn": _randn,
    "large": _large,
    "equal": _equal,
    "masked": _masked,
}


def _make_case(
    shape: tuple[int, int], dtype: torch.dtype, dist: str, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    tokens, vocab = shape
    target = torch.randint(0, vocab, (tokens,), generator=gen)
    target[1::3] = IGNORE_INDEX
    logits = DISTRIBUTIONS[dist](shape, target, gen).to(dtype)
    return logits.to(DEVICE), target.to(DEVICE)


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed{s}")
@pytest.mark.parametrize("dist", list(DISTRIBUTIONS))
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_cross_entropy(
    shape: tuple[int, int],
    dtype: torch.dtype,
    dist: str,
    seed: int,
    record_property: Callable[[str, object], None],
) -> None:
    logits, target = _make_case(shape, dtype, dist, seed)
    logits_before, target_before = logits.clone(), target.clone()
    loss_rows = torch.full((shape[0],), float("nan"), device=DEVICE)
    grad = torch.full_like(logits, float("nan"))

    _, n_valid = cross_entropy_loss_and_grad(logits, target, IGNORE_INDEX, "mean", grad=grad, loss_rows=loss_rows)

    assert torch.equal(logits, logits_before), "cross_entropy modified its logits"
    assert torch.equal(target, target_before), "cross_entropy modified its targets"
    assert int(n_valid) == int((target != IGNORE_INDEX).sum())
    ref_rows, _ = cross_entropy_reference(logits, target, IGNORE_INDEX, reduction="none")
    _, ref_grad = cross_entropy_reference(logits, target, IGNORE_INDEX, reduction="mean")
    loss_errors = assert_close(loss_rows, ref_rows, LOSS_ROWS_TOLERANCE)
    grad_errors = assert_close(grad, ref_grad, tolerance_for(dtype))
    record_errors(record_property, loss_errors)
    record_errors(record_property, grad_errors, prefix="grad_")
    if dtype != torch.float32:
        stats = assert_correctly_rounded(grad, ref_grad, terms=_grad_terms(logits, target),
                                         fp32_ulps=_fp32_ulps(shape[1]))
        # The gradient is the case's one rounded output (the row losses are fp32): its share is
        # the case's, which roofwatch stores and tracks.
        record_rounding(record_property, stats)


def _incoming_gradient(reduction: str, tokens: int, dtype: torch.dtype) -> torch.Tensor:
    # Not 1, so backward's rescaling pass runs; per-row values for "none".
    if reduction == "none":
        weights = torch.randn((tokens,), generator=torch.Generator().manual_seed(3))
        return weights.to(dtype=dtype, device=DEVICE)
    return torch.tensor(0.75 if reduction == "mean" else 1.5, dtype=dtype, device=DEVICE)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1], ids=lambda e: f"eps{e}")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_cross_entropy_autograd(
    dtype: torch.dtype, reduction: str, label_smoothing: float, record_property: Callable[[str, object], None]
) -> None:
    logits, target = _make_case((4, 1000), dtype, "randn", seed=0)
    logits_before = logits.clone()
    leaf = logits.clone().requires_grad_(True)
    grad_output = _incoming_gradient(reduction, 4, dtype)

    loss = cross_entropy(leaf, target, IGNORE_INDEX, reduction, label_smoothing)
    (grad,) = torch.autograd.grad(loss, leaf, grad_output)

    assert torch.equal(leaf.detach(), logits_before), "the default must leave the logits unmodified"
    assert loss.dtype == dtype and loss.shape == ((4,) if reduction == "none" else ())
    ref_loss, ref_grad = cross_entropy_reference(logits, target, IGNORE_INDEX, reduction, label_smoothing, grad_output)
    loss_errors = assert_close(loss.detach(), ref_loss, tolerance_for(dtype))
    grad_errors = assert_close(grad, ref_grad, tolerance_for(dtype))
    record_errors(record_property, loss_errors)
    record_errors(record_property, grad_errors, prefix="grad_")


def test_cross_entropy_label_smoothing_on_a_streamed_row(record_property: Callable[[str, object], None]) -> None:
    # The smoothing term needs the sum of the row, accumulated across blocks.
    logits, target = _make_case((3, 10_000), torch.bfloat16, "randn", seed=1)
    leaf = logits.clone().requires_grad_(True)
    loss = cross_entropy(leaf, target, IGNORE_INDEX, "sum", label_smoothing=0.2)
    (grad,) = torch.autograd.grad(loss, leaf)
    ref_loss, ref_grad = cross_entropy_reference(logits, target, IGNORE_INDEX, "sum", 0.2)
    record_property("max_abs_err", assert_close(loss.detach(), ref_loss, tolerance_for(torch.bfloat16)).max_abs)
    record_property("grad_max_abs_err", assert_close(grad, ref_grad, tolerance_for(torch.bfloat16)).max_abs)


def _grad(logits: torch.Tensor, target: torch.Tensor, eps: float, *, uniform_over: int | None = None,
          on_target: float | None = None, count: int | None = None) -> torch.Tensor:
    """The gradient of the mean loss in fp64, with one term replaceable by a wrong one."""
    vocab = logits.shape[1]
    valid = target != IGNORE_INDEX
    one_hot = torch.nn.functional.one_hot(target.clamp_min(0).long(), vocab).double()
    weight = 1 - eps if on_target is None else on_target
    grad = torch.softmax(logits.double(), dim=-1) - weight * one_hot - eps / (uniform_over or vocab)
    return torch.where(valid[:, None], grad / (int(valid.sum()) if count is None else count), 0.0)


def _next_class(target: torch.Tensor, vocab: int) -> torch.Tensor:
    return torch.where(target == IGNORE_INDEX, target, (target + 1) % vocab)


GradVariant = Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
# name: (the parameter whose term it gets wrong, the gradient it computes)
ALTERNATIVES: dict[str, tuple[str, GradVariant]] = {
    "eps / (V - 1) for the uniform weight":
        ("label_smoothing", lambda x, t, e: _grad(x, t, e, uniform_over=x.shape[1] - 1)),
    "target weight 1 instead of 1 - eps": ("label_smoothing", lambda x, t, e: _grad(x, t, e, on_target=1.0)),
    "ignored rows counted in the mean": ("ignore_index", lambda x, t, e: _grad(x, t, e, count=len(t))),
    "the sum where the mean was asked": ("reduction", lambda x, t, e: _grad(x, t, e, count=1)),
    "the next class as target": ("target", lambda x, t, e: _grad(x, _next_class(t, x.shape[1]), e)),
    "the first row's logits for every row": ("logits", lambda x, t, e: _grad(x[:1].expand_as(x), t, e)),
}
# Three classes, one row of four ignored: eps / V against eps / (V - 1) is 0.017 at eps 0.1, where
# at V = 1000 it is 1e-7, under every bound.
EXPOSING_SHAPE = (4, 3)
EXPOSING_EPS = 0.1


def test_every_parameter_has_a_term_exposed() -> None:
    parameters = set(inspect.signature(cross_entropy_loss_and_grad).parameters) - {"grad", "loss_rows"}
    assert {param for param, _ in ALTERNATIVES.values()} == parameters


@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
def test_cross_entropy_exposes_every_term(dtype: torch.dtype, record_property: Callable[[str, object], None]) -> None:
    logits, target = _make_case(EXPOSING_SHAPE, dtype, "randn", seed=0)
    grad = torch.full_like(logits, float("nan"))

    loss_rows, _ = cross_entropy_loss_and_grad(logits, target, IGNORE_INDEX, "mean", EXPOSING_EPS, grad=grad)

    ref_rows, _ = cross_entropy_reference(logits, target, IGNORE_INDEX, "none", EXPOSING_EPS)
    _, ref_grad = cross_entropy_reference(logits, target, IGNORE_INDEX, "mean", EXPOSING_EPS)
    expected = _grad(logits, target, EXPOSING_EPS)
    # The variants below change one term of this formula, which must first be torch's.
    assert_close(expected, ref_grad, tolerance_for(torch.float32))
    assert_exposes(expected, {name: compute(logits, target, EXPOSING_EPS) for name, (_, compute) in
                              ALTERNATIVES.items()}, tolerance_for(dtype))
    # The loss's smoothing term: eps times the mean of the row's logits, over V - 1 instead.
    x = logits.double()
    wrong_mean = ref_rows + EXPOSING_EPS * (x.sum(-1) / x.shape[1] - x.sum(-1) / (x.shape[1] - 1))
    wrong_mean = torch.where(target == IGNORE_INDEX, 0.0, wrong_mean)
    assert_exposes(ref_rows, {"the logits' mean over V - 1 in the loss": wrong_mean}, LOSS_ROWS_TOLERANCE)
    record_errors(record_property, assert_close(loss_rows, ref_rows, LOSS_ROWS_TOLERANCE))
    record_errors(record_property, assert_close(grad, ref_grad, tolerance_for(dtype)), prefix="grad_")


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1], ids=lambda e: f"eps{e}")
@pytest.mark.parametrize("dtype", DTYPES, ids=dtype_name)
@pytest.mark.parametrize("vocab", [3, 1000])
def test_cross_entropy_gradient_rows_sum_to_zero(vocab: int, dtype: torch.dtype, label_smoothing: float) -> None:
    # sum_j (p_j - (1 - eps) [j == target] - eps / V) = 1 - (1 - eps) - eps = 0 on every row not
    # ignored, whatever the logits: up to each element's rounding (half an ulp, a whole one where
    # the store truncates) and fp32's own error.
    logits, target = _make_case((4, vocab), dtype, "randn", seed=2)
    grad = torch.full_like(logits, float("nan"))
    cross_entropy_loss_and_grad(logits, target, IGNORE_INDEX, "mean", label_smoothing, grad=grad)

    g = grad.double()
    eps32 = torch.finfo(torch.float32).eps
    per_element = _fp32_ulps(vocab) * eps32 * _grad_terms(logits, target, label_smoothing)
    if dtype != torch.float32:
        share = 0.5 if kernel_store_rounding(dtype) == "nearest" else 1.0
        per_element = per_element + share * ulp(g, dtype)
    error, bound = g.sum(dim=-1).abs(), per_element.sum(dim=-1)
    assert (error <= bound).all(), f"gradient rows sum to up to {float(error.max()):.3g} (bound {float(bound.max()):.3g})"


# Layouts as a test dimension (roofwatch.layouts): logits, targets, gradient and row losses each
# in a layout of their own, at a fused and a streamed vocabulary, so a kernel writing the
# gradient with the logits' row stride fails. Inputs take any layout (a non-unit column stride
# is copied first), the row losses any stride; the gradient needs unit-stride rows, and other
# layouts are refused.
LAYOUTS = {
    "logits": ["contiguous", "padded", "transposed", "strided"],
    "target": ["contiguous", "padded", "strided"],
    "grad": ["contiguous", "padded"],
    "loss_rows": ["contiguous", "padded", "strided"],
}
REFUSED = {("grad", layout): "grad must be a" for layout in ("transposed", "strided")}


@pytest.mark.parametrize("vocab", [37, VOCAB_BLOCK + 100])
@pytest.mark.parametrize("case", layout_cases(LAYOUTS), ids=str)
def test_cross_entropy_layouts(case: LayoutCase, vocab: int, record_property: Callable[[str, object], None]) -> None:
    logits, target = _make_case((4, vocab), torch.float16, "randn", seed=0)
    placed = {"logits": case.input("logits", logits), "target": case.input("target", target),
              "grad": case.output("grad", logits), "loss_rows": case.output("loss_rows", logits[:, 0].float())}

    cross_entropy_loss_and_grad(placed["logits"].tensor, placed["target"].tensor, IGNORE_INDEX, "mean", 0.1,
                                grad=placed["grad"].tensor, loss_rows=placed["loss_rows"].tensor)

    for name, tensor in placed.items():
        tensor.assert_outside_intact(name)
    ref_rows, _ = cross_entropy_reference(logits, target, IGNORE_INDEX, "none", 0.1)
    _, ref_grad = cross_entropy_reference(logits, target, IGNORE_INDEX, "mean", 0.1)
    record_errors(record_property, assert_close(placed["loss_rows"].tensor, ref_rows, LOSS_ROWS_TOLERANCE))
    record_errors(record_property, assert_close(placed["grad"].tensor, ref_grad, tolerance_for(torch.float16)),
                  prefix="grad_")


@pytest.mark.parametrize(("tensor", "layout"), list(REFUSED), ids=str)
def test_cross_entropy_refuses_layouts_it_cannot_write(tensor: str, layout: str) -> None:
    logits, target = _make_case((3, 40), torch.float32, "randn", seed=0)
    bad = place(torch.full_like(logits, float("nan")), layout)
    with pytest.raises(ValueError, match=REFUSED[tensor, layout]):
        cross_entropy_loss_and_grad(logits, target, IGNORE_INDEX, grad=bad.tensor)
    bad.assert_outside_intact(tensor)


def test_cross_entropy_is_deterministic() -> None:
    # No atomics anywhere: two runs agree bit for bit, loss and gradient.
    logits, target = _make_case((3, 10_000), torch.bfloat16, "randn", seed=0)
    results = []
    for _ in range(2):
        leaf = logits.clone().requires_grad_(True)
        loss = cross_entropy(leaf, target, IGNORE_INDEX)
        results.append((loss, *torch.autograd.grad(loss, leaf)))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])


def test_cross_entropy_strided_logits_stay_in_bounds() -> None:
    # A view into a wider NaN-padded buffer: a lane reading past its row would turn the loss
    # NaN, one writing past it would overwrite the padding. A column-major view is copied to
    # row-major before launch rather than misread.
    logits_full, target = _make_case((3, 10_000), torch.float32, "randn", seed=0)
    buffer = torch.full((3, 10_009), float("nan"), device=DEVICE)
    buffer[:, 4:-5] = logits_full
    ref_loss, ref_grad = cross_entropy_reference(logits_full, target, IGNORE_INDEX, "sum")
    for logits in (buffer[:, 4:-5], logits_full.t().contiguous().t()):
        grad = torch.full(logits_full.shape, float("nan"), device=DEVICE)
        loss_rows, _ = cross_entropy_loss_and_grad(logits, target, IGNORE_INDEX, "sum", grad=grad)
        assert_close(loss_rows.sum(), ref_loss, tolerance_for(torch.float32))
        assert_close(grad, ref_grad, tolerance_for(torch.float32))
    assert buffer[:, :4].isnan().all() and buffer[:, -5:].isnan().all()


def test_cross_entropy_inplace_grad_through_a_linear_head(record_property: Callable[[str, object], None]) -> None:
    # The intended use: logits straight out of the LM head, whose backward needs the hidden
    # states and the weight but not the logits, so their buffer can hold their gradient.
    gen = torch.Generator().manual_seed(0)
    tokens, hidden, vocab = 6, 16, 1000
    h = torch.randn((tokens, hidden), generator=gen).to(DEVICE).requires_grad_(True)
    w = (torch.randn((vocab, hidden), generator=gen) / hidden**0.5).to(DEVICE).requires_grad_(True)
    target = torch.randint(0, vocab, (tokens,), generator=gen).to(DEVICE)
    target[2] = IGNORE_INDEX

    logits = h @ w.T
    seen: list[torch.Tensor] = []
    logits.register_hook(seen.append)
    cross_entropy(logits, target, IGNORE_INDEX, inplace_grad=True).backward()

    assert seen[0].data_ptr() == logits.data_ptr(), "the gradient must live in the logits buffer"
    h64, w64 = h.detach().double().requires_grad_(True), w.detach().double().requires_grad_(True)
    torch.nn.functional.cross_entropy(h64 @ w64.T, target, ignore_index=IGNORE_INDEX).backward()
    record_property("grad_max_abs_err", assert_close(w.grad, w64.grad, tolerance_for(torch.float32)).max_abs)
    assert_close(h.grad, h64.grad, tolerance_for(torch.float32))


def test_cross_entropy_inplace_grad_over_saved_logits_fails_loudly() -> None:
    # exp() saves its result for backward; overwriting it must raise, not corrupt gradients.
    x = torch.randn((2, 50), device=DEVICE, requires_grad=True)
    logits = x.exp()
    loss = cross_entropy(logits, torch.tensor([3, 7], device=DEVICE), inplace_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_cross_entropy_inplace_grad_refuses_a_leaf() -> None:
    logits = torch.randn((2, 50), device=DEVICE, requires_grad=True)
    with pytest.raises(ValueError, match="leaf"):
        cross_entropy(logits, torch.tensor([3, 7], device=DEVICE), inplace_grad=True)


class _LargeAllocations(TorchDispatchMode):
    """Records every op output of at least ``numel`` elements in storage none of its inputs had.

    Views, in-place ops and the Triton interpreter's re-wrapping of a kernel argument's
    storage reuse an input's storage and are not counted.
    """

    def __init__(self, numel: int) -> None:
        super().__init__()
        self.numel = numel
        self.allocations: list[tuple[str, torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        inputs = tree_flatten((args, kwargs))[0]
        known = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        known |= {x.data_ptr() for x in inputs if isinstance(x, torch.UntypedStorage)}
        result = func(*args, **(kwargs or {}))
        for t in tree_flatten(result)[0]:
            if isinstance(t, torch.Tensor) and t.numel() >= self.numel and t.untyped_storage().data_ptr() not in known:
                self.allocations.append((str(func), t.dtype))
        return result


@pytest.mark.parametrize("inplace_grad", [False, True], ids=["separate-grad", "inplace-grad"])
def test_cross_entropy_never_materialises_fp32_logits(inplace_grad: bool) -> None:
    # The memory claim of the module: fp32 stays in registers. Every (tokens, vocab)-sized
    # buffer that forward + backward allocate is bf16, and with inplace_grad the gradient
    # needs none at all.
    tokens, vocab = 4, 1000
    logits = torch.randn((tokens, vocab), device=DEVICE).to(torch.bfloat16)
    head = torch.ones((), device=DEVICE, requires_grad=True)
    target = torch.tensor([1, IGNORE_INDEX, 998, 5], device=DEVICE)
    with _LargeAllocations(tokens * vocab) as large:
        scaled = logits * head  # a non-leaf, as the output of an LM head would be
        cross_entropy(scaled, target, IGNORE_INDEX, inplace_grad=inplace_grad).backward()
    # The multiply that makes the logits and the one of its backward allocate in any case.
    ours = [op for op, _ in large.allocations if "mul" not in op]
    assert all(dtype == torch.bfloat16 for _, dtype in large.allocations), large.allocations
    assert ours == ([] if inplace_grad else ["aten.empty.memory_format"]), large.allocations


def test_cross_entropy_all_rows_ignored() -> None:
    # As torch does: the mean over zero rows is NaN, the sum is 0, every gradient is 0.
    logits = torch.randn((3, 20), device=DEVICE)
    target = torch.full((3,), IGNORE_INDEX, device=DEVICE)
    grad = torch.full_like(logits, float("nan"))
    loss_rows, n_valid = cross_entropy_loss_and_grad(logits, target, IGNORE_INDEX, "mean", grad=grad)
    assert int(n_valid) == 0 and torch.equal(loss_rows, torch.zeros_like(loss_rows))
    assert torch.equal(grad, torch.zeros_like(grad))
    assert cross_entropy(logits, target, IGNORE_INDEX).isnan()
    assert cross_entropy(logits, target, IGNORE_INDEX, "sum") == 0


def test_cross_entropy_edge_cases() -> None:
    # One class: the loss and the gradient are exactly 0. int32 targets and another
    # ignore_index value are accepted. An empty batch gives an empty loss.
    logits = torch.randn((3, 1), device=DEVICE)
    grad = torch.full_like(logits, float("nan"))
    loss_rows, _ = cross_entropy_loss_and_grad(logits, torch.zeros(3, dtype=torch.int32, device=DEVICE), grad=grad)
    assert torch.equal(loss_rows, torch.zeros(3, device=DEVICE)) and torch.equal(grad, torch.zeros_like(grad))

    logits = torch.randn((4, 30), device=DEVICE)
    target = torch.tensor([0, 29, 5, 29], dtype=torch.int32, device=DEVICE)
    ref_loss, _ = cross_entropy_reference(logits, target, ignore_index=29)
    assert_close(cross_entropy(logits, target, ignore_index=29).detach(), ref_loss, tolerance_for(torch.float32))

    assert cross_entropy(torch.empty((0, 30), device=DEVICE), target[:0], reduction="none").shape == (0,)


def test_cross_entropy_bad_target_gives_nan() -> None:
    # An out-of-range class is a caller bug: its row turns NaN instead of reading out of
    # bounds, and the mean with it.
    logits = torch.randn((2, 30), device=DEVICE)
    target = torch.tensor([3, 30], device=DEVICE)
    grad = torch.zeros_like(logits)
    loss_rows, _ = cross_entropy_loss_and_grad(logits, target, grad=grad)
    assert loss_rows[0].isfinite() and loss_rows[1].isnan()
    assert grad[0].isfinite().all() and grad[1].isnan().all()


def test_cross_entropy_backward_runs_once() -> None:
    logits = torch.randn((2, 30), device=DEVICE)
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x * 1.0, torch.tensor([3, 4], device=DEVICE)) * 2.0
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="only once"):
        loss.backward()


def test_cross_entropy_rejects_bad_arguments() -> None:
    logits = torch.randn((2, 30), device=DEVICE)
    target = torch.tensor([3, 4], device=DEVICE)
    with pytest.raises(ValueError, match="tokens, vocab"):
        cross_entropy(logits[None], target)
    with pytest.raises(TypeError):
        cross_entropy(logits.double(), target)
    with pytest.raises(TypeError):
        cross_entropy(logits, target.float())
    with pytest.raises(ValueError, match="target must have shape"):
        cross_entropy(logits, target[:1])
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(logits, target, reduction="avg")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy(logits, target, label_smoothing=1.5)
    with pytest.raises(ValueError, match="grad must be"):
        cross_entropy_loss_and_grad(logits, target, grad=torch.empty((2, 30), dtype=torch.float16, device=DEVICE))
