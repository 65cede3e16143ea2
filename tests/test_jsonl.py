"""The one JSON Lines reader every file format of gsr goes through."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gsrlang.files.jsonl import jsonl_lines, read_jsonl


class Bad(Exception):
    pass


def test_lines_values_and_problems(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\n\n  \n[2]\n{"b": "cut\n{"c": 1,, }\n\xff\n')
    got = list(jsonl_lines(path))
    assert [(n, v) for n, v, p in got if p is None] == [(1, {"a": 1}), (4, [2])]
    problems = {n: p for n, _, p in got if p is not None}
    assert problems[5].startswith("truncated JSON (unterminated string")
    assert problems[6].startswith("invalid JSON at column 9")
    assert problems[7] == "not valid UTF-8 (byte 0xff at byte 1 of the line)"


@pytest.mark.parametrize("content, message", [
    (b'{"a": 1}\n[2]\n', r"x\.jsonl: line 2: expected a trace record, got a JSON array"),
    (b'{"a": 1}\n{"a": \n', r"x\.jsonl: line 2: truncated JSON"),
    (b"\xe9\n", r"x\.jsonl: line 1: not valid UTF-8"),
])
def test_read_jsonl_raises_the_callers_error_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(Bad, match=message):
        list(read_jsonl(path, Bad, "a trace record"))


def test_missing_and_folder(tmp_path):
    with pytest.raises(Bad, match="no such file"):
        list(read_jsonl(tmp_path / "none.jsonl", Bad))
    with pytest.raises(Bad, match="is a folder"):
        list(read_jsonl(tmp_path, Bad))


def test_limits_are_problems_not_crashes(tmp_path, monkeypatch):
    from gsrlang.files import jsonl

    monkeypatch.setattr(jsonl, "MAX_ROW_BYTES", 100)
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": ' + "[" * 150 + "]" * 150 + "}\n" + '{"b": "' + "x" * 200 + '"}\n{"c": 1e999}\n{"d": 1}\n')
    got = {n: (v, p) for n, v, p in jsonl_lines(path)}
    assert got[1][1] is not None and "longer than 100 bytes" in got[1][1]
    assert "longer than 100 bytes" in got[2][1]
    assert "out of range" in got[3][1]
    assert got[4] == ({"d": 1}, None)


STDLIB_CASES = [
    '{"big": 123456789012345678901234567890, "neg": -9223372036854775809, "u64": 18446744073709551615}',
    '{"nan": NaN, "inf": -Infinity}', '{"lone": "\\ud800", "pair": "\\ud83d\\ude00"}', '{"z": -0.0, "i": -0}',
    '{"a": 1, "b": 2, "a": 3}', '{"f": 0.30000000000000004, "g": 5e-324, "h": 1e-400, "e": 1.7976931348623157e308}',
    '{"deep": ' + "[" * 101 + "]" * 101 + "}", '{"x": 1e309}', '{"a": "x\ty"}', '{"a": 1}\x0b',
    '{"café": [12345678901234567890123], "w": "１２３４５６７８９０１２３４５６７８９０"}',
]


@pytest.mark.parametrize("text", STDLIB_CASES)
def test_a_line_reads_as_the_standard_library_reads_it(text):
    """orjson reads most lines first: the value (types, float bits, key order) or the problem is json's."""
    import json
    import math

    from gsrlang.files import jsonl

    def same(a, b):
        if type(a) is not type(b):
            return False
        if isinstance(a, float):
            return a == b and math.copysign(1, a) == math.copysign(1, b) or (a != a and b != b)
        if isinstance(a, dict):
            return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list):
            return len(a) == len(b) and all(map(same, a, b))
        return a == b

    got, problem = jsonl.parse_json(text)
    try:
        want, want_problem = jsonl._DECODER.decode(text), None
        if jsonl.deeper_than(want, jsonl.MAX_ROW_DEPTH, text):
            want, want_problem = None, "deep"
    except (ValueError, RecursionError) as exc:
        want, want_problem = None, str(exc)
    assert (problem is None) == (want_problem is None), (problem, want_problem)
    assert same(got, want)
    if text.startswith('{"big"'):
        assert type(json.loads(text)["big"]) is int
    if text.startswith('{"café"'):  # 19 digits in a row, beside characters of more than one byte
        assert type(got["café"][0]) is int


def _read_both_ways(tmp_path, monkeypatch, content: bytes) -> tuple[list, list]:
    """`jsonl_lines` of a file, with and without the short way (a line orjson reads from its bytes)."""
    from gsrlang.files import jsonl

    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    short = list(jsonl.jsonl_lines(path))
    with monkeypatch.context() as m:
        m.setattr(jsonl, "_parse_bytes", lambda raw: jsonl._UNREAD)
        long = list(jsonl.jsonl_lines(path))
    return short, long


def _typed(value):
    """A value with every float's sign and every container's key order made comparable."""
    if isinstance(value, dict):
        return ("dict", [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def test_a_line_read_from_its_bytes_is_read_as_its_text(tmp_path, monkeypatch):
    """Every line of the standard library's cases, with both line endings, after a byte-order mark and with bad
    bytes: the short way gives each line's value or problem exactly as the long way does."""
    lines = [t.encode("utf-8", "surrogatepass") for t in STDLIB_CASES]
    lines += [b'\xef\xbb\xbf{"bom": 1}', b'"\xed\xa0\x80"', b'"\xc0\x80"', b'{"a": "\xff"}', b"  ", b"\x0c",
              b'{"a": 1}\x00', b'"\\u00e9 \xc3\xa9"', b"[" * 101 + b"]" * 101, b"1" * 19, b"-" + b"9" * 18]
    for ending in (b"\n", b"\r\n"):
        content = b'\xef\xbb\xbf{"first": true}' + ending + ending.join(lines) + ending
        short, long = _read_both_ways(tmp_path, monkeypatch, content)
        assert [(n, _typed(v), p) for n, v, p in short] == [(n, _typed(v), p) for n, v, p in long]
        assert short[0] == (1, {"first": True}, None)


@given(st.lists(st.one_of(st.binary(max_size=12), st.from_regex(rb'\A[ \[\]{}":,0-9a-z\\.e+-]{0,24}\Z'),
                          st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
                                       lambda inner: st.lists(inner, max_size=3)
                                       | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                                       max_leaves=8).map(lambda v: json.dumps(v).encode())),
                max_size=8))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_file_reads_the_same_with_and_without_the_short_way(tmp_path, monkeypatch, lines):
    content = b"\n".join(line.replace(b"\n", b" ") for line in lines) + b"\n"
    short, long = _read_both_ways(tmp_path, monkeypatch, content)
    assert [(n, _typed(v), p) for n, v, p in short] == [(n, _typed(v), p) for n, v, p in long]
