"""Bounded input reads (safeio): YAML bombs, nesting and alias limits, encodings, file kinds, JSON objects."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envkit.errors import InputError
from envkit.safeio import load_json_object, load_yaml, loads_yaml, read_text

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
    ("name: x\n".encode("utf-16-le"), "UTF-16"),  # no BOM: nothing says which byte order
    ("name: x\n".encode("utf-32"), "UTF-16"),
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


def test_utf16_with_its_bom_is_read_as_windows_powershell_writes_it(tmp_path: Path) -> None:
    """Windows PowerShell 5.1's `conda env export > environment.yml` writes UTF-16LE with a BOM and CRLF
    (GARV-k/T2ICount in tests/fixtures/corpus_fresh); a UTF-8 BOM (theroyallab/tabbyAPI) is read too."""
    from envkit.safeio import read_text

    path = tmp_path / "environment.yml"
    path.write_bytes("name: x\r\ndependencies: [numpy]\r\n".encode("utf-16"))
    assert read_text(path).replace("\r\n", "\n") == "name: x\ndependencies: [numpy]\n"
    path.write_bytes(b"\xef\xbb\xbfname: y\n")
    assert read_text(path) == "name: y\n"


def test_bytes_that_only_start_like_utf16_are_still_refused(tmp_path: Path) -> None:
    """A UTF-16 BOM followed by bytes that decode to CJK noise (a damaged file) is not taken as text."""
    from envkit.safeio import read_text

    path = tmp_path / "environment.yml"
    for junk in (b"\xff\xfe\x00bad", b"\xff\xfe\x00\xd8"):  # noise; an unpaired surrogate
        path.write_bytes(junk)
        with pytest.raises(InputError, match="UTF-16"):
            read_text(path)
