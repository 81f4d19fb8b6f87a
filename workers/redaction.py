"""Take secrets out of text before roofwatch writes it anywhere: API, statuses, comments, logs.

Two shapes are recognised: the userinfo of a URL (``https://user:token@host/...``) and the
token formats GitHub issues (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``)
plus bearer and basic authorization values. Redacting is idempotent.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_TOKENS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"
    r"|(?i:(?<=authorization: )(?:bearer|basic|token) [A-Za-z0-9._~+/=-]+)")


def redact(text: str) -> str:
    """``text`` with URL credentials and token-shaped strings masked."""
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@" if m["userinfo"] != MASK else m[0], text)
    return _TOKENS.sub(MASK, text)


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its userinfo, and the ``user:password`` it carried (None when none)."""
    if "://" not in url:
        return url, None
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=host)), userinfo
