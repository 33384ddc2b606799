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
from urllib.parse import urlsplit

from envkit.compat.builds import marks_cuda
from envkit.config import load_file_config
from envkit.errors import ExportError, InputError, MirrorError
from envkit.lock.file import PYPI_SIMPLE, Lock, LockedConda, LockedPlatform, LockedPypi, render_lock
from envkit.prefix import records as prefix_records
from envkit.prefix.history import requested_specs
from envkit.render.envfile import EnvFile, check_pip_line, check_variables, for_conda_lock
from envkit.render.mirrors import Mirror, canonical_channel, canonical_urls, is_public_pypi, strip_credentials
from envkit.safeio import load_json, load_yaml, read_bytes, read_text
from envkit.secrets import redact

FORMATS = ("yaml", "explicit", "lock", "pylock")
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
    sidecar: str | None = None  # explicit format: pip section + variables (YAML), written next to the file


# A build string that marks a CUDA variant (compat/builds.py `marks_cuda`): conda-forge
# `cuda130_generic_py311_h..._200`, the legacy pytorch channel `py3.11_cuda12.4_cudnn9.1.0_0`,
# `pytorch-mutex 1.0 cuda`. The export keeps a `*cuda*` build selector for them (conda MatchSpec globs,
# conda docs "Package match specifications"), so a solver that sees no __cuda fails loudly instead of
# quietly choosing the CPU build.
CUDA_SELECTOR = "*cuda*"


def is_cuda_variant(record: CondaRecord) -> bool:
    return marks_cuda(record.build) and not record.name.startswith("cuda-")


def pinned(record: CondaRecord) -> str:
    """`name=version`, plus the portable `=*cuda*` build selector for a CUDA variant."""
    base = f"{record.name}={record.version}"
    return f"{base}={CUDA_SELECTOR}" if is_cuda_variant(record) else base


def read_variables(prefix: Path) -> tuple[tuple[str, str], ...]:
    """`variables:` as conda keeps them (conda-meta/state env_vars); a hostile state file is a clear error (safeio)."""
    return tuple(sorted(prefix_records.state_vars(prefix).items()))


def _clean(url: str) -> str:
    return strip_credentials(url)[0]


def read_records(prefix: Path, config: dict[str, Any] | None = None) -> list[CondaRecord]:
    if not prefix_records.has_conda_meta(prefix):
        raise ExportError(f"{prefix} is not an environment (no conda-meta folder)",
                          "pass an environment name (envkit list) or --prefix of an env")
    out = []
    for path in prefix_records.record_paths(prefix):
        try:
            data = prefix_records.load_record(path)
            name, version, build = data["name"], data["version"], data["build"]
            for field, value in (("name", name), ("version", version), ("build", build)):
                # conda writes these as strings (a bare number is a version YAML/JSON tools sometimes leave)
                if not isinstance(value, (str, int, float)) or isinstance(value, bool) or value == "":
                    raise ValueError(f"its {field} is {type(value).__name__} {str(value)[:40]!r}, not a string")
            name, version, build = str(name), str(version), str(build)
        except InputError:
            raise  # not a regular file, too big, not text, not JSON: named by safeio
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
            installer = _small_text(dist / "INSTALLER").strip() if (dist / "INSTALLER").exists() else ""
            if installer == "conda" or f"{rel_site}/{dist.name}/METADATA" in conda_files:
                continue
            meta = _metadata(dist / "METADATA")
            name, version = meta.get("Name"), meta.get("Version")
            if not name or not version:
                continue
            out.append(_pip_entry(dist, name, version))
    return sorted(out, key=lambda p: p.name.lower())


def _small_text(path: Path) -> str:
    """A dist-info file, bounded (safeio): a FIFO or device planted in an env reads as empty."""
    try:
        return read_bytes(path, "file", 1 << 20).decode("utf-8", "replace")
    except InputError:
        return ""


