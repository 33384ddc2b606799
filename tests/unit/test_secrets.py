"""Pure helpers: credential splitting and redaction, conda history, mirror URL mapping."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.prefix.history import Dist, append, requested_specs, revision_block
from envkit.render import mirrors
from envkit.secrets import Vault


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


def test_history_round_trip(tmp_path: Path) -> None:
    dists = [Dist("https://conda.anaconda.org/conda-forge", "linux-64", "pytorch", "2.13.0", "cuda130_0")]
    append(tmp_path, revision_block(["envkit", "create", "x"], dists, [], ["pytorch=2.13.0=cuda*", "python=3.11"]))
    append(tmp_path, "==> 2026-12-01 00:00:00 <==\n# cmd: conda remove -n x python\n# remove specs: ['python']\n")
    text = (tmp_path / "conda-meta" / "history").read_text()
    assert "+https://conda.anaconda.org/conda-forge/linux-64::pytorch-2.13.0-cuda130_0" in text
    assert requested_specs(tmp_path) == {"pytorch": "pytorch=2.13.0=cuda*"}


@pytest.mark.parametrize(("url", "channel"), [
    ("https://mirrors.tuna.tsinghua.edu.cn/anaconda/cloud/conda-forge", "conda-forge"),
    ("https://mirrors.ustc.edu.cn/anaconda/pkgs/main/", "main"),
    ("https://conda.anaconda.org/t/tk-1/pytorch", "pytorch"),
    ("https://u:p@artifacts.corp/conda-forge", "conda-forge"),
    ("https://repo.anaconda.com/pkgs/main", "main"),
    ("file:///srv/channels/conda-forge", "file:///srv/channels/conda-forge"),
    ("https://my.host/custom-channel", "https://my.host/custom-channel"),
])
def test_mirror_urls_map_back_to_canonical_channels(url: str, channel: str) -> None:
    assert mirrors.canonical_channel(url) == channel


def test_every_builtin_profile_has_the_documented_shape() -> None:
    for name in mirrors.builtin_names():
        profile = mirrors.resolve(name)
        assert profile is not None and profile.pypi and profile.pypi.startswith("https://")
        assert {"conda-forge", "pytorch", "main"} <= set(profile.conda)
        assert "nvidia" in profile.missing and profile.src
        assert all(u.startswith("https://") and not u.endswith("/") for u in profile.conda.values())
