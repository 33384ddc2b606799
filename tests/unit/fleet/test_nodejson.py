"""A node's JSON is bounded (the loader, nesting depth, value count) and read typed: a wrong field is an error
naming it, never a traceback."""

from __future__ import annotations

import json
import time

import pytest

from envkit.fleet import nodejson as nj


def test_json_nested_100000_deep_is_an_error_not_a_crash() -> None:
    for text in ('{"a":' * 100000 + "1" + "}" * 100000, "[" * 100000 + "]" * 100000):
        with pytest.raises(nj.NodeDataError, match="malformed JSON"):
            nj.parse_object(text)


def test_depth_and_size_are_capped_below_what_python_could_parse() -> None:
    deep = '{"a":' * 40 + "1" + "}" * 40
    with pytest.raises(nj.NodeDataError, match="deeper than 32 levels"):
        nj.parse_object(deep)
    assert nj.parse_object('{"a":' * 31 + "1" + "}" * 31)
    start = time.perf_counter()
    with pytest.raises(nj.NodeDataError, match="more than 200,000 values"):
        nj.parse_object(json.dumps({"x": [0] * 1_000_000}))
    assert time.perf_counter() - start < 5
    with pytest.raises(nj.NodeDataError, match="not an object"):
        nj.parse_object("[1, 2]")


def test_fields_are_read_with_their_type_and_named_when_wrong() -> None:
    data = {"n": 3, "b": True, "s": "x", "f": 1, "big": "y" * 5000, "nan": float("nan"), "list": [1, "a"]}
    assert nj.field(data, "n", int) == 3 and nj.field(data, "f", float) == 1.0 and nj.field(data, "gone", str) is None
    with pytest.raises(nj.NodeDataError, match="field driver.b is true/false, not an integer"):
        nj.field(data, "b", int, "driver.")
    with pytest.raises(nj.NodeDataError, match="field s is a string, not a number"):
        nj.field(data, "s", float)
    with pytest.raises(nj.NodeDataError, match="field nan is a number, not a number \\(finite\\)"):
        nj.field(data, "nan", float)
    with pytest.raises(nj.NodeDataError, match="5,000 characters"):
        nj.text(data, "big")
    with pytest.raises(nj.NodeDataError, match="field gone is missing"):
        nj.text(data, "gone", required=True)
    with pytest.raises(nj.NodeDataError, match=r"field list\[0\] is a number, not a string"):
        nj.texts(data, "list")
    with pytest.raises(nj.NodeDataError, match=r"field list\[0\] is a number, not an object"):
        nj.objects(data, "list")
    with pytest.raises(nj.NodeDataError, match="not of the form"):
        nj.text({"v": "5x5"}, "v", pattern=nj.DRIVER_VERSION)
    with pytest.raises(nj.NodeDataError, match="not one of PASS, FAIL"):
        nj.text({"v": "LOL"}, "v", choices=("PASS", "FAIL"))
