"""doctor's facts: one read of an environment (records, pip dists, kept envkit files, state vars).

Every metadata file is read through envkit/prefix/records.py, leniently: a broken record or file is a
fact (`Facts.errors`, an empty mapping) for a check to report, never an exception. torch is never
imported: which copies are installed and which one `import torch` loads come from the records, the
dist-info folders and torch/version.py, read as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.compat.builds import CUDA_PINS, UNKNOWN, cuda_of_build, cuda_of_pins, cuda_of_wheel
from envkit.prefix.records import (CONDA_META, CREATE_FILE, META_DIR, VERIFY_FILE, Typed, read_meta_quiet,
                                   read_text_quiet, scan_records, state_vars_quiet)
from envkit.render.mirrors import canonical_channel, strip_credentials

_REQ_PIN = re.compile(r"^\s*(nvidia-[A-Za-z0-9_.-]+)\s*==\s*([0-9][0-9A-Za-z.+]*)")


@dataclass(frozen=True)
class Record:
    """A conda-meta record, reduced to what the checks need."""

    name: str
    version: str
    build: str
    channel: str  # canonical name (conda-forge, main, ...) or a clean URL
    depends: tuple[str, ...]
    paths: tuple[tuple[str, int | None, str], ...]  # (relative path, size or None, path_type)
    # (relative path, the sha256 the file must have in this env, a prefix-rewritten text file): conda's
    # sha256_in_prefix where the file was rewritten at link time, else the package's sha256 (conda doctor's test)
    digests: tuple[tuple[str, str, bool], ...] = ()


@dataclass(frozen=True)
class PipDist:
    """A dist-info folder that pip (not conda) installed."""

    name: str
    version: str
    path: Path
    requires: tuple[str, ...]


@dataclass(frozen=True)
class TorchCopy:
    """One installed torch: from a conda record or a pip dist-info."""

    source: str  # conda | pip
    version: str
    cuda: str | None  # "13.0"; None = CPU build; "?" = unknown
    detail: str  # build string / dist-info folder
    flavor: str  # conda-forge | pytorch | pip (envkit's flavor names, for the fix)


@dataclass
class Facts:
    prefix: Path
    records: list[Record] = field(default_factory=list)
    pip: list[PipDist] = field(default_factory=list)
    site: Path | None = None
    python: str | None = None  # X.Y
    created: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)
    state_vars: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


_read = read_text_quiet  # bounded (safeio): a FIFO, device or huge file in an env reads as OSError


def _channel(data: Typed) -> str:
    """The record's channel as export.read_records names it (canonical name or clean URL)."""
    raw = strip_credentials(data.text("channel"))[0].rstrip("/")
    subdir = data.text("subdir")
    for sub in (subdir, "noarch", "linux-64"):
        if sub and raw.endswith("/" + sub):
            raw = raw[: -len(sub) - 1]
    url = data.text("url")
    if not raw and url:
        raw = strip_credentials(url)[0].rsplit("/", 2)[0]
    return canonical_channel(raw) if raw else ""


def _record(data: Typed) -> Record:
    """One record through the typed reader: a field of the wrong type reads empty and lands in data.problems."""
    paths: list[tuple[str, int | None, str]] = []
    digests: list[tuple[str, str, bool]] = []
    entries = data.mapping("paths_data").objects("paths")
    if entries:
        for entry in entries:
            rel = entry.text("_path")
            placeholder = bool(entry.data.get("prefix_placeholder"))
            # a text file whose prefix placeholder was rewritten changes size: its sha256_in_prefix says what it is
            size = None if placeholder else entry.integer("size_in_bytes")
            ptype = entry.text("path_type") or "hardlink"
            paths.append((rel, size, ptype))
            digest = entry.optional_text("sha256_in_prefix") or (None if placeholder else entry.optional_text("sha256"))
            if digest and ptype not in ("softlink", "directory", "pyc_file") and re.fullmatch(r"[0-9a-f]{64}", digest):
                digests.append((rel, digest, placeholder and entry.text("file_mode") != "binary"))
    else:
        paths = [(f, None, "hardlink") for f in data.texts("files")]
    return Record(data.text("name"), data.text("version"), data.text("build"), _channel(data),
                  data.texts("depends"), tuple(paths), tuple(digests))


