"""What a node prints, read as data: a node is not trusted, so its JSON is parsed through the bounded
loader (envkit/safeio.py), its shape is bounded (nesting depth, item count) and every field envkit uses
is read with its type checked. A node that breaks any of this is one failed row naming the field; the
other nodes are still reported.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from envkit.errors import InputError
from envkit.safeio import loads_json

MAX_DEPTH = 32  # envkit's own reports nest 5 deep (verify: report > checks > check > values > tflops)
MAX_ITEMS = 200_000  # values in one node's JSON (a verify report holds a few hundred)
MAX_TEXT = 4000  # characters in one string field (a GPU name, a reason, an error line)
MAX_LIST = 4096  # entries of one list field (GPUs, checks, notes, records: a big env has ~1000 records)

# the formats the fields must have (envkit detect --json writes them; select.py parses them again)
DRIVER_VERSION = re.compile(r"\d{1,5}(?:\.\d{1,5}){0,3}")  # 535.104.05 (compat.driver_version)
CUDA_LEVEL = re.compile(r"\d{1,3}\.\d{1,3}")  # 12.8 (packaging.version.Version)
COMPUTE_CAPABILITY = re.compile(r"\d{1,2}\.\d{1,2}")  # 9.0 (models._cc_key)


class NodeDataError(ValueError):
    """A node's JSON is malformed, too deep or too big, or a field has the wrong type or format."""


def parse_object(text: str, what: str = "the node's JSON") -> dict[str, Any]:
    """JSON text -> an object, through safeio's bounded loader, then its shape bounded."""
    try:
        data = loads_json(text, "(node output)", what)
    except InputError as exc:
        raise NodeDataError(f"printed malformed JSON: {exc.message[:200]}") from None
    check_shape(data)
    if not isinstance(data, dict):
        raise NodeDataError(f"printed JSON that is {_describe(data)}, not an object")
    return data


def check_shape(data: Any, max_depth: int = MAX_DEPTH, max_items: int = MAX_ITEMS) -> None:
    """Walk `data` without recursion: deeper than `max_depth` or more than `max_items` values is an error
    (so nothing that later walks it, json.dumps included, can hit Python's recursion limit)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    items = 1
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise NodeDataError(f"printed JSON nested deeper than {max_depth} levels")
            items += len(value)
            if items > max_items:  # counted before anything is pushed
                raise NodeDataError(f"printed JSON of more than {max_items:,} values")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


_KINDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false", list: "a list",
          dict: "an object"}


def field(data: Mapping[str, Any], key: str, kind: type, where: str = "", *, required: bool = False) -> Any:
    """`data[key]` of type `kind` (float takes integers too; None when absent or null unless `required`),
    else a NodeDataError naming the field by its path (`where` + key)."""
    name = f"{where}{key}"
    value = data.get(key)
    if value is None:
        if required:
            raise NodeDataError(f"field {name} is missing")
        return None
    if kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        value = float(value) if ok else value
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise NodeDataError(f"field {name} is {_describe(value)}, not {_KINDS.get(kind, kind.__name__)}"
                            + (" (finite)" if kind is float and isinstance(value, float) else ""))
    if isinstance(value, str) and len(value) > MAX_TEXT:
        raise NodeDataError(f"field {name} is {len(value):,} characters long (at most {MAX_TEXT:,})")
    if isinstance(value, list) and len(value) > MAX_LIST:
        raise NodeDataError(f"field {name} has {len(value):,} entries (at most {MAX_LIST:,})")
    return value


def text(data: Mapping[str, Any], key: str, where: str = "", *, required: bool = False,
         pattern: re.Pattern[str] | None = None, choices: tuple[str, ...] = ()) -> str | None:
    """A string field, optionally of a format (`pattern`, matched whole) or one of `choices`."""
    value: str | None = field(data, key, str, where, required=required)
    if value is None:
        return None
    if pattern is not None and not pattern.fullmatch(value.strip()):
        raise NodeDataError(f"field {where}{key} is {value[:40]!r}, not of the form {pattern.pattern}")
    if choices and value not in choices:
        raise NodeDataError(f"field {where}{key} is {value[:40]!r}, not one of {', '.join(choices)}")
    return value.strip() if pattern is not None else value


def objects(data: Mapping[str, Any], key: str, where: str = "") -> list[dict[str, Any]]:
    """A list field whose entries must all be objects ([] when absent)."""
    items = field(data, key, list, where) or []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise NodeDataError(f"field {where}{key}[{i}] is {_describe(item)}, not an object")
    return items


def texts(data: Mapping[str, Any], key: str, where: str = "") -> list[str]:
    """A list field of strings ([] when absent)."""
    items = field(data, key, list, where) or []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise NodeDataError(f"field {where}{key}[{i}] is {_describe(item)}, not a string")
        if len(item) > MAX_TEXT:
            raise NodeDataError(f"field {where}{key}[{i}] is {len(item):,} characters long (at most {MAX_TEXT:,})")
    return list(items)
