"""Packaged data: envs/ and templates/ ship inside the wheel as envkit/_data/; a source checkout
(editable install) reads them from the repository root."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

_PKG = Path(__file__).parent


def data_dir(name: str) -> Path:
    shipped = _PKG / "_data" / name
    if shipped.is_dir():
        return shipped
    return _PKG.parent / name  # source checkout


@functools.lru_cache(maxsize=1)
def template_env() -> Any:
    import jinja2

    from envkit.render.envfile import yaml_scalar, yaml_str

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["yaml_str"] = yaml_str
    env.filters["yaml_scalar"] = yaml_scalar
    return env
