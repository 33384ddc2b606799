"""`envkit export`: an environment (made by envkit or by conda) -> a file the team can recreate anywhere.

Fixes what `conda env export` users hit (user-pains.md A1-A7): no `prefix:`, no build strings, mirror
URLs mapped back to canonical channels, credentials stripped, pip packages kept (conda's own
`--from-history` drops them), `+cuXYZ` wheels keep their PyTorch index line, VCS installs become
`git+URL@commit`, editable/local installs are left out with a warning (`--strict`: an error).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import ExportError
from envkit.render.envfile import EnvFile
from envkit.render.mirrors import canonical_channel, canonical_urls, strip_credentials

FORMATS = ("yaml", "explicit", "lock")
PYTORCH_INDEX = "https://download.pytorch.org/whl"
_LOCAL_VERSION = re.compile(r"\+(cu\d+|cpu|rocm[\d.]+)$")


@dataclass(frozen=True)
class CondaRecord:
    name: str
    version: str
    build: str
    channel: str  # canonical name or clean URL
    url: str  # clean URL
    subdir: str
    sha256: str | None
    md5: str | None
    files: tuple[str, ...]


@dataclass(frozen=True)
class PipPackage:
    name: str
    version: str
    requirement: str | None  # None: not exportable (editable / local path)
    index: str | None  # --extra-index-url for +cuXYZ wheels
    note: str | None = None


@dataclass(frozen=True)
class Exported:
    text: str
    warnings: tuple[str, ...]


def _clean(url: str) -> str:
    return strip_credentials(url)[0]


def read_records(prefix: Path, config: dict[str, Any] | None = None) -> list[CondaRecord]:
    meta = prefix / "conda-meta"
    if not meta.is_dir():
        raise ExportError(f"{prefix} is not an environment (no conda-meta folder)",
                          "pass an environment name (envkit list) or --prefix of an env")
    out = []
    for path in sorted(meta.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            name, version, build = data["name"], str(data["version"]), str(data["build"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ExportError(f"corrupt conda-meta record {path}: {exc}",
                              f"repair or remove {path.name}, or recreate the env (envkit create NAME --force)") from exc
        raw_channel = str(data.get("channel") or "")
        url = _clean(str(data.get("url") or ""))
        subdir = str(data.get("subdir") or "")
        channel_url = _clean(raw_channel).rstrip("/")
        for sub in (subdir, "noarch", "linux-64"):
            if sub and channel_url.endswith("/" + sub):
                channel_url = channel_url[: -len(sub) - 1]
        if not channel_url and url:
            channel_url = url.rsplit("/", 2)[0]
        channel = canonical_channel(channel_url, config) if channel_url else ""
        files = tuple(str(f) for f in data.get("files") or ())
        out.append(CondaRecord(name, version, build, channel, url, subdir, data.get("sha256"), data.get("md5"), files))
    if not out:
        raise ExportError(f"{prefix} has no packages (empty conda-meta)", "create the environment first")
    return out


def _site_packages(prefix: Path) -> list[Path]:
    return sorted(p for p in prefix.glob("lib/python3*/site-packages") if p.is_dir())


def read_pip(prefix: Path, records: list[CondaRecord]) -> list[PipPackage]:
    """What pip installed and conda did not, from the dist-info records (INSTALLER, direct_url.json)."""
    conda_files = {f for r in records for f in r.files}
    out: list[PipPackage] = []
    for site in _site_packages(prefix):
        rel_site = site.relative_to(prefix).as_posix()
        for dist in sorted(site.glob("*.dist-info")):
            installer = (dist / "INSTALLER").read_text(errors="replace").strip() if (dist / "INSTALLER").exists() else ""
            if installer == "conda" or f"{rel_site}/{dist.name}/METADATA" in conda_files:
                continue
            meta = _metadata(dist / "METADATA")
            name, version = meta.get("Name"), meta.get("Version")
            if not name or not version:
                continue
            out.append(_pip_entry(dist, name, version))
    return sorted(out, key=lambda p: p.name.lower())


def _metadata(path: Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                break
            key, sep, value = line.partition(":")
            if sep and key in ("Name", "Version") and key not in fields:
                fields[key] = value.strip()
    except OSError:
        pass
    return fields


def _pip_entry(dist: Path, name: str, version: str) -> PipPackage:
    direct = dist / "direct_url.json"
    if direct.exists():
        try:
            info = json.loads(direct.read_text())
        except ValueError:
            info = {}
        url = _clean(str(info.get("url", "")))
        if (info.get("dir_info") or {}).get("editable"):
            return PipPackage(name, version, None, None, f"{name} is an editable install ({url})")
        vcs = info.get("vcs_info")
        if vcs:
            return PipPackage(name, version, f"{vcs.get('vcs', 'git')}+{url}@{vcs.get('commit_id')}", None)
        if url.startswith("file://"):
            return PipPackage(name, version, None, None, f"{name} was installed from a local path ({url})")
        if url:
            return PipPackage(name, version, f"{name} @ {url}", None)
    local = _LOCAL_VERSION.search(version)
    index = f"{PYTORCH_INDEX}/{local.group(1)}" if local else None
    return PipPackage(name, version, f"{name}=={version}", index)


def _channel_order(prefix: Path, records: list[CondaRecord], config: dict[str, Any] | None) -> list[str]:
    """The env file's channel order when envkit kept one; otherwise most-used first."""
    counts = Counter(r.channel for r in records if r.channel)
    order: list[str] = []
    kept = prefix / ".envkit" / "environment.yml"
    if kept.is_file():
        import yaml

        try:
            data = yaml.safe_load(kept.read_text()) or {}
            for ch in data.get("channels") or []:
                canon = canonical_channel(str(ch), config)
                if canon in counts and canon not in order:
                    order.append(canon)
        except yaml.YAMLError:
            pass
    order += [c for c, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c not in order]
    return order


