"""Each kernel against its float64 reference: random, large and odd-shaped inputs."""

import numpy as np
import pytest

from minikernels.layernorm import layernorm, layernorm_reference
from minikernels.matmul import matmul, matmul_reference
from minikernels.rmsnorm import rmsnorm, rmsnorm_reference
from minikernels.softmax import softmax, softmax_reference

SHAPES = [(1, 1), (3, 17), (8, 1000), (64, 1024)]
SHAPE_IDS = [f"{r}x{c}" for r, c in SHAPES]
SCALES = {"randn": 1.0, "large": 200.0}  # large logits overflow exp() unless the row max is subtracted
RTOL = 1e-4  # float32 kernels against a float64 reference


def _inputs(shape: tuple[int, int], scale: float) -> np.ndarray:
    return (np.random.default_rng(sum(shape)).standard_normal(shape) * scale).astype(np.float32)


def _check(out: np.ndarray, expected: np.ndarray, record_property) -> None:
    assert np.isfinite(out).all(), "non-finite output"
    err = float(np.max(np.abs(out - expected) / (np.abs(expected) + 1e-6)))
    record_property("max_rel_err", err)
    assert err < RTOL, f"max relative error {err:.3g} > {RTOL}"


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dist", SCALES)
def test_softmax(shape, dist, record_property):
    x = _inputs(shape, SCALES[dist])
    _check(softmax(x), softmax_reference(x), record_property)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_rmsnorm(shape, record_property):
    x = _inputs(shape, 1.0)
    w = np.linspace(0.5, 1.5, shape[1], dtype=np.float32)
    _check(rmsnorm(x, w), rmsnorm_reference(x, w), record_property)


@pytest.mark.parametrize("shape", SHAPES, ids=SHAPE_IDS)
def test_layernorm(shape, record_property):
    x = _inputs(shape, 1.0) + 3.0
    w = np.linspace(0.5, 1.5, shape[1], dtype=np.float32)
    b = np.linspace(-1.0, 1.0, shape[1], dtype=np.float32)
    out, expected = layernorm(x, w, b), layernorm_reference(x, w, b)
    assert np.isfinite(out).all(), "non-finite output"
    err = float(np.max(np.abs(out - expected)))
    record_property("max_abs_err", err)
    assert err < 2e-2, f"max absolute error {err:.3g}"


@pytest.mark.parametrize("mnk", [(1, 1, 1), (5, 7, 3), (64, 128, 128)], ids=["1x1x1", "5x7x3", "64x128x128"])
def test_matmul(mnk, record_property):
    m, n, k = mnk
    a, b = _inputs((m, k), 1.0), _inputs((k, n), 1.0)
    out, expected = matmul(a, b), matmul_reference(a, b)
    err = float(np.max(np.abs(out - expected)))
    record_property("max_abs_err", err)
    assert err < 1e-3 * k, f"max absolute error {err:.3g}"
