"""Lock files in rattler-lock format (pixi.lock): what conda-lockfiles, pixi and envkit all read.

Stable API (other modules and `envkit bundle` build on it; pure: YAML text in, dataclasses out):

    read_lock(path) -> Lock                   reads rattler-lock v6 (pixi's format, conda-lockfiles)
    parse_lock(text, source="") -> Lock       and v7 (py-rattler 0.28's own writer)
    write_lock(lock, path, version=6)         writes v6 by default (conda-lockfiles 0.2 reads only v6),
    render_lock(lock, version=6) -> str       v7 on request
    Lock.platform(name) -> LockedPlatform     one platform's conda + PyPI packages (LockError if absent)
    Lock.names()                              the platforms in the file
    pip_lines(lock, entry) -> tuple[str, ...] the pip requirement lines for a platform's PyPI entries
    current_platform() -> str                 this machine's conda subdir (linux-64, osx-arm64, ...)

    Lock(channels, platforms, indexes=(), variables=(), environment="default", version=6)
    LockedPlatform(name, conda=(LockedConda, ...), pypi=(LockedPypi, ...), virtual_packages=())
    LockedConda(url, sha256, md5, size, depends, subdir, ...)   name/version/build come from the file name
    LockedPypi(name, version, url, sha256, ...)

Format notes (rattler `crates/rattler_lock/src/parse/models/v6|v7`; conda-lockfiles
`conda_lockfiles/rattler_lock/v6.py`):
- both versions list `environments.<env>.channels` ({url}), `indexes` (PyPI) and per-platform
  references `- conda: URL` / `- pypi: URL`, then one top-level `packages:` list with the metadata;
- v6 derives name, version, build, subdir and channel from an http(s) URL; `build_number` is written only
  when it differs from the build string's trailing number; for a file:// (local channel) package v6 writes
  `subdir` and `channel` too, as rattler's writer does (`derivable`); v7 adds a top-level `platforms:`
  list and writes `subdir` and `channel` per package;
- a local channel's packages are written as plain paths by rattler: read back as file:// URLs;
- `variables:` (the env's activation variables, conda-meta/state) and `pypi-unlocked:` (per platform, the
  pip lines `envkit lock` could not pin to a wheel, with the reason) are envkit's additions under the
  environment; rattler and conda-lockfiles ignore keys they do not know, so the file stays readable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from envkit.errors import EnvkitError, InputError
from envkit.safeio import dump_yaml, loads_yaml, read_text
from envkit.secrets import VAULT

SUPPORTED_VERSIONS = (6, 7)
DEFAULT_VERSION = 6
LOCK_NAME = "envkit.lock"
UNLOCKED_KEY = "pypi-unlocked"  # envkit's addition (like variables): pip lines not pinned, per platform
_TRAILING_DIGITS = re.compile(r"(\d+)$")
_ARCHIVE = re.compile(r"^(?P<name>.+)-(?P<version>[^-]+)-(?P<build>[^-]+)(?P<ext>\.tar\.bz2|\.conda)$")


class LockError(EnvkitError):
    """A lock file cannot be read or lacks what was asked of it."""


def split_filename(filename: str) -> tuple[str, str, str]:
    """`pytorch-2.13.0-cuda130_py311_200.conda` -> (name, version, build), as conda names archives."""
    match = _ARCHIVE.match(filename)
    if not match:
        raise LockError(f"{filename!r} is not a conda package file name (NAME-VERSION-BUILD.conda|.tar.bz2)",
                        "lock files list conda packages by their archive URL")
    return match.group("name"), match.group("version"), match.group("build")


def build_number_of(build: str) -> int:
    """The number rattler-lock derives when `build_number` is absent: the build string's trailing
    digits (`py311_h0_200` -> 200, `7_cp313` -> 313, `cpython` -> 0), as py-rattler 0.28 reads it."""
    match = _TRAILING_DIGITS.search(build)
    return int(match.group(1)) if match else 0


def _first_digit_part(build: str) -> int:
    """conda-lockfiles' guess (`build_number_from_build_string`): the first all-digit `_` part."""
    return next((int(part) for part in build.split("_") if part.isdigit()), 0)


