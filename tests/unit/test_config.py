"""The config file: unknown keys and wrong types name the file and line; each setting's origin; `config set`."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_cli

from envkit.config import effective_settings, get_setting, load_file_config, set_setting
from envkit.errors import UsageError


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.yaml"
    monkeypatch.setenv("ENVKIT_CONFIG", str(path))
    return path


def test_a_typo_in_a_key_is_an_error_with_the_line_and_the_key_it_meant(config: Path) -> None:
    config.write_text("# my settings\ncuda: '12.4'\nmirrror: tuna\n")
    with pytest.raises(UsageError) as caught:
        load_file_config()
    assert f"{config}:3: unknown key 'mirrror' (did you mean 'mirror'?)" in caught.value.message
    assert "rename it to 'mirror:'" in (caught.value.hint or "")


def test_a_wrong_type_names_the_line_too(config: Path) -> None:
    config.write_text("flavor: pip\n\nsharded_repodata: 'yes'\n")
    with pytest.raises(UsageError) as caught:
        load_file_config()
    assert f"{config}:3: sharded_repodata: must be true or false" in caught.value.message


def test_every_known_key_loads(config: Path) -> None:
    config.write_text("cuda: 12.4\ntorch: '2.5'\nflavor: pytorch\nmirror: tuna\nengine: conda\n"
                      "pytorch_index: https://mirror.corp/whl\nsharded_repodata: false\n"
                      "mirrors:\n  corp:\n    conda: {conda-forge: https://a/cf}\n")
    assert load_file_config().get("cuda") == "12.4" and load_file_config().get("mirrors")["corp"]


def test_each_setting_says_where_it_came_from(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config.write_text("flavor: pytorch\nmirror: tuna\nengine: conda\n")
    monkeypatch.setenv("ENVKIT_MIRROR", "ustc")
    got = {s.key: s for s in effective_settings({"engine": "mamba"})}
    assert (got["engine"].value, got["engine"].origin) == ("mamba", "flag --engine")
    assert (got["mirror"].value, got["mirror"].origin) == ("ustc", "environment ENVKIT_MIRROR")
    assert (got["flavor"].value, got["flavor"].origin) == ("pytorch", f"config file {config}:1")
    assert (got["cuda"].value, got["cuda"].origin) == ("auto", "default")
    assert got["config_file"].value == str(config) and got["config_file"].origin == "environment ENVKIT_CONFIG"
    with pytest.raises(UsageError, match="unknown key 'flavour'"):
        get_setting("flavour")


def test_set_replaces_the_line_keeps_comments_and_writes_nothing_invalid(config: Path) -> None:
    config.write_text("# team defaults\nmirror: tuna\nmirrors:\n  corp:\n    conda: {conda-forge: https://a/cf}\n")
    set_setting("mirror", "corp")
    set_setting("cuda", "12.4")
    text = config.read_text()
    assert text.startswith("# team defaults\nmirror: corp\nmirrors:\n") and text.endswith("cuda: '12.4'\n")
    assert load_file_config().get("cuda") == "12.4"
    before = config.read_text()
    for key, value, words in (("engine", "nope", "engine: must be"), ("mirrror", "x", "unknown key"),
                              ("sharded_repodata", "maybe", "true or false"), ("mirrors", "x", "mapping")):
        with pytest.raises(UsageError, match=words):
            set_setting(key, value)
    assert config.read_text() == before


def test_the_config_verbs_on_the_command_line(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = run_cli(capsys, "config", "path")
    assert code == 0 and out.strip() == str(config)
    code, out, err = run_cli(capsys, "config", "set", "mirror", "tuna")
    assert code == 0 and "written to" in out, err
    code, out, _err = run_cli(capsys, "config", "get", "mirror")
    assert code == 0 and out.strip() == "tuna"
    code, out, _err = run_cli(capsys, "config", "show", "--json")
    assert code == 0 and '"origin": "config file' in out
    config.write_text("mirrror: tuna\n")
    code, _out, err = run_cli(capsys, "render", "minimal", "--cuda", "cpu")
    assert code == 2 and f"{config}:1: unknown key 'mirrror'" in err