def _pip_lines(pips: list[PipPackage], strict: bool) -> tuple[list[str], list[str]]:
    lines: list[str] = []
    warnings: list[str] = []
    for index in sorted({p.index for p in pips if p.index}):
        lines.append(f"--extra-index-url {index}")
    for pkg in pips:
        if pkg.requirement is None:
            if strict:
                raise ExportError(f"{pkg.note}: it cannot be recreated elsewhere",
                                  "install it from an index or a VCS URL, or export without --strict")
            warnings.append(f"left out: {pkg.note}")
            continue
        lines.append(pkg.requirement)
    return lines, warnings


def export_yaml(prefix: Path, *, name: str | None = None, from_history: bool = False, no_pip: bool = False,
                strict: bool = False, config: dict[str, Any] | None = None) -> Exported:
    from envkit.history import requested_specs

    records = read_records(prefix, config)
    warnings: list[str] = []
    by_name = {r.name: r for r in records}
    if from_history:
        asked = requested_specs(prefix)
        if not asked:
            raise ExportError(f"{prefix}/conda-meta/history records no requested specs",
                              "export without --from-history (the full pinned list)")
        deps = []
        for pkg in sorted(asked):
            if pkg.startswith("__"):
                continue
            record = by_name.get(pkg)
            if record is None:
                warnings.append(f"left out {asked[pkg]!r}: requested but not installed")
                continue
            deps.append(f"{pkg}={record.version}")
        used = [by_name[d.split("=")[0]] for d in deps]
    else:
        deps = sorted(f"{r.name}={r.version}" for r in records if not r.name.startswith("__"))
        used = records
    channels = [c for c in _channel_order(prefix, records, config) if any(r.channel == c for r in used)]
    pip: list[str] = []
    if not no_pip:
        pip, pip_warnings = _pip_lines(read_pip(prefix, records), strict)
        warnings += pip_warnings
        if pip and "pip" not in {d.split("=")[0] for d in deps} and "pip" in by_name:
            deps.append(f"pip={by_name['pip'].version}")
            deps.sort()
    variables: tuple[tuple[str, str], ...] = ()
    try:
        state = json.loads((prefix / "conda-meta" / "state").read_text())
        variables = tuple(sorted((str(k), str(v)) for k, v in (state.get("env_vars") or {}).items()))
    except (OSError, ValueError):
        pass
    env_name = name or prefix.name
    envfile = EnvFile(env_name, tuple(channels), tuple(deps), tuple(pip), variables,
                      ("Exported by envkit: portable (no prefix, no build strings, canonical channels).",
                       "Recreate with: envkit create NAME --file THIS_FILE (or conda env create -f THIS_FILE)"))
    return Exported(envfile.render(), tuple(warnings))


def export_explicit(prefix: Path, config: dict[str, Any] | None = None) -> Exported:
    records = read_records(prefix, config)
    subdirs = sorted({r.subdir for r in records if r.subdir and r.subdir != "noarch"}) or ["linux-64"]
    lines = ["# This file may be used to create an environment using:",
             "# $ envkit create NAME --file THIS_FILE   (or: conda create --name NAME --file THIS_FILE)",
             f"# platform: {subdirs[0]}", "# created-by: envkit", "@EXPLICIT"]
    warnings = []
    for r in sorted(records, key=lambda r: r.url):
        if not r.url:
            warnings.append(f"left out {r.name}: its record has no URL")
            continue
        lines.append(r.url + (f"#sha256={r.sha256}" if r.sha256 else (f"#{r.md5}" if r.md5 else "")))
    return Exported("\n".join(lines) + "\n", tuple(warnings))


def export_lock(prefix: Path, config: dict[str, Any] | None = None) -> Exported:
    import tempfile

    from rattler import LockChannel, LockFile, LockPlatform

    from envkit.engines.rattler_engine import read_prefix_records

    records = read_records(prefix, config)  # validates every file first, with a clear error
    prefix_records = read_prefix_records(prefix)
    subdir = next((r.subdir for r in records if r.subdir and r.subdir != "noarch"), "linux-64")
    platform = LockPlatform(subdir)
    lock = LockFile([platform])
    known = canonical_urls()
    channels = _channel_order(prefix, records, config)
    lock.set_channels("default", [LockChannel(known.get(c, c)) for c in channels])  # exact URLs, creds stripped
    for record in prefix_records:
        lock.add_conda_package("default", platform, record)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "envkit.lock"
        lock.to_path(path)
        text = path.read_text(encoding="utf-8")
    from envkit.secrets import redact

    return Exported(redact(text), ())


def export_env(prefix: Path, *, fmt: str = "yaml", **kwargs: Any) -> Exported:
    from envkit.config import load_file_config

    config = load_file_config().data
    if fmt == "yaml":
        return export_yaml(prefix, config=config, **kwargs)
    if fmt == "explicit":
        return export_explicit(prefix, config)
    if fmt == "lock":
        return export_lock(prefix, config)
    raise ExportError(f"unknown format {fmt!r}", f"use one of {', '.join(FORMATS)}")
