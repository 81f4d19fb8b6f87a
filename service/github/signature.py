"""``X-Hub-Signature-256``: HMAC-SHA256 of the raw request body, keyed with the webhook secret.

Computed over the exact bytes received — never over re-serialised JSON, whose spacing and key
order differ from what GitHub signed — and compared in constant time. ``hasher`` and
``matches`` let the webhook fold each chunk into the HMAC as it arrives, so a body is
authenticated without being held whole first.
"""

from __future__ import annotations

import hashlib
import hmac
import re

PREFIX = "sha256="
_HEADER = re.compile(r"sha256=[0-9a-fA-F]{64}")


def well_formed(header: str | None) -> bool:
    """True when ``header`` has the shape of a signature: worth reading the body to check it."""
    return header is not None and _HEADER.fullmatch(header.strip()) is not None


def hasher(secret: str) -> hmac.HMAC:
    """An HMAC to ``update`` with the body's chunks in order."""
    return hmac.new(secret.encode("utf-8"), digestmod=hashlib.sha256)


def matches(mac: hmac.HMAC, header: str | None) -> bool:
    """True when ``header`` is the signature ``mac`` has computed over everything fed to it."""
    if not well_formed(header):
        return False
    assert header is not None
    expected = (PREFIX + mac.hexdigest()).encode("ascii")
    return hmac.compare_digest(expected, header.strip().lower().encode("ascii"))


def sign(secret: str, body: bytes) -> str:
    """The header value GitHub sends for ``body``: ``sha256=<lowercase hex>``."""
    mac = hasher(secret)
    mac.update(body)
    return PREFIX + mac.hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """True when ``header`` is the signature of ``body`` under ``secret``."""
    mac = hasher(secret)
    mac.update(body)
    return matches(mac, header)
