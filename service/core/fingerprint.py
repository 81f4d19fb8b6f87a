"""Series fingerprints: a hash of exactly what must match for two results to be comparable."""

from __future__ import annotations

import hashlib


def benchmark_fingerprint(repository: str, suite: str, name: str, params: str, dtype: str,
                          device_class: str) -> str:
    key = "\x1f".join([repository, suite, name, params, dtype, device_class])
    return hashlib.sha256(key.encode()).hexdigest()[:32]