@dataclass(frozen=True)
class LockedConda:
    """One conda package archive, pinned by URL and hash."""

    url: str  # the archive's URL (file:// for a local channel), credentials never included
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()
    subdir: str = ""  # "" -> derived from the URL (its parent folder)
    build_number: int | None = None  # None -> derived from the build string
    license: str | None = None
    timestamp: int | None = None
    channel: str = ""  # "" -> derived from the URL

    @property
    def filename(self) -> str:
        return PurePosixPath(urlsplit(self.url).path).name

    @property
    def name(self) -> str:
        return split_filename(self.filename)[0]

    @property
    def version(self) -> str:
        return split_filename(self.filename)[1]

    @property
    def build(self) -> str:
        return split_filename(self.filename)[2]

    @property
    def platform_subdir(self) -> str:
        return self.subdir or PurePosixPath(urlsplit(self.url).path).parent.name

    @property
    def channel_url(self) -> str:
        if self.channel:
            return self.channel.rstrip("/")
        return self.url.rsplit("/", 2)[0]

    @property
    def number(self) -> int:
        return self.build_number if self.build_number is not None else build_number_of(self.build)


@dataclass(frozen=True)
class LockedPypi:
    """One PyPI distribution: installed by pip as `name==version` from the lock's indexes, or from
    `url` when it is a direct link (a wheel/sdist file URL or a VCS URL)."""

    name: str
    version: str
    url: str
    sha256: str | None = None
    requires_dist: tuple[str, ...] = ()
    requires_python: str | None = None

    @property
    def is_direct(self) -> bool:
        """True when `url` names one artifact (not an index's project page)."""
        path = urlsplit(self.url).path
        return "+" in urlsplit(self.url).scheme or path.endswith((".whl", ".tar.gz", ".zip"))

    def requirement(self) -> str:
        """The line pip installs it with."""
        if self.is_direct:
            return self.url if "+" in urlsplit(self.url).scheme else f"{self.name} @ {self.url}"
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class LockedPlatform:
    name: str  # conda subdir: linux-64, osx-arm64, win-64, ...
    conda: tuple[LockedConda, ...] = ()
    pypi: tuple[LockedPypi, ...] = ()
    virtual_packages: tuple[str, ...] = ()  # what the solve assumed (v7 writes it; informative)
    unlocked: tuple[str, ...] = ()  # pip lines `envkit lock` could not pin for this platform, with why


@dataclass(frozen=True)
class Lock:
    channels: tuple[str, ...]  # channel URLs (or names) in priority order
    platforms: tuple[LockedPlatform, ...]
    indexes: tuple[str, ...] = ()  # PyPI index URLs
    variables: tuple[tuple[str, str], ...] = ()  # activation variables (conda-meta/state env_vars)
    environment: str = "default"
    version: int = DEFAULT_VERSION  # the version it was read as (writing picks its own)

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.platforms)

    def platform(self, name: str) -> LockedPlatform:
        for entry in self.platforms:
            if entry.name == name:
                return entry
        raise LockError(f"the lock has no packages for {name} (it has {', '.join(self.names()) or 'none'})",
                        f"lock for this platform too: envkit lock ... --platform {name}")


# -- reading ------------------------------------------------------------------------------------
def _as_url(value: str, base: Path | None) -> str:
    """rattler writes a local channel's archives as paths: make them file:// URLs."""
    if "://" in value:
        return clean_url(value)
    path = Path(value)
    if not path.is_absolute() and base is not None:
        path = base / path
    return path.absolute().as_uri()


