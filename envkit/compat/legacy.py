"""torch 1.7-1.12 (the cudatoolkit era): pure selection from legacy.yaml, a source per row.

Reached from select.select() through a small hook when a torch request is older than the main
data. Rules, each citing its source:
1. Driver: the highest CUDA line <= the CUDA the driver reports (Table 3; for drivers older than the
   main table, legacy.yaml's driver_cuda). Below CUDA 11 there is no minor version compatibility
   (NVIDIA, minor-version-compatibility.html), so a cu102 build needs driver >= 440.33.
2. Architecture: a GPU runs a build when the build has its SASS, SASS of the same major and a lower
   minor (NVIDIA binary compatibility), or PTX the build's CUDA could JIT for it. No 1.x build has
   sm_89/sm_90 SASS and CUDA <= 11.6 predates sm_90: an H100/H200 cannot run torch 1.12.
3. Python: the release's range (pytorch/vision README).
4. Channel: the pytorch channel pins `cudatoolkit=X.Y` (pytorch-cuda starts with 1.13) and the
   build-string glob `*cuda*` keeps a solver off the CPU build (builder conda/build_pytorch.sh);
   pip wheels are `+cuXYZ` local versions from download.pytorch.org (torch_stable.html up to 1.10,
   the per-variant index from 1.11); conda-forge built only some versions (cf_feedstock).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envkit.compat import CC, ArchList, driver_version, parse_cc, sm
from envkit.errors import SelectionError
from envkit.models import Machine, Request, Selection
from envkit.safeio import load_packaged_yaml

DATA_FILE = Path(__file__).with_name("legacy.yaml")
FIRST_MAIN = Version("1.13")  # data.yaml starts here
PYTORCH_WHL = "https://download.pytorch.org/whl"
FIND_LINKS = f"{PYTORCH_WHL}/torch_stable.html"
FLAVOR_CHANNELS = {"pytorch": ("pytorch", "conda-forge"), "conda-forge": ("conda-forge",), "pip": ("conda-forge",)}


@dataclass(frozen=True)
class LegacyBuild:
    flavor: str
    cuda: str
    label: str  # cudatoolkit=11.6 | cu116 | cuda112
    archs: ArchList

    @property
    def cuda_version(self) -> Version:
        return Version(self.cuda)


@dataclass(frozen=True)
class LegacyRelease:
    version: str
    torchvision: str
    torchaudio: str
    python: tuple[str, ...]
    builds: dict[str, tuple[LegacyBuild, ...]]  # flavor -> builds, oldest CUDA first
    pip_plain: tuple[str, ...]
    pip_index: str  # find_links | extra_index
    torchaudio_local: bool
    src: tuple[str, ...]

    @property
    def key(self) -> Version:
        return Version(self.version)

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])


@dataclass(frozen=True)
class LegacyData:
    sources: dict[str, str]
    driver_cuda: tuple[tuple[str, Version], ...]
    mvc_floor: dict[int, Version]
    arch_first_cuda: dict[CC, Version]
    releases: tuple[LegacyRelease, ...]  # newest first
    deleted_below: Version
    deleted_src: str

    def cuda_for_driver(self, driver: str) -> str | None:
        version = driver_version(driver)
        best = None
        for cuda, minimum in self.driver_cuda:
            if version >= minimum:
                best = cuda
        return best

    def driver_for(self, cuda: str) -> Version | None:
        return next((d for c, d in self.driver_cuda if c == cuda), None)


@functools.lru_cache(maxsize=1)
def load() -> LegacyData:
    raw: dict[str, Any] = load_packaged_yaml(DATA_FILE, "legacy compatibility table")
    lists = {name: ArchList.parse(name, row["archs"], row["src"], row.get("status") != "unverified")
             for name, row in raw["arch_lists"].items()}
    releases = []
    for row in raw["torch"]:
        builds: dict[str, tuple[LegacyBuild, ...]] = {}
        conda = [LegacyBuild("pytorch", k, f"cudatoolkit={k}", lists[v]) for k, v in row["pytorch_channel"].items()]
        pip = [LegacyBuild("pip", f"{k[2:-1]}.{k[-1]}", k, lists[v]) for k, v in row["pip"].items()]
        cf = [LegacyBuild("conda-forge", k, "cuda" + k.replace(".", ""), lists[v])
              for k, v in (row.get("conda_forge") or {}).items()]
        for flavor, rows in (("pytorch", conda), ("pip", pip), ("conda-forge", cf)):
            builds[flavor] = tuple(sorted(rows, key=lambda b: b.cuda_version))
        releases.append(LegacyRelease(
            version=row["version"], torchvision=row["torchvision"], torchaudio=row["torchaudio"],
            python=tuple(row["python"]), builds=builds, pip_plain=tuple(row.get("pip_plain") or ()),
            pip_index=row["pip_index"], torchaudio_local=bool(row["torchaudio_local"]), src=tuple(row["src"])))
    releases.sort(key=lambda r: r.key, reverse=True)
    deleted = next(d for d in raw["deleted"] if d.get("oldest"))
    return LegacyData(
        sources=raw["sources"],
        driver_cuda=tuple((r["cuda"], driver_version(r["linux"])) for r in raw["driver_cuda"]),
        mvc_floor={int(r["major"]): driver_version(r["linux"]) for r in raw["minor_compat_floor"]},
        arch_first_cuda={parse_cc(r["sm"]): Version(r["cuda"]) for r in raw["arch_first_cuda"]},
        releases=tuple(releases), deleted_below=Version(deleted["oldest"]), deleted_src=deleted["src"])


def _spec(text: str) -> SpecifierSet | None:
    text = text.strip()
    try:
        if text[:1].isdigit():
            Version(text)
            return SpecifierSet(f"=={text}.*" if text.count(".") == 1 else f"=={text}")
        return SpecifierSet(text)
    except (InvalidSpecifier, InvalidVersion):
        return None


def matching(text: str | None) -> list[LegacyRelease]:
    """Legacy releases a --torch value (or a file's pin) admits, newest first."""
    if not text:
        return []
    spec = _spec(text)
    if spec is None:
        return []
    return [r for r in load().releases if r.key in spec]


def handles(text: str | None) -> bool:
    """True for a torch request older than the main data (1.13): a 1.x version or a range of them."""
    if not text:
        return False
    if text.strip()[:1].isdigit():
        try:
            return Version(text.strip()) < FIRST_MAIN
        except InvalidVersion:
            return False
    return bool(matching(text))


def versions() -> list[str]:
    return [r.version for r in load().releases]


def covers(archs: ArchList, cuda: Version, cc: CC, data: LegacyData) -> bool:
    """NVIDIA binary compatibility: own SASS, same-major lower-minor SASS, or PTX the build's CUDA knows."""
    if cc in archs.sass or any(a[0] == cc[0] and a[1] < cc[1] for a in archs.sass):
        return True
    first = data.arch_first_cuda.get(cc, Version("0"))
    return archs.ptx is not None and archs.ptx < cc and cuda >= first


def pip_version(release: LegacyRelease, package: str, variant: str) -> str:
    """`1.12.1+cu116`; the plain PyPI version where that variant had no local suffix (prev_versions)."""
    version = {"torch": release.version, "torchvision": release.torchvision,
               "torchaudio": release.torchaudio}[package]
    if variant in release.pip_plain or (package == "torchaudio" and not release.torchaudio_local):
        return version
    return f"{version}+{variant}"


def _cuda_mode(machine: Machine, request: Request, data: LegacyData) -> tuple[str | None, list[str]]:
    """The CUDA ceiling (None = CPU build) and why."""
    if request.cuda == "cpu":
        return None, ["CPU build requested (--cuda cpu)"]
    if request.cuda not in ("auto", ""):
        return request.cuda, [f"CUDA {request.cuda} requested (--cuda {request.cuda})"]
    if machine.cuda_override is not None:
        if not machine.cuda_override:
            return None, ["CONDA_OVERRIDE_CUDA is empty: no CUDA, CPU build"]
        return machine.cuda_override, [f"CONDA_OVERRIDE_CUDA={machine.cuda_override}"]
    drv = machine.driver
    if drv is None:
        return None, ["no NVIDIA driver found: CPU build (plan for a GPU machine with --cuda X.Y)"]
    cuda = drv.cuda or data.cuda_for_driver(drv.version)
    if not cuda:
        return None, [f"driver {drv.version} supports no CUDA envkit knows: CPU build"]
    return cuda, [f"driver {drv.version} reports CUDA {cuda} (source: {drv.source})"]


def _pick(release: LegacyRelease, flavor: str, machine: Machine, ceiling: str, data: LegacyData
          ) -> tuple[LegacyBuild | None, str, list[str]]:
    """(build, failed rule with its detail, reasons) for one release and flavor."""
    builds = release.builds.get(flavor, ())
    covered = list(builds)
    for gpu in machine.gpus:
        cc = parse_cc(gpu.compute_capability)
        keep = [b for b in covered if covers(b.archs, b.cuda_version, cc, data)]
        if not keep:
            lists = "; ".join(f"{b.label}: {b.archs.describe()}" for b in builds)
            return None, (f"architecture: no {flavor} build of torch {release.version} has code for "
                          f"{sm(cc)} ({gpu.name}): {lists} (NVIDIA binary compatibility: a build runs on a GPU "
                          f"only through its SASS of the same major or PTX its CUDA can compile for it)"), []
        covered = keep
    ceiling_v = Version(ceiling)
    below = [b for b in covered if b.cuda_version <= ceiling_v]
    drv = machine.driver.version if machine.driver else None
    if below:
        build = below[-1]
        reasons = [f"CUDA {build.cuda}: the highest {flavor} CUDA line of torch {release.version} "
                   f"that is <= CUDA {ceiling}"]
    else:
        build = covered[0]
        floor = data.mvc_floor.get(build.cuda_version.major)
        if floor is None or Version(ceiling).major != build.cuda_version.major or (
                drv is not None and driver_version(drv) < floor):
            need = data.driver_for(build.cuda)
            via = f" or >= {floor} through minor version compatibility" if floor else ""
            return None, (f"driver: torch {release.version}'s oldest {flavor} build that runs on these GPUs "
                          f"needs CUDA {build.cuda} (driver >= {need}{via}); this driver "
                          f"{drv or '(simulated)'} supports CUDA {ceiling}"), []
        reasons = [f"CUDA {build.cuda}: above the driver's CUDA {ceiling}, runs through NVIDIA minor version "
                   f"compatibility (CUDA 11.x needs driver >= {floor})"]
    for gpu in machine.gpus:
        reasons.append(f"GPU {gpu.index} {gpu.name} (compute capability {gpu.compute_capability}) is covered "
                       f"by {build.label} ({build.archs.describe()})")
    return build, "", reasons


def _python(release: LegacyRelease, requested: str | None) -> tuple[str | None, str]:
    if requested:
        if requested in release.python:
            return requested, f"python {requested} (requested)"
        return None, (f"python: torch {release.version} supports python {release.python[0]}-"
                      f"{release.python[-1]}, not {requested}")
    chosen = release.python[-1]
    return chosen, f"python {chosen} (newest torch {release.version} supports)"


def _specs(release: LegacyRelease, flavor: str, build: LegacyBuild | None, python: str
           ) -> tuple[tuple[str, ...], tuple[str, ...], str | None, str, tuple[str, ...]]:
    """(conda specs, pip specs, pip index, variant, channels)."""
    v = release.version
    if flavor == "pytorch":
        if build is None:
            return (f"pytorch={v}", "cpuonly", f"python={python}"), (), None, "cpu", FLAVOR_CHANNELS[flavor]
        return ((f"pytorch={v}=*cuda*", f"cudatoolkit={build.cuda}", f"python={python}"), (), None, build.label,
                FLAVOR_CHANNELS[flavor])
    if flavor == "conda-forge":
        if build is None:
            return (f"pytorch={v}=cpu*", f"python={python}"), (), None, "cpu", FLAVOR_CHANNELS[flavor]
        return ((f"pytorch={v}=cuda*", f"cudatoolkit={build.cuda}", f"python={python}"), (), None, build.label,
                FLAVOR_CHANNELS[flavor])
    variant = build.label if build else "cpu"
    index = FIND_LINKS if release.pip_index == "find_links" else f"{PYTORCH_WHL}/{variant}"
    return ((f"python={python}", "pip"), (f"torch=={pip_version(release, 'torch', variant)}",), index, variant,
            FLAVOR_CHANNELS[flavor])


def select(machine: Machine, request: Request) -> Selection:
    """The newest legacy release the request admits whose build this machine runs; else why not."""
    data = load()
    wanted = request.torch or ""
    releases = matching(wanted)
    if not releases:
        try:
            below = Version(wanted) < data.deleted_below
        except InvalidVersion:
            below = False
        known = ", ".join(r.version for r in reversed(data.releases))
        why = (f"; the pytorch channel deleted pytorch < {data.deleted_below} "
               f"({data.sources[data.deleted_src].split(' ')[0]})" if below else "")
        raise SelectionError(f"channel: torch {wanted} is not a release envkit knows (1.x: {known}){why}",
                             "pin a known release with --torch, e.g. --torch 1.12")
    flavor = request.flavor
    ceiling, context = _cuda_mode(machine, request, data)
    failures: list[str] = []
    for release in releases:
        python, py_reason = _python(release, request.python)
        if python is None:
            failures.append(py_reason)
            continue
        if not release.builds.get(flavor) and flavor == "pytorch" and release.key < data.deleted_below:
            failures.append(f"channel: torch {release.version} is gone from -c pytorch: the pytorch channel deleted "
                            f"pytorch < {data.deleted_below} ({data.sources[data.deleted_src].split(' ')[0]}); its "
                            "pip wheels remain (--flavor pip)")
            continue
        if not release.builds.get(flavor):
            have = [r.version for r in reversed(data.releases) if r.builds.get(flavor)]
            failures.append(f"channel: torch {release.version} has no {flavor} build"
                            + (f" ({flavor} built {', '.join(have)})" if have else ""))
            continue
        build: LegacyBuild | None = None
        reasons: list[str] = []
        if ceiling is not None:
            build, failed, reasons = _pick(release, flavor, machine, ceiling, data)
            if build is None:
                failures.append(failed)
                continue
        specs, pip_specs, index, variant, channels = _specs(release, flavor, build, python)
        all_reasons = [*context, *reasons, f"torch {release.version}: the newest release matching "
                       f"{wanted!r} that passes every rule (legacy cudatoolkit-era data, "
                       f"sources: {', '.join(release.src)})", py_reason]
        if failures:
            all_reasons.append("newer matches skipped: " + "; ".join(failures))
        if flavor == "pytorch":
            all_reasons.append("legacy pytorch channel: pytorch=V=*cuda* with cudatoolkit=X.Y (pytorch-cuda "
                               "starts with 1.13); conda-forge supplies cudatoolkit 11.x; the channel has deleted "
                               "old files before (pytorch#104754): best effort")
        elif flavor == "pip":
            all_reasons.append(f"pip wheels torch=={pip_specs[0].split('==')[1]} from {index}")
        return Selection(flavor=flavor, torch=release.version, torchvision=release.torchvision,
                         torchaudio=release.torchaudio, cuda=build.cuda if build else None, python=python,
                         variant=variant, specs=specs, channels=channels, pip_specs=pip_specs,
                         pip_index_url=index, reasons=tuple(all_reasons),
                         minor_version_compat=bool(build and ceiling and build.cuda_version > Version(ceiling)))
    binding = failures[0]
    rule = binding.split(":")[0]
    rest = [f for f in failures[1:] if f.split(":")[0] != rule][:2]  # one line per failing rule
    message = f"no {flavor} build of torch {wanted} fits this machine: {binding}"
    if rest:
        message += " (also: " + "; ".join(rest) + ")"
    hint = "pick a version that works here with --torch, or --cuda cpu for a CPU build"
    if rule == "python":
        hint = f"pass --python {releases[0].python[-1]} (torch {releases[0].version} supports " \
               f"{releases[0].python[0]}-{releases[0].python[-1]}), or " + hint
    raise SelectionError(message, hint)

