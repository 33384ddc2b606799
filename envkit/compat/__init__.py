"""Compatibility facts: which driver runs which CUDA, which GPU needs which build, which torch exists.

Owns: data.yaml and legacy.yaml (a source per row), loaded into plain typed objects; the pure
Catalogue model (catalogue); select() (select), which turns a Machine and a Request into a
Selection with its reasons. Pure: computes, never runs a process or reads the network.
May import: the ground floor only (not proc).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from envkit.safeio import load_packaged_yaml

DATA_FILE = Path(__file__).with_name("data.yaml")

CC = tuple[int, int]


def parse_cc(text: str) -> CC:
    """'8.6' or '86' -> (8, 6)."""
    text = text.strip()
    if "." in text:
        major, minor = text.split(".", 1)
        return int(major), int(minor)
    return int(text[:-1]), int(text[-1])


def cc_str(cc: CC) -> str:
    return f"{cc[0]}.{cc[1]}"


def sm(cc: CC) -> str:
    return f"sm_{cc[0]}{cc[1]}"


@dataclass(frozen=True)
class ArchList:
    """The SASS targets of a build plus the arch it also ships as PTX (for newer GPUs)."""

    name: str
    sass: tuple[CC, ...]
    ptx: CC | None
    src: str
    verified: bool

    @classmethod
    def parse(cls, name: str, text: str, src: str, verified: bool) -> ArchList:
        sass: list[CC] = []
        ptx: CC | None = None
        for item in text.split(";"):
            item = item.strip()
            if item.endswith("+PTX"):
                item = item[: -len("+PTX")]
                ptx = parse_cc(item)
            sass.append(parse_cc(item))
        return cls(name, tuple(sass), ptx, src, verified)

    def describe(self) -> str:
        body = ";".join(cc_str(c) for c in self.sass)
        return body + ("+PTX" if self.ptx else "")


@dataclass(frozen=True)
class Build:
    """One GPU variant of a torch release in one flavor (a wheel index, a conda-forge CUDA line...)."""

    flavor: str
    cuda: str  # "13.0"
    label: str  # cu130 | cuda130 | pytorch-cuda=12.4
    archs: ArchList
    python: tuple[str, ...] | None = None  # Pythons this variant is published for (catalogue); None = the release's
    note: str | None = None  # e.g. where an assumed arch list came from

    @property
    def cuda_version(self) -> Version:
        return Version(self.cuda)


@dataclass(frozen=True)
class Release:
    minor: str
    version: str
    torchvision: str | None
    torchaudio: str | None
    python: tuple[str, ...]
    builds: dict[str, tuple[Build, ...]]  # flavor -> GPU builds, oldest CUDA first
    src: tuple[str, ...]
    cpu: bool = True  # a CPU build exists (the catalogue may say it does not)
    cpu_python: tuple[str, ...] | None = None  # Pythons of the CPU build (catalogue); None = the release's

    @property
    def key(self) -> Version:
        return Version(self.version)


@dataclass(frozen=True)
class CompatData:
    sources: dict[str, str]
    driver_cuda: tuple[tuple[str, Version, str], ...]  # (cuda, min driver, src), ascending
    minor_compat_floor: dict[int, Version]
    arch_first_cuda: dict[CC, Version]
    releases: tuple[Release, ...]  # newest first; upstream (pip) versions, builds of every flavor
    by_flavor: dict[str, tuple[Release, ...]] = field(default_factory=dict)  # the same rows, resolved per flavor

    def release(self, minor: str) -> Release | None:
        return next((r for r in self.releases if r.minor == minor), None)

    def releases_for(self, flavor: str) -> tuple[Release, ...]:
        """The rows with version / torchvision / torchaudio / python as that flavor publishes them."""
        return self.by_flavor.get(flavor, self.releases)

    def cuda_for_driver(self, driver: str) -> str | None:
        """Highest CUDA a driver supports, derived from Table 3 (for the /proc and /sys sources)."""
        version = driver_version(driver)
        best = None
        for cuda, minimum, _src in self.driver_cuda:
            if version >= minimum:
                best = cuda
        return best


def driver_version(text: str) -> Version:
    """NVIDIA driver strings ('580.159.04', '570.26') compare as dotted integers."""
    return Version(".".join(str(int(p)) for p in text.strip().split(".")))


@functools.lru_cache(maxsize=1)
def load() -> CompatData:
    raw: dict[str, Any] = load_packaged_yaml(DATA_FILE, "compatibility table")
    sources = raw["sources"]
    lists = {
        name: ArchList.parse(name, row["archs"], row["src"], row.get("status") != "unverified")
        for name, row in raw["arch_lists"].items()
    }
    releases = []
    by_flavor: dict[str, list[Release]] = {"pip": [], "conda-forge": [], "pytorch": []}
    for row in raw["torch"]:
        builds: dict[str, tuple[Build, ...]] = {}
        pip = [Build("pip", f"{k[2:-1]}.{k[-1]}", k, lists[v]) for k, v in (row.get("pip") or {}).items()]
        builds["pip"] = tuple(sorted(pip, key=lambda b: b.cuda_version))
        blocks = {"conda-forge": row.get("conda_forge"), "pytorch": row.get("pytorch_channel")}
        cf = [Build("conda-forge", k, "cuda" + k.replace(".", ""), lists[v])
              for k, v in ((blocks["conda-forge"] or {}).get("cuda") or {}).items()]
        builds["conda-forge"] = tuple(sorted(cf, key=lambda b: b.cuda_version))
        legacy = [Build("pytorch", k, f"pytorch-cuda={k}", lists[v])
                  for k, v in ((blocks["pytorch"] or {}).get("cuda") or {}).items()]
        builds["pytorch"] = tuple(sorted(legacy, key=lambda b: b.cuda_version))
        release = Release(
            minor=row["minor"], version=row["version"], torchvision=row.get("torchvision"),
            torchaudio=row.get("torchaudio"), python=tuple(row["python"]), builds=builds,
            src=tuple(row.get("src") or ()),
        )
        releases.append(release)
        by_flavor["pip"].append(release)
        for flavor, block in blocks.items():
            if block is None:  # never published on that channel: no CPU build either
                by_flavor[flavor].append(replace(release, cpu=False))
                continue
            by_flavor[flavor].append(replace(
                release, version=block.get("version", release.version),
                torchvision=block.get("torchvision", release.torchvision),
                torchaudio=block.get("torchaudio", release.torchaudio),
                python=tuple(block.get("python", release.python)),
                src=release.src + tuple(block.get("src") or ())))
    releases.sort(key=lambda r: r.key, reverse=True)
    return CompatData(
        sources=sources,
        driver_cuda=tuple((r["cuda"], driver_version(r["linux"]), r["src"]) for r in raw["driver_cuda"]),
        minor_compat_floor={int(r["major"]): driver_version(r["linux"]) for r in raw["minor_compat_floor"]},
        arch_first_cuda={parse_cc(r["sm"]): Version(r["cuda"]) for r in raw["arch_first_cuda"]},
        releases=tuple(releases),
        by_flavor={f: tuple(sorted(rs, key=lambda r: r.key, reverse=True)) for f, rs in by_flavor.items()},
    )
