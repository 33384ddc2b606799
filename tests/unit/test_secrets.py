"""The one redactor: credentials split out of URLs and put back only at request time, malformed URLs redacted
by shape, learned values, and ordinary text left alone (in linear time)."""

from __future__ import annotations

import time

import pytest

from envkit.secrets import Vault, redact_patterns


def test_basic_auth_becomes_a_header_and_is_redacted() -> None:
    vault = Vault()
    clean = vault.split("https://bob:p%40ss@mirror.corp/conda/conda-forge")
    assert clean == "https://mirror.corp/conda/conda-forge"
    assert vault.headers_for("mirror.corp") == {"Authorization": "Basic Ym9iOnBAc3M="}
    assert vault.redact("GET https://mirror.corp failed for p@ss") == "GET https://mirror.corp failed for ********"
    assert vault.with_credentials("https://mirror.corp/pypi/simple") == "https://bob:p%40ss@mirror.corp/pypi/simple"


def test_token_paths_are_put_back_only_at_request_time() -> None:
    vault = Vault()
    clean = vault.split("https://conda.example/t/tk-XYZ/base")
    assert clean == "https://conda.example/base"
    assert vault.with_token("https://conda.example/base/conda-forge") == "https://conda.example/t/tk-XYZ/base/conda-forge"
    assert "tk-XYZ" not in vault.redact("failed https://conda.example/t/tk-XYZ/base/x.conda")
    assert vault.redact("https://u:p@h/x") == "https://h/x"  # unknown userinfo is dropped too


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