def clean_url(url: str) -> str:
    """The URL without its credentials (user:password@, a token as the user of an http(s) URL, a conda
    /t/<token>/ path): registered in the vault, which sends them at request time as headers or the
    rewritten path (secrets.py), so no lock, bundle or record ever holds them. A plain user such as
    git@ of an ssh URL is an account name, not a secret, and stays; a #fragment stays."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    secret_user = bool(userinfo) and (":" in userinfo or parts.scheme in ("http", "https"))
    if not secret_user and "/t/" not in parts.path:
        return url
    if not secret_user and userinfo:  # keep the account name; only the token path goes
        clean = VAULT.split(url.replace(userinfo + "@", "", 1)).replace("://", f"://{userinfo}@", 1)
    else:
        clean = VAULT.split(url)
    return clean + (f"#{parts.fragment}" if parts.fragment else "")


def _strs(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


def number(value: Any, what: str, where: str) -> int | None:
    """A count, size or timestamp read from a lock or manifest: None when absent, else a non-negative
    integer. A bool, a string, NaN, .inf / 1e999 or a fraction is refused with the field named (YAML 1.1
    and JSON both read those as numbers; int() of an infinity raises a bare OverflowError)."""
    if value is None:
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise LockError(f"{where}: {what} is {str(value)[:40]!r}, not a whole number", "regenerate the file")
    if value < 0:
        raise LockError(f"{where}: {what} is {value}, a negative number", "regenerate the file")
    return value


def digest(value: Any, what: str, where: str, length: int = 64, *, zeros: bool = True) -> str | None:
    """A sha256 (64) or md5 (32) hex digest: None when absent. An unquoted digest YAML read as a number
    (all zeros -> 0) or a wrong length is refused, never read as "no hash"; with zeros=False (a bundle's
    manifest) so is an all-zero placeholder. In a lock an all-zero digest is kept: it matches no file, so
    the install refuses the file it names (rattler's and pip's hash checks), naming it."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise LockError(f"{where}: {what} {str(value)[:70]!r} is not a quoted hex digest (YAML read it as "
                        f"{type(value).__name__})", "regenerate the file (digests are hex strings)")
    text = value.strip().lower()
    if not re.fullmatch(f"[0-9a-f]{{{length}}}", text):
        raise LockError(f"{where}: {what} {text[:70]!r} is not {length} hex digits", "regenerate the file")
    if not zeros and set(text) == {"0"}:
        raise LockError(f"{where}: {what} is all zeros, a placeholder that checks nothing",
                        "regenerate the file with real hashes (envkit lock / envkit export --format lock)")
    return text


_SUBDIR = re.compile(r"^[a-z0-9][a-z0-9_]*(-[a-z0-9_]+)*$")  # linux-64, osx-arm64, noarch, emscripten-wasm32


def check_subdir(subdir: str, where: str) -> str:
    """A conda subdir is one folder name (conda's `context.known_subdirs` are all of this shape): never a
    path. `../../tmp/victim` is refused here, before it can become part of a path anywhere."""
    if not _SUBDIR.match(subdir):
        raise LockError(f"{where}: subdir {subdir[:80]!r} is not a conda platform name (like linux-64 or noarch)",
                        "regenerate the lock; a subdir is never a path")
    return subdir


def parse_lock(text: str, source: str = "", base: Path | None = None) -> Lock:
    """rattler-lock v6/v7 text -> Lock (`source` names the file in errors; `base` resolves relative paths)."""
    where = source or "the lock file"
    try:
        data = loads_yaml(text, where, "lock file")  # bounded (no YAML bomb), one line naming file:line
    except InputError as exc:
        raise LockError(f"{where} is not YAML envkit can read: {exc.message}", "pass a pixi.lock / envkit.lock file"
                        ) from None
    if not isinstance(data, Mapping) or "version" not in data:
        raise LockError(f"{where} is not a rattler lock file (no version:)",
                        "pass a file written by `envkit lock`, `envkit export --format lock` or pixi")
    try:
        version = int(data["version"])
    except (TypeError, ValueError, OverflowError) as exc:
        raise LockError(f"{where}: version {data['version']!r} is not a number", "regenerate the lock") from exc
    if version not in SUPPORTED_VERSIONS:
        raise LockError(f"{where} is rattler-lock version {version}; envkit reads versions "
                        f"{', '.join(map(str, SUPPORTED_VERSIONS))}",
                        "regenerate it with `envkit lock` (or a pixi that writes version 6 or 7)")
    envs = data.get("environments") or {}
    if not isinstance(envs, Mapping) or not envs:
        raise LockError(f"{where} has no environments", "regenerate the lock")
    env_name = "default" if "default" in envs else str(next(iter(envs)))
    env = envs[env_name] or {}
    try:
        return _parse_env(data, env, env_name, version, base)
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, LockError):
            raise
        raise LockError(f"{where} is malformed: {type(exc).__name__}: {exc}", "regenerate the lock") from exc


