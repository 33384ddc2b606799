"""Mirror profiles: mirror URLs map back to canonical channels, and every built-in profile has the documented shape."""

from __future__ import annotations

import pytest

from envkit.render import mirrors


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
