"""The live catalogue: what a channel or wheel index really publishes, merged with the static rules.

Pure (data in, data out): envkit/engines/repodata.py reads repodata and index pages and hands a
`Catalogue` here. The static data (data.yaml) still decides what repodata cannot say -- driver floors,
arch lists per build line, deprecations -- while the catalogue decides what exists: versions,
CUDA variants, Python builds and which torch a torchvision's `depends` accepts.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.compat import ArchList, Build, CompatData, Release
from envkit.compat.builds import UNKNOWN, cuda_of_build, cuda_of_variant

CONDA_NAMES = ("pytorch", "torchvision", "torchaudio", "pytorch-cuda", "cudatoolkit", "cuda-version")
PIP_NAMES = ("torch", "torchvision", "torchaudio")
TORCH_NAMES = ("pytorch", "torch")


@dataclass(frozen=True)
class Record:
    """One published package file, reduced to what selection needs."""

    name: str  # pytorch | torchvision | ... ; pip: torch | torchvision | torchaudio
    version: str  # public version ("2.13.0"; a wheel's +cu130 goes to `build`)
    build: str  # conda build string; pip: the local label (cu130, cpu) or ""
    subdir: str  # linux-64 | noarch; pip: the index variant (cu130, cpu)
    python: str | None = None  # "3.12"; None = any (noarch, py3-none-any)
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class Catalogue:
    """What one flavor's channels (or index) published when envkit last read them."""

    flavor: str
    source: str  # "conda-forge via tuna", "download.pytorch.org/whl"
    urls: tuple[str, ...]  # clean URLs read (no credentials)
    read_at: str  # ISO 8601 UTC
    records: tuple[Record, ...]
    platform: str = "linux-64"
    cached: bool = False  # loaded from envkit's cache rather than read now

    def read_time(self) -> datetime:
        return datetime.fromisoformat(self.read_at.replace("Z", "+00:00"))

    def age_text(self, now: datetime | None = None) -> str:
        seconds = ((now or datetime.now(timezone.utc)) - self.read_time()).total_seconds()
        if seconds < 120:
            return "just now"
        if seconds < 7200:
            return f"{int(seconds // 60)} min old"
        if seconds < 2 * 86400:
            return f"{int(seconds // 3600)} h old"
        return f"{int(seconds // 86400)} days old"

    def describe(self, now: datetime | None = None) -> str:
        """`catalogue: conda-forge via tuna, read 2026-11-30 09:12 UTC` (+ cache age)."""
        when = self.read_time().strftime("%Y-%m-%d %H:%M UTC")
        text = f"catalogue: {self.source}, read {when}"
        if self.cached:
            text += f" (cached, {self.age_text(now)})"
        return text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("cached")
        data["urls"] = list(self.urls)
        data["records"] = [[r.name, r.version, r.build, r.subdir, r.python, list(r.depends)] for r in self.records]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], *, cached: bool = True) -> Catalogue:
        records = tuple(Record(str(n), str(v), str(b), str(s), p, tuple(d)) for n, v, b, s, p, d in data["records"])
        return cls(flavor=data["flavor"], source=data["source"], urls=tuple(data["urls"]), read_at=data["read_at"],
                   records=records, platform=data.get("platform", "linux-64"), cached=cached)

    def named(self, *names: str) -> list[Record]:
        return [r for r in self.records if r.name in names]


def now_iso() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# -- reading records ------------------------------------------------------------------------------
_PY_BUILD = re.compile(r"(?:^|_)py(3)\.?(\d{1,2})(?:_|$)")


def cuda_of(record: Record) -> str | None:
    """The CUDA line of a torch record, 'cpu' for a CPU build, None when it cannot be told."""
    if record.name == "torch":
        wheel = cuda_of_variant(record.build or record.subdir)
        return "cpu" if wheel is None else None if wheel == UNKNOWN else wheel
    cuda = cuda_of_build(record.build)  # the one build-string parser (compat/builds.py)
    if cuda is None:
        return "cpu"
    if cuda != UNKNOWN:
        return cuda
    for dep in record.depends:  # a build string we do not know: its cuda-version pin says it
        name, _, spec = dep.partition(" ")
        if name in ("cuda-version", "pytorch-cuda", "cudatoolkit"):
            floor = re.search(r"(\d+\.\d+)", spec)
            if floor:
                return floor.group(1)
    return None