def _parse_env(data: Mapping[str, Any], env: Mapping[str, Any], env_name: str, version: int,
               base: Path | None) -> Lock:
    conda_meta: dict[str, Mapping[str, Any]] = {}
    pypi_meta: dict[str, Mapping[str, Any]] = {}
    for entry in data.get("packages") or []:
        if "conda" in entry:
            conda_meta[_as_url(str(entry["conda"]), base)] = entry
        elif "pypi" in entry:
            pypi_meta[_pypi_key(str(entry["pypi"]), base)] = entry
    virtual: dict[str, tuple[str, ...]] = {}
    for item in data.get("platforms") or []:  # v7
        if isinstance(item, Mapping):
            virtual[str(item.get("name"))] = _strs(item.get("virtual_packages"))
    platforms: list[LockedPlatform] = []
    for plat, refs in (env.get("packages") or {}).items():
        conda: list[LockedConda] = []
        pypi: list[LockedPypi] = []
        for ref in refs or []:
            if "conda" in ref:
                url = _as_url(str(ref["conda"]), base)
                conda.append(_conda(url, conda_meta.get(url, {})))
            elif "pypi" in ref:
                key = _pypi_key(str(ref["pypi"]), base)
                meta = pypi_meta.get(key, {})
                pypi.append(LockedPypi(str(meta.get("name", "")), str(meta.get("version", "")), key,
                                       _sha(meta, key), _strs(meta.get("requires_dist")),
                                       meta.get("requires_python")))
        platforms.append(LockedPlatform(str(plat), tuple(conda), tuple(pypi), virtual.get(str(plat), ()),
                                        _strs((env.get(UNLOCKED_KEY) or {}).get(plat))))
    channels = tuple(clean_url(str(c["url"] if isinstance(c, Mapping) else c)) for c in env.get("channels") or [])
    indexes = tuple(clean_url(i) for i in _strs(env.get("indexes")))
    variables = tuple(sorted((str(k), str(v)) for k, v in (env.get("variables") or {}).items()))
    return Lock(channels, tuple(platforms), indexes, variables, env_name, version)


def _pypi_key(raw: str, base: Path | None) -> str:
    return clean_url(raw) if "://" in raw or raw.startswith(("git+", "hg+")) else _as_url(raw, base)


def _sha(meta: Mapping[str, Any], where: str) -> str | None:
    hashes = meta.get("hash")  # older pypi entries: hash: {sha256: ...}
    if meta.get("sha256") is None and isinstance(hashes, Mapping):
        return digest(hashes.get("sha256"), "sha256", where)
    return digest(meta.get("sha256"), "sha256", where)


def _conda(url: str, meta: Mapping[str, Any]) -> LockedConda:
    filename = PurePosixPath(urlsplit(url).path).name
    split_filename(filename)  # validates the name early
    where = f"the package {filename}"
    channel = clean_url(str(meta.get("channel") or ""))
    if channel and "://" not in channel and channel.startswith("/"):
        channel = Path(channel).as_uri()
    pkg = LockedConda(url=url, sha256=digest(meta.get("sha256"), "sha256", where),
                      md5=digest(meta.get("md5"), "md5", where, 32), size=number(meta.get("size"), "size", where),
                      depends=_strs(meta.get("depends")), constrains=_strs(meta.get("constrains")),
                      subdir=str(meta.get("subdir") or ""),
                      build_number=number(meta.get("build_number"), "build_number", where),
                      license=meta.get("license"), timestamp=number(meta.get("timestamp"), "timestamp", where),
                      channel=channel)
    check_subdir(pkg.platform_subdir, where)
    return pkg


def read_lock(path: Path) -> Lock:
    """Read a rattler-lock v6 or v7 file (pixi.lock, envkit.lock)."""
    return parse_lock(read_text(path, "lock file"), str(path), path.parent)  # regular, bounded, UTF-8


