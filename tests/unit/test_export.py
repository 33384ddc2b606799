"""export reads conda-meta records typed: a wrongly typed name/version/build is a named error about that record,
never a traceback (issue 20 / T4's finding: a record whose name is a list crashed `envkit export`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.errors import ExportError
from envkit.export import read_records


@pytest.mark.parametrize("bad", [["a", "b"], {"x": 1}, None, True, ""])
def test_a_wrongly_typed_record_field_is_a_named_error(tmp_path: Path, bad: object) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "history").write_text("")
    (meta / "zlib-1.3-h0_0.json").write_text(json.dumps({"name": bad, "version": "1.3", "build": "h0_0"}))
    with pytest.raises(ExportError) as info:
        read_records(tmp_path)
    assert "zlib-1.3-h0_0.json" in info.value.message and "name" in info.value.message
    assert info.value.hint and "recreate" in info.value.hint


def test_a_numeric_version_is_read_as_its_text(tmp_path: Path) -> None:
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "history").write_text("")
    (meta / "pkg-2-h0_0.json").write_text(json.dumps({"name": "pkg", "version": 2, "build": "h0_0"}))
    assert [(r.name, r.version) for r in read_records(tmp_path)] == [("pkg", "2")]


def test_pylock_of_an_env_pip_installed_outside_envkit(tmp_path: Path) -> None:
    """A conda-made env: a VCS install becomes a [packages.vcs] source, a package with no recorded file
    and hash is named and left out (a pylock source needs both), an editable one too; --strict refuses."""
    import tomllib

    from envkit.export import export_pylock
    from helpers import conda_shaped_env

    prefix = conda_shaped_env(tmp_path)
    result = export_pylock(prefix)
    data = tomllib.loads(result.text)
    assert data["lock-version"] == "1.0" and data["tool"]["envkit"]["environment"] == prefix.name
    pkgs = {p["name"]: p for p in data["packages"]}
    assert pkgs["mylib"]["vcs"]["type"] == "git"
    assert pkgs["mylib"]["vcs"]["commit-id"] == "0123456789abcdef0123456789abcdef01234567"
    assert "requests" not in pkgs and "localpkg" not in pkgs
    said = " ".join(result.warnings)
    assert "left out of pylock.toml: requests 2.32.3 has no recorded file and hash" in said
    assert "localpkg is an editable install" in said
    with pytest.raises(ExportError, match="editable install|a pylock.toml needs both"):
        export_pylock(prefix, strict=True)


def test_a_wheel_the_mirror_served_is_named_at_pypi() -> None:
    """Matched by the mirror's host: its files may live outside /simple/ (tuna: /packages/...)."""
    from envkit.export import PipIndexes

    indexes = PipIndexes(mirror_pypi="https://pypi.tuna.tsinghua.edu.cn/simple")
    served = "https://pypi.tuna.tsinghua.edu.cn/packages/ab/cd/Foo_Bar-1.0-py3-none-any.whl"
    assert indexes.canonical(served, "Foo_Bar") == "https://pypi.org/simple/foo-bar/"
    other = "https://files.corp.example/foo_bar-1.0-py3-none-any.whl"
    assert indexes.canonical(other, "Foo_Bar") == other  # not the mirror's: kept as it is
    assert PipIndexes().canonical(served, "Foo_Bar") == served  # no mirror: nothing to map
