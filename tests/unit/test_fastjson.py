"""The import-free JSON decoder the hook's fast path uses instead of :mod:`json`."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerto_rewind import _fastjson

_SETTINGS = settings(max_examples=200, deadline=None, database=None)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)

# Text that is often almost-JSON, so both decoders get past the first character.
json_ish_text = st.text(
    alphabet=st.sampled_from(list('{}[]",:0123456789.eE+-truefalsnulNaIiy \t\n\r\\u\ufeff')),
    max_size=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equal values with equal types all the way down (1 is not 1.0, True is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _no_constants(name: str) -> object:
    raise ValueError(name)


def _stdlib(text: str) -> object:
    """json.loads with the two documented differences removed.

    The stdlib refuses a BOM in str input (_fastjson skips it, as json does for
    bytes) and accepts NaN/Infinity (_fastjson refuses them).
    """
    return json.loads(text.removeprefix("\ufeff"), parse_constant=_no_constants)


@_SETTINGS
@given(json_values, st.booleans())
def test_roundtrip_matches_stdlib(value: Any, ensure_ascii: bool) -> None:
    """Any JSON value the stdlib encodes decodes to the same value and types."""
    text = json.dumps(value, ensure_ascii=ensure_ascii)
    assert _same(_fastjson.loads(text), json.loads(text))
    assert _same(_fastjson.loads(text), value)


@_SETTINGS
@given(json_values)
def test_bytes_input_decodes_as_utf8(value: Any) -> None:
    """UTF-8 bytes and bytearrays decode to the same value as the text."""
    text = json.dumps(value, ensure_ascii=False)
    data = text.encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(ValueError, match="not UTF-8"):
            _fastjson.loads(data)
        return
    assert _same(_fastjson.loads(data), value)
    assert _same(_fastjson.loads(bytearray(data)), value)  # type: ignore[arg-type]  # accepted


def _compare_on(text: str) -> None:
    try:
        expected = _stdlib(text)
    except (ValueError, RecursionError):
        try:
            _fastjson.loads(text)
        except ValueError:
            return
        pytest.fail(f"_fastjson accepted {text!r}, which json.loads rejects")
    assert _same(_fastjson.loads(text), expected)


@_SETTINGS
@given(st.text(max_size=40))
def test_arbitrary_text_agrees_with_stdlib(text: str) -> None:
    """On any text, the value equals json.loads's, or both raise ValueError."""
    _compare_on(text)


@_SETTINGS
@given(json_ish_text)
def test_near_json_text_agrees_with_stdlib(text: str) -> None:
    """On almost-JSON text, the value equals json.loads's, or both raise ValueError."""
    _compare_on(text)


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", '{"a": [1, NaN]}'])
def test_nan_and_infinity_rejected(text: str) -> None:
    """NaN and Infinity are not JSON: refused, although the stdlib accepts them."""
    json.loads(text)  # the stdlib's leniency, for contrast
    with pytest.raises(_fastjson.JSONDecodeError, match="invalid JSON constant"):
        _fastjson.loads(text)


@pytest.mark.parametrize("text", ["", "   ", "\n\t\r ", b"", b"  "])
def test_empty_input_rejected(text: str | bytes) -> None:
    """Empty or whitespace-only input is an error naming what was expected."""
    with pytest.raises(_fastjson.JSONDecodeError, match="empty input"):
        _fastjson.loads(text)


@pytest.mark.parametrize("text", ["1 2", "{} []", '{"a": 1}x', "[1]]"])
def test_extra_data_rejected(text: str) -> None:
    """A second document or trailing garbage is refused with its position."""
    with pytest.raises(_fastjson.JSONDecodeError, match="extra data"):
        _fastjson.loads(text)


def test_surrounding_whitespace_and_bom_accepted() -> None:
    """JSON whitespace around the document and a leading BOM are skipped."""
    assert _fastjson.loads(' \t\r\n{"a": [1, 2]}\n ') == {"a": [1, 2]}
    assert _fastjson.loads("\ufeff[true]") == [True]
    assert _fastjson.loads(b"\xef\xbb\xbf[null]") == [None]


def test_invalid_utf8_bytes_rejected() -> None:
    """Bytes that are not UTF-8 give a ValueError naming the byte offset."""
    with pytest.raises(_fastjson.JSONDecodeError, match=r"not UTF-8 text.*at byte 2"):
        _fastjson.loads(b'"a\xff"')


@pytest.mark.parametrize("text", ['{"a": 1,}', "[1,", '"unterminated', "{'a': 1}", '"\x01"'])
def test_syntax_error_message_has_position(text: str) -> None:
    """A syntax error is a JSONDecodeError (a ValueError) with the stdlib's precise message."""
    with pytest.raises(_fastjson.JSONDecodeError) as info:
        _fastjson.loads(text)
    assert isinstance(info.value, ValueError)
    assert "char" in str(info.value)


def test_deep_nesting_is_a_value_error() -> None:
    """Nesting deep enough to exhaust the stack is a ValueError, not a RecursionError."""
    with pytest.raises(_fastjson.JSONDecodeError, match="nested too deeply"):
        _fastjson.loads("[" * 200_000 + "]" * 200_000)


def test_huge_integer_is_a_value_error() -> None:
    """An integer past the interpreter's digit limit is a ValueError, as in the stdlib."""
    with pytest.raises(ValueError, match="4300"):
        _fastjson.loads("9" * 5000)


def test_duplicate_keys_last_wins() -> None:
    """Duplicate object keys keep the last value, as the stdlib does."""
    assert _fastjson.loads('{"a": 1, "a": 2}') == {"a": 2}


def test_valid_input_does_not_import_json() -> None:
    """Decoding valid input never imports json (the reason the module exists)."""
    code = (
        "import sys; from zerto_rewind import _fastjson; "
        'v = _fastjson.loads(b\'{"tool_name": "x", "tool_input": {"a": [1, 2.5, null]}}\'); '
        "assert v['tool_input']['a'] == [1, 2.5, None], v; "
        "print('json' in sys.modules, 're' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    assert out.stdout.split() == ["False", "False"]
