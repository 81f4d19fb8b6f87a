"""A JSON file as a streaming parser reads it, refused as soon as it would cost more than its size.

ijson's lexer (yajl) re-reads a token from its first byte each time a read ends inside it, so a
string or number spanning k reads costs k² — 14 s for one 32 MB string, minutes for 400 MB —
and nesting costs memory that grows with the square of the depth. ``BoundedStream`` hands the
parser the file in reads of at most ``CHUNK`` bytes and checks each one first with C-speed bytes
operations (no Python loop per byte or per token; NumPy follows the brackets of a read only when
they could pass the depth limit): every string and number at most
``JSON_TOKEN_LIMIT`` bytes as written, nesting at most ``JSON_DEPTH_LIMIT`` levels, and the
time spent within a deadline. Past any of them the read raises ``ResultFileError`` naming the
limit, having read at most one chunk past the point where the file broke it.

``StrictReader`` turns the ``NaN`` and ``Infinity`` of Python's json (which a pytest-benchmark file
may hold and strict JSON has no words for), and numbers that overflow a double, into the
strings ``"NaN"`` and ``"Infinity"``, so such a file is read by the same parser, within the
same limits, and its values refused or dropped as non-finite where they would have been.
"""

from __future__ import annotations

import math
import re
import time
from typing import Protocol

import numpy as np

from roofwatch.common.errors import ResultFileError
from roofwatch.common.limits import JSON_DEPTH_LIMIT, JSON_TOKEN_LIMIT, size_text

# Each read hands the parser at most one token limit's worth: a longer token then always spans a
# read boundary, so only the tokens open at a boundary need measuring.
CHUNK = JSON_TOKEN_LIMIT

# A backslash and the byte it escapes: replaced by two neutral bytes before a chunk is scanned,
# so an escaped quote never ends a string and positions (token lengths) stay what they were.
_ESCAPE = re.compile(rb"\\[\s\S]")
_NEUTRAL = b"__"
_NUMBER_BYTES = b"0123456789+-.eE"
# Outside strings, each opening bracket becomes 1 and each closing one 255 (-1 as int8); the
# rest is deleted.
_BRACKET_TABLE = bytes.maketrans(b"{[}]", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"{[}]")


