"""Bounded input reads (safeio) and shape-based redaction of credentials in malformed URLs."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envkit.errors import InputError
from envkit.safeio import load_json_object, load_yaml, loads_yaml, read_text
from envkit.secrets import Vault, redact_patterns

BOMB = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        + "".join(f"{c}: &{c} [{','.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")))


def test_a_yaml_bomb_is_refused_at_once(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yml"
    path.write_text(BOMB)
    assert len(BOMB) < 600
    start = time.perf_counter()
    with pytest.raises(InputError, match="expands to more than"):
        load_yaml(path, "environment file")
    assert time.perf_counter() - start < 1


def test_nesting_and_alias_limits() -> None:
    with pytest.raises(InputError, match="nests deeper than 64"):
        loads_yaml("a: " + "[" * 100 + "]" * 100, "x.yml")
    many = "a: &a 1\nb: [" + ", ".join(["*a"] * 1500) + "]\n"
    with pytest.raises(InputError, match="more than 1000 YAML aliases"):
        loads_yaml(many, "x.yml")
    assert loads_yaml("a: &a [1, 2]\nb: *a\n", "x.yml") == {"a": [1, 2], "b": [1, 2]}


@pytest.mark.parametrize(("content", "why"), [
    (b"name: caf\xe9\n", "not UTF-8 text (byte 0xe9 on line 1)"),
    ("name: x\n".encode("utf-16"), "UTF-16"),
    ("name: x\n".encode("utf-16-le"), "UTF-16"),
    (b"\x00\x01\x02binary", "binary"),
])
def test_text_that_is_not_utf8_is_named(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "f.yml"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        read_text(path, "spec")
    assert why in info.value.message and str(path) in info.value.message and info.value.hint


def test_a_bom_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "f.yml"
    path.write_bytes(b"\xef\xbb\xbfname: x\n")
    assert load_yaml(path) == {"name": "x"}


def test_devices_fifos_folders_and_huge_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge"
    with huge.open("wb") as handle:
        handle.truncate(17 * 1024 * 1024)
    for path, why in ((Path("/dev/zero"), "not a regular file"), (Path("/dev/urandom"), "not a regular file"),
                      (fifo, "not a regular file"), (tmp_path, "is a folder"), (huge, "MiB"),
                      (tmp_path / "nope", "does not exist")):
        start = time.perf_counter()
        with pytest.raises(InputError, match=why):
            read_text(path, "file")
        assert time.perf_counter() - start < 1


def test_json_objects(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    for text, why in (("[1]", "must hold a JSON object"), ("{", "not valid JSON"), ("[" * 100000, "not valid JSON")):
        path.write_text(text)
        with pytest.raises(InputError, match=why):
            load_json_object(path, "metadata file")


@pytest.mark.parametrize(("text", "secret"), [
    ("--mirror 'htps://user:PW1xx@host' is neither", "PW1xx"),
    ("ftp://user:PW2xx@host/x", "PW2xx"),
    ("user:PW3xx@host/x", "PW3xx"),
    ("http:/user:PW4xx@host", "PW4xx"),
    ("'htps://host/t/TK5xx/conda'", "TK5xx"),
    ("htp:/host/t/TK6xx", "TK6xx"),
    ("Authorization: Bearer tk-7xx-secret", "tk-7xx-secret"),
    ("header Bearer tk-8xx-secret sent", "tk-8xx-secret"),
    ("https://h/x?token=TK9xx&a=1", "TK9xx"),
    ("https://ghp_TOKEN10xxxxxxxxxxxxxxxxxx@github.com/x", "ghp_TOKEN10xxxxxxxxxxxxxxxxxx"),
])
def test_credentials_in_malformed_urls_are_redacted_by_shape(text: str, secret: str) -> None:
    assert secret not in redact_patterns(text)


def test_learned_values_cover_what_shape_cannot() -> None:
    vault = Vault()
    vault.learn("http://user:PA SS-11@host/x")
    assert "PA SS-11" not in vault.redact("--mirror 'http://user:PA SS-11@host/x' is not a URL")
    assert "SS-11" not in vault.redact("SS-11@host")


@pytest.mark.parametrize("text", [
    "git+https://github.com/org/repo@v1.0", "pkg @ https://host/x.whl", "pytorch=2.5=cuda*",
    "pkg @ git+ssh://git@github.com/org/repo.git", "git@github.com:org/repo.git",
    "ENVKIT_MIRROR_TOKEN  bearer token sent to the mirror's host", "basic authentication failed",
    "torch 2.13.0 · CUDA 13.0 (cuda130)", "user@example.org",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    vault = Vault()
    vault.learn(text)
    assert vault.redact(text) == text


@pytest.mark.parametrize("text", ["a: " + "[" * 200000, "a:" * 300000, ("a:b" * 100000) + "@x", "x://" * 100000])
def test_redaction_is_linear_on_long_lines(text: str) -> None:
    start = time.perf_counter()
    vault = Vault()
    vault.learn(text)
    vault.redact(text)
    assert time.perf_counter() - start < 2


@pytest.mark.parametrize("text", ["conda activate /scratch/t/envs/x", "/srv/t/work /t/x", "a //x b /t/envs/c"])
def test_a_folder_named_t_is_not_a_token(text: str) -> None:
    vault = Vault()
    for word in (text, *text.split()):
        vault.learn(word)
    assert vault.redact(text) == text