def _machine_shape(data: Typed) -> dict[str, Any]:
    """A machine as create.json / verify.json keep it (Machine.to_json), each field of its own type."""
    out = dict(data.data)
    if "driver" in data.data:
        driver = data.mapping("driver")
        out["driver"] = ({**driver.data, "version": driver.optional_text("version"),
                          "cuda": driver.optional_text("cuda")} if driver else None)
    if "gpus" in data.data:
        out["gpus"] = [{**g.data, "compute_capability": g.optional_text("compute_capability")}
                       for g in data.objects("gpus")]
    return out


def _texts_of(data: Typed, keys: Sequence[str]) -> dict[str, Any]:
    return {key: data.optional_text(key) for key in keys if key in data.data}


def _created_shape(data: Typed) -> dict[str, Any]:
    """.envkit/create.json with the fields the checks read in their types (the rest kept as it is)."""
    out = {**data.data, **_texts_of(data, ("file", "spec", "cuda_override"))}
    if "machine" in data.data:
        out["machine"] = _machine_shape(data.mapping("machine"))
    if "selection" in data.data:
        selection = data.mapping("selection")
        out["selection"] = {**selection.data, **_texts_of(selection, ("torch", "python", "flavor", "cuda", "variant"))}
    return out


def _verify_shape(data: Typed) -> dict[str, Any]:
    out = {**data.data, **_texts_of(data, ("outcome", "time", "summary"))}
    if "machine" in data.data:
        out["machine"] = _machine_shape(data.mapping("machine"))
    if "cuda" in data.data:
        cuda = data.mapping("cuda")
        out["cuda"] = {**cuda.data, **_texts_of(cuda, ("version",))}
    return out


def _metadata(path: Path) -> tuple[str | None, str | None, tuple[str, ...]]:
    name = version = None
    requires: list[str] = []
    try:
        lines = _read(path).splitlines()
    except OSError:
        lines = []
    for line in lines:
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if not sep:
            continue
        if key == "Name" and name is None:
            name = value.strip()
        elif key == "Version" and version is None:
            version = value.strip()
        elif key == "Requires-Dist":
            requires.append(value.strip())
    return name, version, tuple(requires)


def gather(prefix: Path) -> Facts:
    """Read everything the checks need, once: records, pip dists, kept envkit files, state vars."""
    facts = Facts(prefix)
    for path, data in scan_records(prefix):
        if not data.get("name"):
            facts.errors.append(f"{CONDA_META}/{path.name} is not a readable record")
            continue
        facts.records.append(_record(Typed(data, f"{CONDA_META}/{path.name}", facts.errors)))
    py = next((r for r in facts.records if r.name == "python"), None)
    sites = sorted(p for p in prefix.glob("lib/python3*/site-packages") if p.is_dir())
    if py is not None:
        facts.python = ".".join(py.version.split(".")[:2])
        wanted = prefix / "lib" / f"python{facts.python}" / "site-packages"
        facts.site = wanted if wanted.is_dir() else (sites[0] if sites else None)
    elif sites:
        facts.site = sites[-1]
        facts.python = facts.site.parent.name.replace("python", "")
    if facts.site is not None:
        rel_site = facts.site.relative_to(prefix).as_posix()
        conda_files = {p for r in facts.records for p, _s, _t in r.paths}
        for dist in sorted(facts.site.glob("*.dist-info")):
            if f"{rel_site}/{dist.name}/METADATA" in conda_files:
                continue
            try:
                installer = _read(dist / "INSTALLER").strip()
            except OSError:
                installer = ""
            if installer == "conda":
                continue
            name, version, requires = _metadata(dist / "METADATA")
            if name and version:
                facts.pip.append(PipDist(name, version, dist, requires))
    facts.created = _created_shape(Typed(read_meta_quiet(prefix, CREATE_FILE), f"{META_DIR}/{CREATE_FILE}",
                                         facts.errors))
    facts.verify = _verify_shape(Typed(read_meta_quiet(prefix, VERIFY_FILE), f"{META_DIR}/{VERIFY_FILE}",
                                       facts.errors))
    facts.state_vars = state_vars_quiet(prefix)
    return facts