class Source(Protocol):
    """What is read: an open file, or a ``StrictReader``."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...


class BoundedStream:
    """``raw`` read through ``read(size)`` as ijson reads it, each chunk checked before it is handed on.

    ``what`` names the file in errors; ``deadline`` is a ``time.monotonic()`` value, or None, and
    ``budget_s`` how long that was, for the message. Reads are at most ``token_limit`` bytes.
    """

    def __init__(self, raw: Source, what: str, deadline: float | None = None, budget_s: float | None = None,
                 *, token_limit: int = JSON_TOKEN_LIMIT, depth_limit: int = JSON_DEPTH_LIMIT) -> None:
        self._raw, self._what, self._deadline, self._budget_s = raw, what, deadline, budget_s
        self._token_limit, self._depth_limit = token_limit, depth_limit
        self._start()

    def _start(self) -> None:
        self._in_string = False  # the last chunk ended inside a string
        self._escape_pending = False  # ... right after its backslash
        self._string_run = 0  # bytes of the string the last chunk ended in, so far
        self._number_run = 0  # bytes of the number the last chunk ended in, so far
        self._depth = 0

    def restart(self) -> None:
        """Read again from the first byte, under the same deadline."""
        self._raw.seek(0)
        self._start()

    def read(self, size: int = -1) -> bytes:
        if self._deadline is not None and time.monotonic() > self._deadline:
            allowed = f" ({self._budget_s:.0f} s)" if self._budget_s is not None else ""
            raise ResultFileError(f"{self._what} was not read within the time its suite had left{allowed}: "
                                  "the file is too large to read in time")
        chunk = self._raw.read(self._token_limit if size < 0 else min(size, self._token_limit))
        if chunk:
            self._check(chunk)
        return chunk

    def _check(self, chunk: bytes) -> None:
        view = chunk
        if self._escape_pending:
            view = b"_" + view[1:]
            self._escape_pending = False
        if b"\\" in view:
            view = _ESCAPE.sub(_NEUTRAL, view)
            if view.endswith(b"\\"):  # its escaped byte starts the next chunk
                self._escape_pending = True
                view = view[:-1] + b"_"
        # Split at the quotes, the pieces alternate between outside and inside strings.
        pieces = view.split(b'"')
        started_inside, quotes = self._in_string, len(pieces) - 1
        ends_inside = started_inside ^ (quotes % 2 == 1)
        self._check_strings(pieces, started_inside, ends_inside)
        self._check_numbers(pieces, started_inside, ends_inside)
        self._check_depth(b"".join(pieces[1 if started_inside else 0::2]))
        self._in_string = ends_inside

    def _check_strings(self, pieces: list[bytes], started_inside: bool, ends_inside: bool) -> None:
        if started_inside:
            self._string_run += len(pieces[0])
            self._refuse_long("a string", self._string_run)
            if len(pieces) == 1:  # no quote: the whole chunk is inside that string
                return
        self._string_run = len(pieces[-1]) if ends_inside else 0
        self._refuse_long("a string", self._string_run)

    def _check_numbers(self, pieces: list[bytes], started_inside: bool, ends_inside: bool) -> None:
        if not started_inside:
            first = pieces[0]
            leading = len(first) - len(first.lstrip(_NUMBER_BYTES))
            self._refuse_long("a number", self._number_run + leading)
            if leading == len(first) and len(pieces) == 1:  # the whole chunk goes on with one number
                self._number_run += leading
                return
        last = pieces[-1]
        self._number_run = 0 if ends_inside else len(last) - len(last.rstrip(_NUMBER_BYTES))

    def _check_depth(self, outside: bytes) -> None:
        brackets = outside.translate(_BRACKET_TABLE, _NOT_BRACKETS)
        if not brackets:
            return
        opening = brackets.count(1)
        if self._depth + opening > self._depth_limit:  # may go past it: follow the brackets one by one
            depth = self._depth + np.cumsum(np.frombuffer(brackets, dtype=np.int8), dtype=np.int64)
            if int(depth.max()) > self._depth_limit:
                raise ResultFileError(f"{self._what} is nested too deeply to read "
                                      f"(more than {self._depth_limit} levels)")
        self._depth += opening - (len(brackets) - opening)

    def _refuse_long(self, token: str, length: int) -> None:
        if length > self._token_limit:
            raise ResultFileError(f"{self._what} holds {token} longer than {size_text(self._token_limit)} "
                                  f"({self._token_limit} bytes); it is not read further")


# A string (taken whole, so nothing inside one is touched), one of Python's non-finite words, or
# a number with an exponent of three digits or more (which may overflow a double: strict
# parsers refuse it where Python reads infinity). A string left open at the end of the file (or
# after a last lone backslash) is taken to the end too: were it not matched, every escaped quote
# inside it would start a new scan to the end. A number is looked for only where one starts.
_STRING_OR_NON_FINITE = re.compile(
    rb'"(?:[^"\\]++|\\[\s\S]?)*+(?:"|\Z)'
    rb"|(?P<word>-?Infinity|NaN)"
    rb"|(?<![\w.+-])(?P<number>-?\d++(?:\.\d++)?[eE][+-]?\d{3,}+)")


class StrictReader:
    """``data`` read with Python's bare ``NaN``, ``Infinity`` and ``-Infinity``, and numbers too
    large for a double, written as the JSON strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.

    Converted as it is read: a parser that stops early (at the benchmark past the limit) leaves
    the rest of the file unconverted, and nothing but the read-ahead is held besides ``data``.
    """

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.seek(0)

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise ValueError("a strict stream only goes back to its start")
        self._matches = _STRING_OR_NON_FINITE.finditer(self._data)
        self._copied, self._ready, self._finished = 0, bytearray(), False
        return 0

    def read(self, size: int = -1) -> bytes:
        data, ready = self._data, self._ready
        while not self._finished and (size < 0 or len(ready) < size):
            match = next(self._matches, None)
            if match is None:
                ready += data[self._copied:]
                self._finished = True
                break
            word = match["word"]
            if word is None and match["number"] is not None and math.isinf(value := float(match["number"])):
                word = b"Infinity" if value > 0 else b"-Infinity"
            if word is None:
                ready += data[self._copied:match.end()]
            else:
                ready += data[self._copied:match.start()] + b'"' + word + b'"'
            self._copied = match.end()
        taken = len(ready) if size < 0 else min(size, len(ready))
        chunk = bytes(ready[:taken])
        del ready[:taken]
        return chunk
