"""The data files shipped inside envkit are read through the bounded loader (envkit.safeio) too."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit import compat
from envkit.compat import legacy
from envkit.errors import InputError
from envkit.render import mirrors

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8))


@pytest.mark.parametrize(("module", "attr", "loader"), [
    (compat, "DATA_FILE", compat.load), (legacy, "DATA_FILE", legacy.load), (mirrors, "DATA", mirrors._data)])
@pytest.mark.parametrize(("content", "expect"), [
    (BOMB, "YAML nodes"), ("- just\n- a list\n", "not a mapping"), (b"\xff\xfe\x00bad", "UTF"),
    ("key: [unclosed\n", "YAML syntax error")])
def test_a_damaged_data_file_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: object,
                                                attr: str, loader: object, content: str | bytes,
                                                expect: str) -> None:
    path = tmp_path / "data.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    monkeypatch.setattr(module, attr, path)
    loader.cache_clear()  # type: ignore[attr-defined]
    try:
        with pytest.raises(InputError) as caught:
            loader()  # type: ignore[operator]
    finally:
        loader.cache_clear()  # type: ignore[attr-defined]
    assert expect in caught.value.message and str(path) in caught.value.message
    assert caught.value.hint is not None and "reinstall envkit" in caught.value.hint


def test_the_shipped_files_still_load() -> None:
    for loader in (compat.load, legacy.load, mirrors._data):
        loader.cache_clear()
        assert loader()
