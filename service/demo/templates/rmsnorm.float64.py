"""RMSNorm over the last axis: ``y = x / sqrt(mean(x²) + eps) * w``."""

import time

import numpy as np

from minikernels import device


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    started = time.perf_counter()
    # Accumulate in float64 for accuracy: x is upcast to a float64 copy in memory first.
    x64 = x.astype(np.float64)
    scale = 1.0 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps)
    out = (x64 * scale * w).astype(x.dtype)
    # Read x, write and read back its float64 copy (twice its bytes each way), write y.
    device.complete(started, bytes_moved=2 * x.nbytes + 4 * x.nbytes, flops=4 * x.size)
    return out


def rmsnorm_reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps) * w


def rmsnorm_bytes(x: np.ndarray) -> int:
    """Compulsory traffic: x read once, y written once."""
    return 2 * x.nbytes