# -- writing ------------------------------------------------------------------------------------
def _channel_entry(url: str) -> str:
    return url if "://" not in url or url.endswith("/") else url + "/"


def derivable(url: str) -> bool:
    """True when rattler-lock v6 derives a package's channel and subdir from its location: an http(s) URL
    (`<channel>/<subdir>/<file>`). rattler reads a file:// URL as a local path and derives nothing from
    it, so without `subdir:` its v6 reader fails (`missing field/fields 'subdir'`, py-rattler 0.28) and
    without `channel:` it reads the channel as none; rattler's own v6 writer writes both for such
    packages (rattler `crates/rattler_lock/src/parse/models/v6/conda_package_data.rs`)."""
    return urlsplit(url).scheme in ("http", "https")


def _conda_entry(pkg: LockedConda, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {"conda": clean_url(pkg.url)}
    explicit = version >= 7 or not derivable(pkg.url)  # v7 always; v6 where the URL says nothing
    if pkg.build_number is not None and pkg.build_number not in (
            {build_number_of(pkg.build)} & {_first_digit_part(pkg.build)}):  # both readers must get it right
        out["build_number"] = pkg.build_number
    if explicit:
        out["subdir"] = pkg.platform_subdir
    for key in ("sha256", "md5"):
        if getattr(pkg, key):
            out[key] = getattr(pkg, key)
    if pkg.depends:
        out["depends"] = list(pkg.depends)
    if pkg.constrains:
        out["constrains"] = list(pkg.constrains)
    if explicit:
        out["channel"] = _channel_entry(clean_url(pkg.channel_url))
    if pkg.license:
        out["license"] = pkg.license
    if pkg.size is not None:
        out["size"] = pkg.size
    if pkg.timestamp is not None:
        out["timestamp"] = pkg.timestamp
    return out


def _pypi_entry(pkg: LockedPypi) -> dict[str, Any]:
    out: dict[str, Any] = {"pypi": clean_url(pkg.url), "name": pkg.name, "version": pkg.version}
    if pkg.sha256:
        out["sha256"] = pkg.sha256
    if pkg.requires_dist:
        out["requires_dist"] = list(pkg.requires_dist)
    if pkg.requires_python:
        out["requires_python"] = pkg.requires_python
    return out


def render_lock(lock: Lock, version: int = DEFAULT_VERSION) -> str:
    """Lock -> rattler-lock text (v6: what conda-lockfiles 0.2 and pixi read; v7: py-rattler 0.28's)."""
    if version not in SUPPORTED_VERSIONS:
        raise LockError(f"cannot write rattler-lock version {version}",
                        f"use --lock-version {' or '.join(map(str, SUPPORTED_VERSIONS))}")
    # credentials never reach the text (clean_url): whatever built the Lock, the file holds clean URLs
    env: dict[str, Any] = {"channels": [{"url": _channel_entry(clean_url(c))} for c in lock.channels]}
    if lock.indexes or any(p.pypi for p in lock.platforms):
        env["indexes"] = [clean_url(i) for i in lock.indexes] or ["https://pypi.org/simple"]
    if lock.variables:
        env["variables"] = dict(lock.variables)
    if any(p.unlocked for p in lock.platforms):
        env[UNLOCKED_KEY] = {p.name: list(p.unlocked) for p in sorted(lock.platforms, key=lambda p: p.name)
                             if p.unlocked}
    env["packages"] = {
        plat.name: [{"conda": clean_url(c.url)} for c in _sorted_conda(plat.conda)]
        + [{"pypi": clean_url(p.url)} for p in plat.pypi]
        for plat in sorted(lock.platforms, key=lambda p: p.name)}
    packages: list[dict[str, Any]] = []
    seen: set[str] = set()
    for plat in sorted(lock.platforms, key=lambda p: p.name):
        for pkg in _sorted_conda(plat.conda):
            if pkg.url not in seen:
                seen.add(pkg.url)
                packages.append(_conda_entry(pkg, version))
        for pypi in plat.pypi:
            if pypi.url not in seen:
                seen.add(pypi.url)
                packages.append(_pypi_entry(pypi))
    data: dict[str, Any] = {"version": version}
    if version >= 7:
        data["platforms"] = [{"name": p.name, **({"virtual_packages": list(p.virtual_packages)}
                                                 if p.virtual_packages else {})}
                             for p in sorted(lock.platforms, key=lambda p: p.name)]
    data["environments"] = {lock.environment: env}
    data["packages"] = packages
    return dump_yaml(data, sort_keys=False, default_flow_style=False, width=1000)


def _sorted_conda(pkgs: Iterable[LockedConda]) -> list[LockedConda]:
    return sorted(pkgs, key=lambda p: (p.name, p.url))


def write_lock(lock: Lock, path: Path, version: int = DEFAULT_VERSION) -> Path:
    """Write the lock (v6 unless asked for 7); returns the path."""
    text = render_lock(lock, version)
    path.write_text(text, encoding="utf-8")
    return path


PYPI_SIMPLE = "https://pypi.org/simple"
_INDEX_FILE_HOSTS = {"pypi.org": "files.pythonhosted.org"}  # where PyPI's index serves its files


def pip_lines(lock: Lock, entry: LockedPlatform) -> tuple[str, ...]:
    """The pip requirement lines that install a platform's PyPI entries. A file served by one of the
    lock's indexes installs as `name==version` (so a --mirror's PyPI can serve it); any other file URL
    as `name @ URL`, a VCS URL as itself. The first index is pip's --index-url, the others extra ones;
    PyPI itself is pip's default index and is not repeated.

    When every entry carries its sha256 (envkit's and pixi's locks do), each line gets `--hash=sha256:`,
    which puts pip in hash-checking mode: a file that differs from the one locked is refused, whatever
    index or mirror serves it ("Hash-checking mode", pip's secure-installs docs). The mode is all or
    nothing, so a lock with any entry lacking a hash, or a VCS entry (no file to hash), installs as before."""
    if not entry.pypi:
        return ()
    hashed = all(p.sha256 and "+" not in urlsplit(p.url).scheme for p in entry.pypi)
    hosts = set()
    for index in lock.indexes:
        host = urlsplit(index).hostname or ""
        hosts |= {host, _INDEX_FILE_HOSTS.get(host, host)}
    # the first index is the index (pixi writes `indexes: [index-url, extra...]`): a private one stays
    # --index-url, so no public package of the same name can win (pip's dependency-confusion warning)
    lines = [f"--index-url {lock.indexes[0]}"] if lock.indexes and lock.indexes[0].rstrip("/") != PYPI_SIMPLE else []
    lines += [f"--extra-index-url {index}" for index in lock.indexes[1:] if index.rstrip("/") != PYPI_SIMPLE]
    for pkg in entry.pypi:
        if "+" in urlsplit(pkg.url).scheme or (pkg.is_direct and urlsplit(pkg.url).hostname not in hosts):
            line = pkg.requirement()
        else:
            line = f"{pkg.name}=={pkg.version}"
        lines.append(f"{line} --hash=sha256:{pkg.sha256}" if hashed else line)
    return tuple(lines)


def current_platform() -> str:
    """This machine's conda subdir (linux-64, linux-aarch64, osx-arm64, osx-64, win-64)."""
    import platform
    import sys

    machine = platform.machine().lower()
    arch = {"x86_64": "64", "amd64": "64", "aarch64": "aarch64", "arm64": "arm64", "ppc64le": "ppc64le"}.get(
        machine, machine)
    if sys.platform.startswith("linux"):
        return f"linux-{arch}"
    if sys.platform == "darwin":
        return "osx-arm64" if arch in ("arm64", "aarch64") else "osx-64"
    if sys.platform == "win32":
        return "win-arm64" if arch in ("arm64", "aarch64") else "win-64"
    return f"{sys.platform}-{arch}"


def file_path(url: str) -> Path | None:
    """A file:// URL's local path (None for remote URLs)."""
    parts = urlsplit(url)
    return Path(unquote(parts.path)) if parts.scheme == "file" else None