# -- torch: which copies, which one `import torch` loads ---------------------------------------------
def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def version_py(site: Path) -> tuple[str | None, str | None] | None:
    """torch/version.py: (__version__, cuda) as torch itself reports them, read as text."""
    try:
        text = _read(site / "torch" / "version.py")
    except OSError:
        return None
    version = re.search(r"^__version__\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(?:['\"]([^'\"]+)['\"]|None)", text, re.M)
    return (version.group(1) if version else None, cuda.group(1) if cuda and cuda.group(1) else None)


def _flavor_of(record: Record) -> str:
    return "pytorch" if record.channel == "pytorch" else "conda-forge"


def torch_copies(facts: Facts) -> list[TorchCopy]:
    copies: list[TorchCopy] = []
    for r in facts.records:
        if r.name == "pytorch":
            cuda = cuda_of_build(r.build)
            if cuda == UNKNOWN:  # a build string that names no variant: the env's cuda-version / pytorch-cuda say it
                cuda = cuda_of_pins({x.name: x.version for x in facts.records if x.name in CUDA_PINS}) or UNKNOWN
            copies.append(TorchCopy("conda", r.version, cuda, r.build, _flavor_of(r)))
    for d in facts.pip:
        if norm(d.name) == "torch":
            cuda = cuda_of_wheel(d.version)
            if cuda == UNKNOWN:
                pins = dict(nvidia_pins(d))
                runtime = next((v for k, v in pins.items() if k.startswith("nvidia-cuda-runtime")), None)
                cuda = ".".join(runtime.split(".")[:2]) if runtime else UNKNOWN
            copies.append(TorchCopy("pip", d.version, cuda, d.path.name, "pip"))
    return copies


def importable(facts: Facts, copies: Sequence[TorchCopy]) -> tuple[TorchCopy | None, str]:
    """Which copy `import torch` loads: the one owning site-packages/torch (RECORD / record files)."""
    if not copies:
        return None, ""
    if facts.site is None or not (facts.site / "torch" / "__init__.py").exists():
        return None, "no site-packages/torch/__init__.py in the env"
    vp = version_py(facts.site)
    for d in facts.pip:
        if norm(d.name) == "torch":
            try:
                record = _read(d.path / "RECORD")
            except OSError:
                record = ""
            if re.search(r"^torch/__init__\.py,", record, re.M):
                copy = next(c for c in copies if c.source == "pip" and c.detail == d.path.name)
                return _with_version_py(copy, vp), f"site-packages/torch belongs to pip's {d.path.name}"
    rel = f"{facts.site.relative_to(facts.prefix).as_posix()}/torch/__init__.py"
    for r in facts.records:
        if r.name == "pytorch" and any(p == rel for p, _s, _t in r.paths):
            copy = next(c for c in copies if c.source == "conda")
            return _with_version_py(copy, vp), f"site-packages/torch belongs to conda's pytorch {r.build}"
    return _with_version_py(copies[-1], vp), "site-packages/torch has no owner record"


def _with_version_py(copy: TorchCopy, vp: tuple[str | None, str | None] | None) -> TorchCopy:
    if vp is None or vp[0] is None:
        return copy
    return TorchCopy(copy.source, copy.version, vp[1], copy.detail, copy.flavor)


def nvidia_pins(dist: PipDist) -> list[tuple[str, str]]:
    out = []
    for req in dist.requires:
        match = _REQ_PIN.match(req)
        if match:
            out.append((norm(match.group(1)), match.group(2)))
    return out