def python_of(build: str, depends: tuple[str, ...] | list[str]) -> str | None:
    """'3.12' from a build string (py312, py3.12) or a python / python_abi dependency; None = any."""
    match = _PY_BUILD.search(build)
    if match:
        return f"{match.group(1)}.{match.group(2)}"
    for dep in depends:
        name, _, spec = dep.partition(" ")
        if name in ("python_abi", "python"):
            found = re.search(r"3\.(\d{1,2})", spec)
            if found:
                return f"3.{found.group(1)}"
    return None


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def version_matches(spec: str, version: str) -> bool:
    """conda version-spec matching for the shapes torch-family `depends` use: `2.13.*`, `>=2.13,<2.14`,
    `2.5.1`, `2.5.1.*|2.5.2`, `>=2.4.0a0,<2.5.0a0` (conda's MatchSpec version grammar, simplified)."""
    spec = spec.strip()
    if spec in ("", "*"):
        return True
    if "|" in spec:
        return any(version_matches(part, version) for part in spec.split("|"))
    if "," in spec:
        return all(version_matches(part, version) for part in spec.split(","))
    have = _version(version)
    if have is None:
        return False
    match = re.match(r"^(>=|<=|==|!=|>|<|~=|=)?\s*(.+)$", spec)
    if match is None:
        return False
    op, target = match.group(1) or "", match.group(2)
    if target.endswith("*"):
        prefix = target.rstrip("*").rstrip(".")
        parts = prefix.split(".")
        hit = version.split(".")[: len(parts)] == parts
        return not hit if op == "!=" else hit
    if op == "=":  # name=1.2 means 1.2.*
        return version_matches(target + ".*", version) or version_matches(target, version)
    want = _version(target)
    if want is None:
        return False
    return {"": have == want, "==": have == want, "!=": have != want, ">=": have >= want, "<=": have <= want,
            ">": have > want, "<": have < want, "~=": have >= want}[op]


def accepts_torch(record: Record, torch_version: str) -> bool:
    """Does this torchvision/torchaudio record's `depends` accept that pytorch version? (no pin: yes)"""
    pins = [d.partition(" ")[2] for d in record.depends if d.partition(" ")[0] in TORCH_NAMES]
    pins = [p.split(" ")[0] for p in pins if p]
    return all(version_matches(p, torch_version) for p in pins)


# -- merging with the static data --------------------------------------------------------------------
@dataclass(frozen=True)
class Merged:
    """The releases selection iterates (newest first) and why static ones are missing."""

    releases: tuple[Release, ...]
    missing: dict[str, str]  # minor -> why the static data's release is not there
    notes: dict[str, tuple[str, ...]]  # minor -> extra reasons (assumed arch lists, companions)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _label(flavor: str, cuda: str) -> str:
    tag = cuda.replace(".", "")
    return {"conda-forge": f"cuda{tag}", "pytorch": f"pytorch-cuda={cuda}", "pip": f"cu{tag}"}[flavor]


def _archs_for(static: tuple[Release, ...], flavor: str, minor: str, cuda: str) -> tuple[ArchList | None, str | None]:
    """The static arch list of that build line; for a release the static data does not know, the
    same line of the nearest older release (said in the reasons)."""
    exact = next((r for r in static if r.minor == minor), None)
    if exact is not None:
        build = next((b for b in exact.builds.get(flavor, ()) if b.cuda == cuda), None)
        if build is not None:
            return build.archs, None
    wanted = Version(minor)
    for release in sorted(static, key=lambda r: r.key, reverse=True):
        if Version(release.minor) > wanted:
            continue
        build = next((b for b in release.builds.get(flavor, ()) if b.cuda == cuda), None)
        if build is not None:
            return build.archs, (f"the arch list of {build.label} is assumed from torch {release.minor}'s "
                                 f"({build.archs.describe()}): the static data does not list torch {minor} {build.label}")
    return None, None


def _py_sorted(pythons: set[str]) -> tuple[str, ...]:
    return tuple(sorted(pythons, key=lambda p: Version(p.rstrip("t"))))


