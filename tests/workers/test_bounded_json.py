"""A JSON file checked as a streaming parser reads it: every string and number bounded, nesting
bounded, a deadline; the parser sees exactly the file's bytes, and a hostile file is refused
after little of it was read."""

from __future__ import annotations

import io
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofwatch.common.errors import ResultFileError
from roofwatch.common.limits import JSON_DEPTH_LIMIT, JSON_TOKEN_LIMIT
from roofwatch.result_files.bounded_json import BoundedStream, StrictReader

NUMBER_BYTES = set(b"0123456789+-.eE")


def reference(text: bytes) -> tuple[int, int, int]:
    """Longest string (bytes between its quotes, as written), longest number and deepest nesting, one byte at a time."""
    longest_string = longest_number = depth = deepest = 0
    inside, escaped, run = False, False, 0
    for byte in text:
        if inside:
            if escaped:
                escaped, run = False, run + 1
            elif byte == ord("\\"):
                escaped, run = True, run + 1
            elif byte == ord('"'):
                inside, longest_string = False, max(longest_string, run)
            else:
                run += 1
            continue
        if byte in NUMBER_BYTES:
            run += 1
            longest_number = max(longest_number, run)
            continue
        run = 0
        if byte == ord('"'):
            inside = True
        elif byte in b"{[":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"}]":
            depth -= 1
    return longest_string, longest_number, deepest


def read_all(stream: BoundedStream, sizes: list[int]) -> bytes:
    out, turn = [], 0
    while chunk := stream.read(sizes[turn % len(sizes)] if sizes else -1):
        out.append(chunk)
        turn += 1
    return b"".join(out)


scalars = (st.none() | st.booleans() | st.integers(min_value=-10**60, max_value=10**60)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(alphabet=st.sampled_from('ab"\\\n[]{}é/u'), max_size=30))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(alphabet='k"\\[', max_size=6), inner, max_size=4), max_leaves=25)


@settings(max_examples=400, deadline=None)
@given(documents, st.booleans(), st.integers(min_value=1, max_value=40), st.integers(min_value=1, max_value=6),
       st.lists(st.integers(min_value=1, max_value=50), max_size=4))
def test_refuses_exactly_what_passes_a_limit_and_hands_on_every_byte(
        document: object, ascii_only: bool, token_limit: int, depth_limit: int, sizes: list[int]) -> None:
    text = json.dumps(document, ensure_ascii=ascii_only).encode()
    longest_string, longest_number, deepest = reference(text)
    stream = BoundedStream(io.BytesIO(text), "test JSON", token_limit=token_limit, depth_limit=depth_limit)
    too_long, too_deep = max(longest_string, longest_number) > token_limit, deepest > depth_limit
    if not (too_long or too_deep):
        assert read_all(stream, sizes) == text
        return
    with pytest.raises(ResultFileError) as refused:
        read_all(stream, sizes)
    message = str(refused.value)
    assert ("longer than" in message and too_long) or ("nested too deeply" in message and too_deep), message


class CountingReader(io.BytesIO):
    """A file that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.handed = 0

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self.handed += len(chunk)
        return chunk


MB = 1024 * 1024


@pytest.mark.parametrize(("name", "text", "reason"), [
    ("a 64 MB string", b'{"benchmarks": [{"name": "' + b"a" * (64 * MB) + b'"}]}', "a string longer than 64 KiB"),
    ("64 MB of escaped quotes", b'{"name": "' + b'\\"' * (32 * MB) + b'"}', "a string longer than 64 KiB"),
    ("a 64 MB number", b'{"median": 1' + b"0" * (64 * MB) + b"}", "a number longer than 64 KiB"),
    ("a number of many chunks", b"[" + b"7" * (3 * JSON_TOKEN_LIMIT) + b"]", "a number longer than 64 KiB"),
    ("nesting 10 million deep", b"[" * (10 * MB) + b"]" * (10 * MB), f"more than {JSON_DEPTH_LIMIT} levels"),
])
def test_a_hostile_file_is_refused_after_reading_little_of_it(name: str, text: bytes, reason: str) -> None:
    raw = CountingReader(text)
    with pytest.raises(ResultFileError, match=reason):
        read_all(BoundedStream(raw, "benchmark JSON"), [])
    assert raw.handed <= 3 * JSON_TOKEN_LIMIT, f"{name}: read {raw.handed} bytes before refusing"


@pytest.mark.parametrize("read_size", [1, 2, 3, 7])
@pytest.mark.parametrize("token", ["string", "number"])
def test_a_token_one_byte_past_the_limit_is_refused_however_the_reads_fall(read_size: int, token: str) -> None:
    def document(length: int) -> bytes:
        return b'["' + b"s" * length + b'"]' if token == "string" else b"[1" + b"0" * (length - 1) + b"]"

    assert read_all(BoundedStream(io.BytesIO(document(7)), "x", token_limit=7), [read_size]) == document(7)
    with pytest.raises(ResultFileError, match=f"a {token} longer than 7 bytes"):
        read_all(BoundedStream(io.BytesIO(document(8)), "x", token_limit=7), [read_size])


def test_a_string_or_number_of_exactly_the_limit_is_read() -> None:
    text = b'["' + b"s" * JSON_TOKEN_LIMIT + b'", 1' + b"0" * (JSON_TOKEN_LIMIT - 1) + b"]"
    assert read_all(BoundedStream(io.BytesIO(text), "x"), []) == text
    with pytest.raises(ResultFileError, match="a string longer"):
        read_all(BoundedStream(io.BytesIO(b'["' + b"s" * (JSON_TOKEN_LIMIT + 1) + b'"]'), "x"), [])


def test_past_its_deadline_nothing_more_is_read() -> None:
    raw = CountingReader(b'{"benchmarks": []}')
    stream = BoundedStream(raw, "benchmark JSON", deadline=time.monotonic() - 1, budget_s=30)
    with pytest.raises(ResultFileError, match=r"not read within the time its suite had left \(30 s\)"):
        stream.read(1024)
    assert raw.handed == 0


@pytest.mark.parametrize(("text", "expected"), [
    (b'{"a": NaN, "b": [Infinity, -Infinity, 1.5]}', b'{"a": "NaN", "b": ["Infinity", "-Infinity", 1.5]}'),
    (b'{"NaN": "Infinity NaN", "x": "\\" NaN"}', b'{"NaN": "Infinity NaN", "x": "\\" NaN"}'),
    (b'{"open": "\\" NaN', b'{"open": "\\" NaN'),  # an unterminated string stays one
    (b'[1e400, -2.5E+999, 1e-400, 1e300, "1e400", x1e400]', b'["Infinity", "-Infinity", 1e-400, 1e300, "1e400", x1e400]'),
])
def test_strict_writes_non_finite_words_as_strings_and_leaves_strings_alone(text: bytes, expected: bytes) -> None:
    assert StrictReader(text).read() == expected
    stream = StrictReader(text)
    assert b"".join(iter(lambda: stream.read(3), b"")) == expected
    stream.seek(0)
    assert stream.read() == expected


@pytest.mark.parametrize("text", [b'{"a": "' + b'\\"' * (4 * MB), b"[" + b"7" * (8 * MB) + b"]"],
                         ids=["open-string-of-escaped-quotes", "digits"])
def test_strict_is_linear(text: bytes) -> None:
    # Were each escaped quote or digit the start of a new scan to the end, this would take hours.
    assert StrictReader(text).read() == text
