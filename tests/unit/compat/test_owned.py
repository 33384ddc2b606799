"""owned.yaml: what the adapter may change (exact names, each with a source) and what moves with torch."""

from __future__ import annotations

import pytest
import yaml

from envkit.compat import owned


def test_every_row_names_a_source_that_exists() -> None:
    raw = yaml.safe_load(owned.DATA_FILE.read_text())
    sources = set(raw["sources"])
    for group in ("conda", "pip"):
        assert set(raw["owned"][group]["src"]) <= sources
    for row in raw["coupled"]:
        assert row["src"] in sources, row


def test_names_are_exact_never_patterns() -> None:
    table = owned.load()
    names = table.conda_cuda_runtime | table.conda_torch | table.conda_selectors | table.pip_torch
    assert not any(ch in name for name in names for ch in "*?[]^$|")
    # libcups is CUPS and libcurl is curl: a libcu* pattern caught both
    assert {"libcups", "libcurl", "libcurand"} & table.conda_cuda_runtime == {"libcurand"}


@pytest.mark.parametrize(("name", "major"), [("nvidia-cublas-cu12", "12"), ("nvidia_cudnn_cu11", "11"),
                                             ("nvidia-cublas-cu120", None), ("nvidia-cublas", None),
                                             ("nvidia-dali-cuda120", None), ("nvidia-cublas-cu13", None)])
def test_nvidia_wheel_suffix_is_the_cuda_major(name: str, major: str | None) -> None:
    assert owned.load().nvidia_major(name) == major


def test_coupled_packages_and_their_tables() -> None:
    table = owned.load()
    for name in ("triton", "flash_attn", "mamba-ssm", "torch-scatter", "pyg-lib", "dgl", "mmcv", "detectron2"):
        assert table.coupling(name) == "torch", name
    for name in ("cupy", "jaxlib", "tensorflow"):
        assert table.coupling(name) == "cuda", name
    assert table.coupling("numpy") is None
    assert table.triton["2.2"] == "2.2.0" and table.triton["2.8"] == "3.4.0"
    assert "cu121" in table.pyg_pages["2.4"] and "cu121" not in table.pyg_pages["2.6"]