def merge(data: CompatData, flavor: str, catalogue: Catalogue, pin: str | None = None) -> Merged:
    """Static releases of `flavor` + what the catalogue publishes -> the releases that exist.

    `pin` is an exact torch version (--torch 2.5.0): only that version's files count then."""
    static = data.releases_for(flavor)
    torch_name = "torch" if flavor == "pip" else "pytorch"
    records = [r for r in catalogue.named(torch_name) if r.subdir != "noarch" or flavor == "pip"]
    if flavor != "pip":
        records = [r for r in records if r.subdir == catalogue.platform]
    if pin:
        records = [r for r in records if r.version == pin]
    by_minor: dict[str, list[Record]] = {}
    for record in records:
        if _version(record.version) is None or _version(record.version).is_prerelease:  # type: ignore[union-attr]
            continue
        by_minor.setdefault(_minor(record.version), []).append(record)
    cuda_versions = {r.version for r in catalogue.named("cuda-version")}
    releases: list[Release] = []
    notes: dict[str, tuple[str, ...]] = {}
    missing: dict[str, str] = {}
    where = catalogue.source
    newest_known = max((Version(r.minor) for r in static), default=Version("0"))
    for minor, group in by_minor.items():
        newest = max(group, key=lambda r: Version(r.version)).version
        files = [r for r in group if r.version == newest]
        base = next((r for r in static if r.minor == minor), None)
        if base is None and Version(minor) < newest_known:
            continue  # an old release the static rules do not cover: no arch lists to judge it by
        extra: list[str] = []
        builds: list[Build] = []
        by_cuda: dict[str, set[str | None]] = {}
        for record in files:
            cuda = cuda_of(record)
            if cuda is not None:
                by_cuda.setdefault(cuda, set()).add(record.python)
        cpu_py = by_cuda.pop("cpu", None)
        for cuda in sorted(by_cuda, key=Version):
            if flavor == "conda-forge" and cuda_versions and not any(
                    v == cuda or v.startswith(cuda + ".") for v in cuda_versions):
                extra.append(f"{_label(flavor, cuda)} skipped: {where} has no cuda-version {cuda}")
                continue
            archs, assumed = _archs_for(static, flavor, minor, cuda)
            if archs is None:
                extra.append(f"{_label(flavor, cuda)} skipped: no arch list is known for CUDA {cuda} builds")
                continue
            pythons = by_cuda[cuda]
            builds.append(Build(flavor, cuda, _label(flavor, cuda), archs,
                                python=None if None in pythons else _py_sorted({p for p in pythons if p}),
                                note=assumed))
        all_py = {p for ps in by_cuda.values() for p in ps} | (cpu_py or set())
        if None in all_py or not all_py:
            python = base.python if base else ()
        else:
            python = _py_sorted({p for p in all_py if p})
        tv, tv_note = _companion(catalogue, flavor, "torchvision", newest, base)
        ta, ta_note = _companion(catalogue, flavor, "torchaudio", newest, base)
        extra += [n for n in (tv_note, ta_note) if n]
        if base is None:
            extra.insert(0, f"torch {newest} is newer than the static data knows: found in the catalogue")
        releases.append(Release(
            minor=minor, version=newest, torchvision=tv, torchaudio=ta, python=python,
            builds={flavor: tuple(builds)}, src=base.src if base else (),
            cpu=cpu_py is not None, cpu_python=None if cpu_py is None or None in cpu_py else _py_sorted(
                {p for p in cpu_py if p}),
        ))
        notes[minor] = tuple(extra)
    have = {r.minor for r in releases}
    platform = catalogue.platform if flavor != "pip" else "the index"
    for release in static:
        if release.minor in have or not (release.cpu or release.builds.get(flavor)):
            continue
        what = f"pytorch {release.minor}" if flavor != "pip" else f"torch {release.minor} wheels"
        missing[release.minor] = (f"torch {release.minor} skipped: {where} has no {what} "
                                  f"{'for ' + platform if flavor != 'pip' else 'on ' + platform} yet")
        releases.append(replace(release, builds={flavor: ()}, cpu=False))
    for release in releases:
        gpu = [b for b in release.builds.get(flavor, ())]
        if not gpu and release.minor in have and release.minor not in missing:
            what = "pytorch" if flavor != "pip" else "torch"
            missing[release.minor] = (f"torch {release.minor} skipped: {where} has no {what} {release.minor} "
                                      f"cuda build for {catalogue.platform if flavor != 'pip' else 'any CUDA variant'} yet")
    releases.sort(key=lambda r: r.key, reverse=True)
    return Merged(tuple(releases), missing, notes)


def _pip_companion_minor(name: str, torch_version: str, base: Release | None) -> str | None:
    """Which companion minor pairs with a torch on the PyTorch index: torchvision 0.(minor+15) for
    2.x (vision README table); torchaudio follows torch up to 2.11, whose release serves every later
    torch (pytorch/audio#4212)."""
    known = (base.torchvision if name == "torchvision" else base.torchaudio) if base else None
    if known:
        return _minor(known)
    v = Version(torch_version)
    if name == "torchvision":
        return f"0.{v.minor + 15}" if v.major == 2 else None
    return f"{v.major}.{v.minor}" if (v.major, v.minor) < (2, 11) else "2.11"


def _companion(catalogue: Catalogue, flavor: str, name: str, torch_version: str,
               base: Release | None) -> tuple[str | None, str | None]:
    """The newest torchvision/torchaudio that exists next to this torch, and a note when there is none."""
    records = catalogue.named(name)
    if not records:
        return None, f"{name}: {catalogue.source} publishes no {name}"
    if flavor == "pip":
        minor = _pip_companion_minor(name, torch_version, base)
        fits = [r for r in records if minor and _minor(r.version) == minor]
    else:
        fits = [r for r in records if accepts_torch(r, torch_version)]
    fits = [r for r in fits if _version(r.version) is not None]
    if not fits:
        newest = max(records, key=lambda r: Version(r.version))
        pins = [d for d in newest.depends if d.partition(" ")[0] in TORCH_NAMES]
        why = f" (its newest, {newest.version}, requires {pins[0]})" if pins else ""
        return None, f"{name} skipped: {catalogue.source} has no {name} for torch {torch_version}{why}"
    return max(fits, key=lambda r: Version(r.version)).version, None


def existing_versions(catalogue: Catalogue) -> list[str]:
    """Every torch version the catalogue has files for, oldest first."""
    torch_name = "torch" if catalogue.flavor == "pip" else "pytorch"
    found = {r.version for r in catalogue.named(torch_name) if _version(r.version) is not None}
    return sorted(found, key=Version)
