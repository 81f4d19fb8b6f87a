"""``X-Hub-Signature-256``: HMAC-SHA256 of the raw request body, keyed with the webhook secret.

Computed over the exact bytes received — never over re-serialised JSON, whose spacing and key
order differ from what GitHub signed — and compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(secret: str, body: bytes) -> str:
    """The header value GitHub sends for ``body``: ``sha256=<lowercase hex>``."""
    return PREFIX + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """True when ``header`` is the signature of ``body`` under ``secret``."""
    if not header or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body).encode("ascii"), header.strip().encode("ascii", "replace"))
