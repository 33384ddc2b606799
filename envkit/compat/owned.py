"""What an adapted environment.yml may change (owned) and what must move with torch and CUDA
(coupled): owned.yaml, a source per entry. Pure data; the rules live in envkit/render/adapt.py."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.safeio import load_packaged_yaml

DATA_FILE = Path(__file__).with_name("owned.yaml")


@dataclass(frozen=True)
class Owned:
    conda_torch: frozenset[str]
    conda_selectors: frozenset[str]
    conda_cuda_runtime: frozenset[str]
    pip_torch: frozenset[str]
    nvidia_libs: frozenset[str]
    nvidia_suffixes: dict[str, str]  # 'cu12' -> '12'
    index_hosts: tuple[str, ...]
    coupled: dict[str, str]  # normalised name -> 'torch' | 'cuda'
    coupled_src: dict[str, str]  # normalised name -> source key
    triton: dict[str, str]  # torch minor -> triton version
    pyg_pages: dict[str, tuple[str, ...]]  # torch minor -> variants with a data.pyg.org page
    sources: dict[str, str]

    def nvidia_major(self, name: str) -> str | None:
        """'nvidia-cublas-cu12' -> '12'; None for a name outside NVIDIA's suffixed runtime wheels."""
        match = re.fullmatch(r"nvidia-([a-z0-9-]+?)-(cu[0-9]+)", normalise(name))
        if not match or match.group(1) not in self.nvidia_libs:
            return None
        return self.nvidia_suffixes.get(match.group(2))

    def coupling(self, name: str) -> str | None:
        return self.coupled.get(normalise(name))


def normalise(name: str) -> str:
    """PEP 503 name normalisation (pip and conda names compared alike)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(raw: Any) -> frozenset[str]:
    return frozenset(normalise(str(n)) for n in raw or [])


@functools.cache
def load() -> Owned:
    raw = load_packaged_yaml(DATA_FILE, "owned-packages table")
    conda, pip = raw["owned"]["conda"], raw["owned"]["pip"]
    coupled: dict[str, str] = {}
    coupled_src: dict[str, str] = {}
    for row in raw["coupled"]:
        for name in row["names"]:
            coupled[normalise(name)] = str(row["kind"])
            coupled_src[normalise(name)] = str(row["src"])
    return Owned(conda_torch=_names(conda["torch"]), conda_selectors=_names(conda["cuda_selectors"]),
                 conda_cuda_runtime=_names(conda["cuda_runtime"]), pip_torch=_names(pip["torch"]),
                 nvidia_libs=_names(pip["nvidia_libs"]),
                 nvidia_suffixes={str(k): str(v) for k, v in pip["nvidia_suffixes"].items()},
                 index_hosts=tuple(str(h) for h in pip["index_hosts"]), coupled=coupled, coupled_src=coupled_src,
                 triton={str(k): str(v) for k, v in raw["triton"].items()},
                 pyg_pages={str(k): tuple(str(x) for x in v) for k, v in raw["pyg_pages"]["pages"].items()},
                 sources={str(k): str(v) for k, v in raw["sources"].items()})
