"""conda-meta/history written and read back in conda's own format."""

from __future__ import annotations

from pathlib import Path

from envkit.prefix.history import Dist, append, requested_specs, revision_block


def test_history_round_trip(tmp_path: Path) -> None:
    dists = [Dist("https://conda.anaconda.org/conda-forge", "linux-64", "pytorch", "2.13.0", "cuda130_0")]
    append(tmp_path, revision_block(["envkit", "create", "x"], dists, [], ["pytorch=2.13.0=cuda*", "python=3.11"]))
    append(tmp_path, "==> 2026-12-01 00:00:00 <==\n# cmd: conda remove -n x python\n# remove specs: ['python']\n")
    text = (tmp_path / "conda-meta" / "history").read_text()
    assert "+https://conda.anaconda.org/conda-forge/linux-64::pytorch-2.13.0-cuda130_0" in text
    assert requested_specs(tmp_path) == {"pytorch": "pytorch=2.13.0=cuda*"}
