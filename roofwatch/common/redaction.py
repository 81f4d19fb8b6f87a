"""Take secrets out of text before roofwatch writes it anywhere: API, statuses, comments, logs.

The one place that knows what a secret looks like. Recognised by shape: the userinfo of a URL
(``https://user:token@host/...``, also a broker URL's password), the token formats GitHub
issues (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``), bearer, basic and
token authorization values, and PEM private keys. Recognised by value: the secrets this
process was configured with, once ``remember_secrets`` has been told them (the service does
so when it reads its settings). Redacting is idempotent.

Where it is applied: ``redact_json`` on everything published to GitHub (the outbox), ``redact``
on what a run, comparison or delivery records, and ``RedactingFilter`` on roofwatch's log
handler (``roofwatch.workers.logs``).

Every pattern runs in time linear in the text, so any text may be redacted whole, however long
and whoever sent it (a request line, a benchmark name, a suite's output).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
# Shorter configured values are not masked by value: "dev" would mask every "dev" in a log.
MIN_REMEMBERED_LENGTH = 8

# A URL's scheme is looked for only where a run of scheme characters starts (the lookbehind),
# and the run is taken whole (possessive): tried from every letter of a long word, as a plain
# ``[A-Za-z][A-Za-z0-9+.-]*://`` is, it cost time quadratic in the word's length (a query
# string of 120,000 letters held the server for 16 s while its access-log line was redacted).
# The scheme itself starts at the run's first letter (``_userinfo_masked``).
_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])(?P<run>[A-Za-z0-9+.-]++)://(?P<userinfo>[^/@\s]++)@")
_NOT_A_SCHEME_START = "0123456789+.-"
_TOKENS = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})\b"
    r"|(?i:(?<=authorization: )(?:bearer|basic|token) [A-Za-z0-9._~+/=-]+)"
    r"|(?i:\bbearer [A-Za-z0-9._~+/=-]{16,})"
    r"|-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----.*?(?:-----END (?:[A-Z]+ )?PRIVATE KEY-----|\Z)",
    re.DOTALL)

_remembered: frozenset[str] = frozenset()
_remembered_pattern: re.Pattern[str] | None = None
_remember_lock = threading.Lock()


def remember_secrets(*values: str | None) -> None:
    """Mask these exact values too from now on, wherever they appear (in this process)."""
    global _remembered, _remembered_pattern
    fresh = {v.strip() for v in values if v and len(v.strip()) >= MIN_REMEMBERED_LENGTH}
    with _remember_lock:
        if fresh <= _remembered:
            return
        _remembered = _remembered | fresh
        # Longest first: a secret that contains another is masked whole.
        ordered = sorted(_remembered, key=len, reverse=True)
        _remembered_pattern = re.compile("|".join(re.escape(v) for v in ordered))


def redact(text: str) -> str:
    """``text`` with URL credentials, token-shaped strings and remembered secrets masked."""
    pattern = _remembered_pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _URL_USERINFO.sub(_userinfo_masked, text)
    return _TOKENS.sub(MASK, text)


def _userinfo_masked(match: re.Match[str]) -> str:
    if match["userinfo"] == MASK or not match["run"].lstrip(_NOT_A_SCHEME_START):
        return match[0]
    return f"{match['run']}://{MASK}@"


def redact_json(value: Any) -> Any:
    """``value`` (JSON: dicts, lists, strings, numbers) with every string in it redacted."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item) for item in value]
    return value


class RedactingFilter(logging.Filter):
    """Redacts each record's message and traceback before any formatter sees them.

    The message is formatted here (``msg % args``) so a secret passed as an argument is caught;
    the traceback is formatted here and kept as ``exc_text``, which both the text and the JSON
    formatters use when ``exc_info`` is gone.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: the formatter reports it
            return True
        redacted = redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its userinfo, and the ``user:password`` it carried (None when none)."""
    if "://" not in url:
        return url, None
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=host)), userinfo
