"""envkit.prefix.condarc: conda's config search path, envs_dirs, and ~/.conda/environments.txt as conda keeps it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envkit.prefix.condarc import (CACHE_TAG_SIGNATURE, drop_cache_tag, envs_dirs, environments_txt, register_env,
                            setting, unregister_env)
from envkit.prefix.locations import default_prefix


def test_condarc_env_var_and_priority(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path.home()
    (home / ".condarc").write_text("envs_dirs: [~/from-home]\nchannel_alias: https://low.example\n")
    rc = tmp_path / "team.condarc"
    rc.write_text("envs_dirs:\n  - $TEAM_ROOT/envs\nchannel_alias: https://high.example\n")
    monkeypatch.setenv("TEAM_ROOT", str(tmp_path / "team"))
    monkeypatch.setenv("CONDARC", str(rc))
    assert envs_dirs() == [tmp_path / "team" / "envs", home / "from-home"]  # $CONDARC has the last word
    assert setting("channel_alias") == "https://high.example"
    monkeypatch.setenv("CONDA_ENVS_PATH", f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}")
    assert envs_dirs()[:3] == [tmp_path / "a", tmp_path / "b", tmp_path / "team" / "envs"]
    assert default_prefix("demo") == tmp_path / "a" / "demo"  # where `conda activate demo` finds it


def test_register_and_unregister_keep_other_lines(tmp_path: Path) -> None:
    path = environments_txt()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("/opt/conda/envs/other\n/data/keep me\n")
    prefix = tmp_path / "proj" / "env"
    assert register_env(prefix) and register_env(prefix)  # idempotent
    assert path.read_text().splitlines() == ["/opt/conda/envs/other", "/data/keep me", str(prefix)]
    unregister_env(prefix)
    assert path.read_text().splitlines() == ["/opt/conda/envs/other", "/data/keep me"]
    unregister_env(prefix)  # nothing to do: nothing changes


def test_register_envs_false_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (Path.home() / ".condarc").write_text("register_envs: false\n")
    assert register_env(tmp_path / "x") is False and not environments_txt().exists()


def test_only_rattlers_cache_tag_is_removed(tmp_path: Path) -> None:
    tag = tmp_path / "CACHEDIR.TAG"
    tag.write_text(f"{CACHE_TAG_SIGNATURE}\n# This file is a cache directory tag created by rattler.\n")
    drop_cache_tag(tmp_path)
    assert not tag.exists()
    tag.write_text(f"{CACHE_TAG_SIGNATURE}\n# made by the user's backup policy\n")
    drop_cache_tag(tmp_path)
    assert tag.exists()  # not envkit's (nor rattler's) to delete