def _metadata(path: Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        for line in _small_text(path).splitlines():
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
            info = load_json(direct, "pip metadata file", limit=1024 * 1024)
        except InputError:
            info = {}
        info = info if isinstance(info, dict) else {}
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


@dataclass(frozen=True)
class PipIndexes:
    """The pip indexes an env was made with, as its kept environment.yml names them (credentials stripped),
    less the --mirror's PyPI: that is the mirror standing in for PyPI, applied again at install time."""

    index_url: str | None = None  # a private --index-url: stays --index-url in the export
    extra: tuple[str, ...] = ()
    mirror_pypi: str | None = None  # the create's --mirror PyPI index (never exported)

    def lines(self) -> list[str]:
        return ([f"--index-url {self.index_url}"] if self.index_url else []) + [
            f"--extra-index-url {url}" for url in self.extra]

    def canonical(self, url: str, name: str) -> str:
        """A wheel URL the create's mirror served -> PyPI's project page (pip installs `name==version` from
        it, with the sha256 kept, so another mirror or PyPI itself serves the same file). Matched by host:
        a mirror's files need not sit under its /simple/ (tuna serves them from /packages/)."""
        if self.mirror_pypi and "://" in url and urlsplit(url).netloc == urlsplit(self.mirror_pypi).netloc:
            return f"{PYPI_SIMPLE}/{_normalize(name)}/"
        return url


def _normalize(name: str) -> str:
    """PEP 503 project name normalization (the simple index's page name)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def env_pip_indexes(prefix: Path, config: dict[str, Any] | None = None) -> PipIndexes:
    """The env's own pip index lines (kept environment.yml) and the PyPI of the mirror it was made through
    (create.json `mirror`). An env made by conda has neither: PyPI (pip's default) is assumed."""
    from envkit.engines.pip import index_options
    from envkit.render.mirrors import resolve

    mirror_pypi = None
    selected: set[str] = set()  # the selection's PyTorch index (maybe a mirror of it): +cuXYZ wheels name it
    try:
        made = prefix_records.read_meta(prefix, prefix_records.CREATE_FILE) if prefix_records.made_by_envkit(
            prefix) else {}
        made = made if isinstance(made, dict) else {}
        chosen = made.get("selection")
        selection: dict[str, Any] = chosen if isinstance(chosen, dict) else {}
        if selection.get("pip_index_url"):
            selected.add(_clean(str(selection["pip_index_url"])).rstrip("/"))
        mirror = resolve(str(made["mirror"]), config) if made.get("mirror") else None
        mirror_pypi = _clean(mirror.pypi) if mirror is not None and mirror.pypi else None
    except (InputError, MirrorError):  # unreadable create.json, or a profile the config no longer has
        mirror_pypi = None
    lines: list[str] = []
    try:
        data = prefix_records.read_kept_env_file(prefix)
        for dep in (data.get("dependencies") or []) if isinstance(data, dict) else []:
            if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
                lines += [str(line) for line in dep["pip"]]
    except InputError:
        lines = []
    index_url, extra = None, []
    for option, raw in index_options(lines):
        url = strip_credentials(raw)[0]  # the kept file has none; an older one might
        if mirror_pypi and url.rstrip("/") == mirror_pypi.rstrip("/"):
            continue  # the mirror's PyPI: PyPI in the export
        if url.rstrip("/") == PYPI_SIMPLE or url.rstrip("/") in selected:
            continue  # pip's default; the PyTorch index (written canonically for the +cuXYZ wheels)
        if option == "--index-url":
            index_url = url
        elif url not in extra:
            extra.append(url)
    return PipIndexes(index_url, tuple(extra), mirror_pypi)


def _channel_order(prefix: Path, records: list[CondaRecord], config: dict[str, Any] | None) -> list[str]:
    """The env file's channel order when envkit kept one; otherwise most-used first."""
    counts = Counter(r.channel for r in records if r.channel)
    order: list[str] = []
    try:
        data = prefix_records.read_kept_env_file(prefix)
        if data is not None:
            for ch in (data.get("channels") or [] if isinstance(data, dict) else []):
                canon = canonical_channel(str(ch), config)
                if canon in counts and canon not in order:
                    order.append(canon)
    except InputError:
        pass
    order += [c for c, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if c not in order]
    return order


def _recreatable(pips: list[PipPackage], strict: bool, warnings: list[str]) -> list[PipPackage]:
    """The pip packages another machine can install; the rest fail --strict or become warnings."""
    kept: list[PipPackage] = []
    for pkg in pips:
        if pkg.requirement is None:
            if strict:
                raise ExportError(f"{pkg.note}: it cannot be recreated elsewhere",
                                  "install it from an index or a VCS URL, or export without --strict")
            warnings.append(f"left out: {pkg.note}")
            continue
        kept.append(pkg)
    return kept


def _pip_lines(pips: list[PipPackage], strict: bool,
               indexes: PipIndexes | None = None) -> tuple[list[str], list[str]]:
    """The pip section: the env's own index lines first, each as the same kind of line it was (a private
    --index-url stays --index-url: as an extra index, a public package of the same name could win, pip's
    "Dependency Confusion" note under --extra-index-url), then the +cuXYZ wheels' PyTorch index, then
    the packages."""
    warnings: list[str] = []
    indexes = indexes or PipIndexes()
    lines = indexes.lines() if pips else []
    lines += [f"--extra-index-url {index}" for index in sorted({p.index for p in pips if p.index})
              if index not in indexes.extra]
    lines += [str(pkg.requirement) for pkg in _recreatable(pips, strict, warnings)]
    if pips and (indexes.index_url or indexes.extra):
        warnings.append(f"kept the env's pip index ({', '.join(indexes.lines())}), written without credentials "
                        "(envkit never keeps them): where it needs them, give them to pip on the machine that "
                        "installs (PIP_INDEX_URL / PIP_EXTRA_INDEX_URL, keyring or ~/.netrc)")
    return lines, warnings


def export_yaml(prefix: Path, *, name: str | None = None, from_history: bool = False, no_pip: bool = False,
                strict: bool = False, config: dict[str, Any] | None = None, conda_lock: bool = False) -> Exported:
    records = read_records(prefix, config)
    warnings: list[str] = []
    by_name = {r.name: r for r in records}
    if from_history:
        asked = requested_specs(prefix)
        if not asked:
            raise ExportError(f"{prefix}/conda-meta/history records no requested specs",
                              "export without --from-history (the full pinned list)")
        used = []
        for pkg in sorted(asked):
            if pkg.startswith("__"):
                continue
            record = by_name.get(pkg)
            if record is None:
                warnings.append(f"left out {asked[pkg]!r}: requested but not installed")
                continue
            used.append(record)
        if any(is_cuda_variant(r) for r in used) and "cuda-version" in by_name and "cuda-version" not in asked:
            used.append(by_name["cuda-version"])  # the CUDA line the GPU build was made for
        deps = sorted(pinned(r) for r in used)
    else:
        used = [r for r in records if not r.name.startswith("__")]
        deps = sorted(pinned(r) for r in used)
    channels = [c for c in _channel_order(prefix, records, config) if any(r.channel == c for r in used)]
    pip: list[str] = []
    indexes = env_pip_indexes(prefix, config)
    if not no_pip:
        pip, pip_warnings = _pip_lines(read_pip(prefix, records), strict, indexes)
        warnings += pip_warnings
        if pip and "pip" not in {d.split("=")[0] for d in deps} and "pip" in by_name:
            deps.append(f"pip={by_name['pip'].version}")
            deps.sort()
    variables = read_variables(prefix)
    env_name = name or prefix.name
    header = ["Exported by envkit: portable (no prefix, no build strings, canonical channels).",
              "Recreate with: envkit create NAME --file THIS_FILE --no-adapt (or conda env create -f THIS_FILE)"]
    if indexes.index_url and any(line.startswith("--index-url ") for line in pip):
        header.append(f"pip installs from the env's private index only (--index-url {indexes.index_url}, as it was "
                      "made; not PyPI); no credentials are written here: give them to pip (PIP_INDEX_URL, keyring).")
    if any(d.endswith("=" + CUDA_SELECTOR) for d in deps):
        header.append("CUDA builds keep a *cuda* selector: a solver without __cuda (no GPU: CI, Docker, login node) "
                      "fails instead of installing CPU builds; there set CONDA_OVERRIDE_CUDA=X.Y for the target GPU.")
    envfile = EnvFile(env_name, tuple(channels), tuple(deps), tuple(pip), variables, tuple(header))
    if conda_lock:
        envfile, notes = for_conda_lock(envfile)
        warnings += list(notes)
    return Exported(envfile.render(), tuple(warnings))


SIDECAR_SUFFIX = ".envkit.yml"
SIDECAR_HEADER = "# envkit-sidecar: "
HASHES = ("sha256", "md5")


def portable_url(record: CondaRecord) -> str:
    """The package's URL on its canonical channel (a mirror serves the same bytes: same sha256), so an
    env installed through a mirror exports URLs every teammate can reach; `--mirror` maps them back."""
    base = canonical_urls().get(record.channel)
    if base and record.url and record.subdir:
        return f"{base.rstrip('/')}/{record.subdir}/{record.url.rsplit('/', 1)[-1]}"
    return record.url


def mirrored_url(record: CondaRecord, mirror: Mirror) -> str | None:
    """The package's URL through `mirror` (its copy of the record's canonical channel), or None when the mirror
    does not carry that channel."""
    base = mirror.channel_url(record.channel) if record.channel else None
    if base and record.url and record.subdir:
        return f"{base.rstrip('/')}/{record.subdir}/{record.url.rsplit('/', 1)[-1]}"
    return None


def explicit_line(record: CondaRecord, hash_kind: str = "sha256", mirror: Mirror | None = None) -> str:
    """One @EXPLICIT line as conda parses it (conda/misc.py `url_pat`): `URL#<sha256 hex>` (conda >= 23.x
    also takes `URL#sha256:<hex>`), or `URL#<md5 hex>`, which every conda and conda-lock's vendored parser read.
    With a mirror, the URL is the mirror's: plain conda downloads an explicit URL as written and no .condarc setting
    remaps it (checked with conda 26.7.1: docs/conda-behaviour.md)."""
    url = (mirrored_url(record, mirror) if mirror is not None else None) or portable_url(record)
    if hash_kind == "md5" and record.md5:
        return f"{url}#{record.md5}"
    if record.sha256:
        return f"{url}#{record.sha256}"
    return f"{url}#{record.md5}" if record.md5 else url


def _extras(prefix: Path, records: list[CondaRecord], strict: bool) -> tuple[list[str], tuple[tuple[str, str], ...],
                                                                               list[str]]:
    pip, warnings = _pip_lines(read_pip(prefix, records), strict, env_pip_indexes(prefix, load_file_config().data))
    return pip, read_variables(prefix), warnings


def export_explicit(prefix: Path, config: dict[str, Any] | None = None, *, sidecar_name: str | None = None,
                    strict: bool = False, no_pip: bool = False, hash_kind: str = "sha256",
                    mirror: Mirror | None = None) -> Exported:
    """conda's @EXPLICIT list. The format holds conda URLs only: the pip section and `variables:` go into
    a sidecar YAML that the header names (`sidecar_name`), or --strict refuses; never silently dropped."""
    if hash_kind not in HASHES:
        raise ExportError(f"unknown hash {hash_kind!r}", f"use one of {', '.join(HASHES)}")
    records = read_records(prefix, config)
    subdirs = sorted({r.subdir for r in records if r.subdir and r.subdir != "noarch"}) or ["linux-64"]
    pip, variables, warnings = ([], (), []) if no_pip else _extras(prefix, records, strict)
    if no_pip:
        variables = read_variables(prefix)
    if mirror is not None and mirror.pypi and pip:
        # the sidecar's pip part through the same mirror; a private index stays the index (render/mirrors.py)
        pip = [p for p in pip if not (p.startswith("--index-url ") and is_public_pypi(p.split(None, 1)[1]))]
        if not any(p.startswith("--index-url ") for p in pip):
            pip = [f"--index-url {mirror.pypi}", *pip]
    sidecar = None
    lines = ["# This file may be used to create an environment using:",
             "# $ envkit create NAME --file THIS_FILE   (or: conda create --name NAME --file THIS_FILE)",
             f"# platform: {subdirs[0]}", "# created-by: envkit"]
    carried = [f"{len([p for p in pip if not p.startswith('-')])} pip package(s)"] if pip else []
    carried += ["variables"] if variables else []
    if carried:
        what = " and ".join(carried)
        if sidecar_name is None:
            if strict:
                raise ExportError(f"an explicit file cannot hold the {what} of {prefix.name}, and there is no "
                                  "file to put them beside (output goes to stdout)",
                                  "export with -o FILE (the sidecar FILE.envkit.yml carries them), "
                                  "or use --format lock, which holds them")
            warnings.append(f"not in the explicit file: the {what} (conda's format has no place for them); "
                            "use -o FILE to get them in a sidecar, or --format lock")
        else:
            import yaml

            data: dict[str, Any] = {}
            if pip:
                data["pip"] = pip
            if variables:
                data["variables"] = dict(variables)
            sidecar = (f"# The {what} of {prefix.name} that conda's explicit format cannot hold; "
                       "envkit create --file reads it.\n" + yaml.safe_dump(data, sort_keys=False))
            lines.append(f"{SIDECAR_HEADER}{sidecar_name} ({what}; conda ignores it: "
                         f"pip install -r / conda env config vars set by hand)")
    if mirror is not None:
        lacking = sorted({r.channel for r in records if r.url and mirrored_url(r, mirror) is None})
        if lacking:
            raise ExportError(f"mirror {mirror.name} ({mirror.title}) does not carry {', '.join(lacking)}, which "
                              f"{prefix.name}'s packages come from", "export without --mirror (canonical URLs), "
                              "or name a mirror that carries those channels")
        lines.append(f"# urls: through {strip_credentials(mirror.title)[0]}, for plain conda behind it (conda "
                     "downloads these URLs as written); without --mirror the URLs are canonical")
    lines.append("@EXPLICIT")
    for r in sorted(records, key=portable_url):
        if not r.url:
            warnings.append(f"left out {r.name}: its record has no URL")
            continue
        lines.append(explicit_line(r, hash_kind, mirror))
    return Exported("\n".join(lines) + "\n", tuple(warnings), sidecar)


def read_sidecar(explicit: Path) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The pip lines and variables of the sidecar an explicit file's header names (none: empty)."""
    name = None
    for line in read_text(explicit, "explicit file").splitlines():
        if line.startswith(SIDECAR_HEADER):
            name = line[len(SIDECAR_HEADER):].split(" (", 1)[0].strip()
            break
        if line.strip() == "@EXPLICIT":
            break
    if not name:
        return (), ()
    path = explicit.parent / name
    if Path(name).name != name or not path.is_file():
        raise ExportError(f"{explicit.name} names a sidecar {name!r} (its pip packages and variables) "
                          f"that is not next to it in {explicit.parent}",
                          f"copy {name} next to {explicit.name}, or delete the envkit-sidecar header line "
                          "to recreate without them")
    data = load_yaml(path, "sidecar") or {}  # bounded, UTF-8, no YAML bomb: errors name the file
    if not isinstance(data, dict):
        raise ExportError(f"sidecar {path} must be a mapping (pip:, variables:)", "export it again")
    pip = tuple(check_pip_line(p, f"{path}: pip") for p in data.get("pip") or [])
    return pip, check_variables(data.get("variables"), f"{path}: variables")


def _pip_report(prefix: Path) -> dict[str, tuple[str, str | None]]:
    """name -> (artifact URL, sha256) as create recorded them (.envkit/pip-provenance.json)."""
    try:
        rows = prefix_records.read_pip_provenance(prefix)
    except InputError:
        return {}
    out: dict[str, tuple[str, str | None]] = {}
    for row in rows if isinstance(rows, list) else []:
        try:
            url = _clean(str(row.get("url") or ""))
            if url:
                out[str(row["name"]).lower()] = (url, row.get("sha256"))
        except (KeyError, TypeError, AttributeError):
            continue
    return out


def locked_pypi(prefix: Path, records: list[CondaRecord],
                strict: bool) -> tuple[list[LockedPypi], list[str], list[str]]:
    """PyPI entries for a lock: exact artifact URL + sha256 when the create-time pip report has them,
    else the direct/VCS URL, else the index's project page (installed as name==version from `indexes`)."""
    report = _pip_report(prefix)
    entries: list[LockedPypi] = []
    env_indexes = env_pip_indexes(prefix, load_file_config().data)
    # rattler-lock `indexes`: the first is the index (pixi's index-url), the rest extra ones
    indexes: list[str] = [env_indexes.index_url or PYPI_SIMPLE, *env_indexes.extra]
    warnings: list[str] = []
    for pkg in _recreatable(read_pip(prefix, records), strict, warnings):
        assert pkg.requirement is not None  # _recreatable kept only those
        if pkg.index and pkg.index not in indexes:
            indexes.append(pkg.index)
        url, digest = report.get(pkg.name.lower(), ("", None))
        url = env_indexes.canonical(url, pkg.name)  # a wheel the create's mirror served: PyPI's page
        if not url:
            if pkg.requirement.startswith(f"{pkg.name} @ "):
                url = pkg.requirement.split(" @ ", 1)[1]
            elif "+" in pkg.requirement.split(":", 1)[0]:
                url = pkg.requirement
            else:
                url = f"{(pkg.index or env_indexes.index_url or PYPI_SIMPLE).rstrip('/')}/{_normalize(pkg.name)}/"
        entries.append(LockedPypi(pkg.name, pkg.version, url, digest))
    return entries, (indexes if entries else []), warnings


def export_lock(prefix: Path, config: dict[str, Any] | None = None, *, version: int = 6, strict: bool = False,
                no_pip: bool = False) -> Exported:
    """The installed env as a rattler lock (v6 by default: what conda-lockfiles 0.2 and pixi read)."""
    records = read_records(prefix, config)  # validates every file first, with a clear error
    subdir = next((r.subdir for r in records if r.subdir and r.subdir != "noarch"), "linux-64")
    known = canonical_urls()
    channels = tuple(known.get(c, c) for c in _channel_order(prefix, records, config))  # exact URLs, no creds
    conda = []
    for r in records:
        if not r.url:
            continue
        data = prefix_records.read_record(prefix, r.name, r.version, r.build)
        conda.append(LockedConda(
            url=portable_url(r), sha256=r.sha256, md5=r.md5, size=_int_or_none(data.get("size")),
            depends=tuple(str(d) for d in data.get("depends") or ()),
            constrains=tuple(str(d) for d in data.get("constrains") or ()), subdir=r.subdir,
            build_number=_int_or_none(data.get("build_number")), license=data.get("license") or None,
            timestamp=_int_or_none(data.get("timestamp")),
            channel=(known.get(r.channel, r.channel) if "://" in known.get(r.channel, r.channel) else "")))
    pypi: list[LockedPypi] = []
    indexes: list[str] = []
    warnings: list[str] = []
    if not no_pip:
        pypi, indexes, warnings = locked_pypi(prefix, records, strict)
    lock = Lock(channels=channels, platforms=(LockedPlatform(subdir, tuple(conda), tuple(pypi)),),
                indexes=tuple(dict.fromkeys(indexes)), variables=read_variables(prefix))
    held = [f"{len(pypi)} PyPI entr{'y' if len(pypi) == 1 else 'ies'}"] if pypi else []
    held += ["variables"] if lock.variables else []
    if held:  # conda-lockfiles 0.2 installs the conda part and drops the rest with rc 0 (issue 22's audit)
        warnings.append(f"the lock holds {' and '.join(held)}: envkit create --lock and pixi install them; "
                        "conda + conda-lockfiles installs only the conda packages (README: who reads what)")
    return Exported(redact(render_lock(lock, version)), tuple(warnings))


# PEP 751 (pylock.toml, packaging.python.org "pylock.toml specification"): `lock-version = "1.0"`,
# `created-by`, one `[[packages]]` per distribution with `name`, `version`, `index` and exactly one source:
# `[[packages.wheels]]` / `[packages.sdist]` (`url` + `hashes`, required) or `[packages.vcs]` (`type`, `url`,
# `commit-id`); tools keep their own data under `[tool.<name>]`. The file is named pylock.toml or
# pylock.<name>.toml (the spec's file-name rule; `uv pip install -r` recognises it by that name).
PYLOCK_VERSION = "1.0"
PYLOCK_NAME = re.compile(r"^pylock\.([^.]+\.)?toml$")
_VCS_REQ = re.compile(r"^(?P<type>git|hg|svn|bzr)\+(?P<url>.+)@(?P<commit>[0-9A-Za-z._-]+)$")


def _toml(value: str) -> str:
    """A TOML basic string: JSON's string escapes (backslash, quote, newline, u-hex) are TOML's too."""
    return json.dumps(value)


def export_pylock(prefix: Path, config: dict[str, Any] | None = None, *, strict: bool = False,
                  conda_lock: str = "envkit.lock", no_pip: bool = False) -> Exported:
    """The env's pip packages as a PEP 751 pylock.toml: each with the file create installed (URL + sha256,
    from pip's report) or its VCS commit, and the index; `[tool.envkit]` names the conda lock it belongs
    with (conda packages and variables are not pip's: `envkit export NAME --format lock`). A wheel a
    --mirror served is named at that mirror (PEP 751 needs a file URL; the lock names PyPI's page)."""
    if no_pip:
        raise ExportError("--no-pip leaves nothing for a pylock.toml (it holds the pip packages only)",
                          "drop --no-pip, or use --format lock for the conda part")
    records = read_records(prefix, config)
    indexes = env_pip_indexes(prefix, config)
    report = _pip_report(prefix)
    warnings: list[str] = []
    python = next((r.version for r in records if r.name == "python"), "")
    lines = [f"lock-version = {_toml(PYLOCK_VERSION)}", f"created-by = {_toml('envkit')}"]
    if python:
        lines.append(f"requires-python = {_toml('==' + '.'.join(python.split('.')[:2]) + '.*')}")
    count = 0
    mirrored: list[str] = []
    for pkg in _recreatable(read_pip(prefix, records), strict, warnings):
        assert pkg.requirement is not None
        url, sha = report.get(pkg.name.lower(), ("", None))
        index = pkg.index or indexes.index_url or PYPI_SIMPLE
        entry = ["", "[[packages]]", f"name = {_toml(_normalize(pkg.name))}", f"version = {_toml(pkg.version)}"]
        vcs = _VCS_REQ.match(pkg.requirement)
        if vcs:
            entry += ["", "[packages.vcs]", f"type = {_toml(vcs.group('type'))}", f"url = {_toml(vcs.group('url'))}",
                      f"commit-id = {_toml(vcs.group('commit'))}"]
        elif url and sha and url.endswith(".whl"):
            if indexes.canonical(url, pkg.name) != url:
                mirrored.append(pkg.name)
            entry.insert(4, f"index = {_toml(index)}")
            entry += ["", "[[packages.wheels]]", f"url = {_toml(url)}", f"hashes = {{sha256 = {_toml(sha)}}}"]
        elif url and sha and url.endswith((".tar.gz", ".zip")):
            entry.insert(4, f"index = {_toml(index)}")
            entry += ["", "[packages.sdist]", f"url = {_toml(url)}", f"hashes = {{sha256 = {_toml(sha)}}}"]
        else:
            why = f"{pkg.name} {pkg.version} has no recorded file and hash (pip installed it outside envkit)"
            if strict:
                raise ExportError(f"{why}: a pylock.toml needs both", "export --format lock (it pins name==version), "
                                  "or recreate the env with envkit create so the files are recorded")
            warnings.append(f"left out of pylock.toml: {why}; --format lock keeps it as name==version")
            continue
        lines += entry
        count += 1
    if not count:
        warnings.append(f"{prefix.name} has no pip packages a pylock.toml can hold")
    if mirrored:
        warnings.append(f"pylock.toml names the wheels of {', '.join(mirrored)} at the mirror {prefix.name} was made "
                        "through (PEP 751 needs a file URL); behind another mirror use --format lock, which names "
                        "PyPI and takes --mirror at install")
    lines += ["", "[tool.envkit]", f"conda-lock = {_toml(conda_lock)}", f"environment = {_toml(prefix.name)}",
              f"note = {_toml(f'conda packages and variables: envkit export {prefix.name} --format lock -o {conda_lock}')}"]
    return Exported("\n".join(lines) + "\n", tuple(warnings))


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def export_env(prefix: Path, *, fmt: str = "yaml", **kwargs: Any) -> Exported:
    config = load_file_config().data
    if fmt == "yaml":
        return export_yaml(prefix, config=config, **kwargs)
    if fmt == "explicit":
        return export_explicit(prefix, config, **kwargs)
    if fmt == "lock":
        return export_lock(prefix, config, **kwargs)
    if fmt == "pylock":
        return export_pylock(prefix, config, **kwargs)
    raise ExportError(f"unknown format {fmt!r}", f"use one of {', '.join(FORMATS)}")
