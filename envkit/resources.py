"""Packaged data: envs/ and templates/ ship inside the wheel as envkit/_data/; a source checkout
(editable install) reads them from the repository root."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

_PKG = Path(__file__).parent


def data_dir(name: str) -> Path:
    shipped = _PKG / "_data" / name
    if shipped.is_dir():
        return shipped
    return _PKG.parent / name  # source checkout


def yaml_str(value: Any) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML); the templates' `yaml_str` filter.

    It lives here, below render/, so render/envfile.py and the template loader share it without a cycle."""
    return json.dumps(str(value), ensure_ascii=False)


@functools.lru_cache(maxsize=1)
def template_env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["yaml_str"] = yaml_str
    return env
