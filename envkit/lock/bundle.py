"""`envkit bundle`: a self-contained folder (lock + every archive and wheel it names, with checksums)
that `envkit create NAME --bundle DIR` installs from with no network at all.

Layout (everything relative, so the folder can be copied, rsynced or served from a shared filesystem):

    DIR/bundle.json        manifest: what, for which platform/selection, and sha256 + size of every file
    DIR/envkit.lock        rattler-lock v7 whose packages point INTO the bundle (relative paths), with
                           the original channel per package (records keep canonical channels)
    DIR/source.lock        the same lock with the original URLs (v6: pixi / conda-lockfiles read it)
    DIR/conda/<subdir>/    the conda archives
    DIR/wheels/            the pip wheels

Checksums: conda archives are checked against the lock's sha256 when they are fetched, and every file
against the manifest before anything is installed; rattler does not verify file:// archives itself
(rattler-notes.md §4), so this check is what stands between a corrupt copy and a broken env.

Trust (issue 20): every path read from the manifest or a lock goes through fsutil.confined (relative,
no `..`, no symlink out, regular files only); every number is whole and non-negative; every listed file
has a real sha256. `create --bundle` installs only what bundle.json lists, matched entry for entry with
envkit.lock, from a private copy hashed while it was copied (private_copy), so nothing can be swapped
in between check and install. URLs are written without credentials (lock.file.clean_url).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit import __version__, proc
from envkit.config import cache_dir, load_file_config
from envkit.create import CreateOptions, CreateResult, create_env
from envkit.engines.pip import pip_index_env
from envkit.errors import EnvkitError, UsageError
from envkit.export import export_env
from envkit.fsutil import PathError, confined, copy_regular, remove_at_exit, sha256_of
from envkit.lock.file import (PYPI_SIMPLE, Lock, LockedConda, LockedPlatform, LockedPypi, LockError, clean_url,
                              current_platform, digest, file_path, number, parse_lock, read_lock, write_lock)
from envkit.prefix.staging import interrupting, staging_beside
from envkit.render import mirrors
from envkit.render.mirrors import Mirror
from envkit.secrets import VAULT, redact

if TYPE_CHECKING:
    from envkit.engines.rattler_engine import Progress

MANIFEST = "bundle.json"
LOCAL_LOCK = "envkit.lock"
SOURCE_LOCK = "source.lock"
FORMAT = 1
ARCHIVE_LIMIT = 64 << 30  # one archive or wheel: far above the largest CUDA builds (~3 GB), far below a full disk
_KINDS = ("conda", "wheel")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class BundleError(EnvkitError):
    """A bundle cannot be written, or one on disk is incomplete or corrupt."""


@dataclass(frozen=True)
class BundleFile:
    path: str  # relative to the bundle folder
    sha256: str
    size: int
    url: str  # where it came from (credentials never included)
    kind: str  # conda | wheel


@dataclass(frozen=True)
class Bundle:
    root: Path
    name: str
    platform: str
    files: tuple[BundleFile, ...]
    selection: dict[str, Any] | None = None
    created: str = ""
    seconds: float = 0.0

    @property
    def lock_path(self) -> Path:
        return self.root / LOCAL_LOCK

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "envkit_version": __version__, "name": self.name, "platform": self.platform,
                "created": self.created, "selection": self.selection,
                "conda_packages": sum(f.kind == "conda" for f in self.files),
                "wheels": sum(f.kind == "wheel" for f in self.files), "bytes": self.size,
                "files": [{"path": f.path, "sha256": f.sha256, "size": f.size, "url": f.url, "kind": f.kind}
                          for f in self.files]}




# -- writing ------------------------------------------------------------------------------------
def _fetch_conda(items: Sequence[tuple[str, Path]], channels: Sequence[str], mirror: Mirror | None) -> None:
    """Download (or copy) archives; http(s) through rattler's client, so mirrors and credentials apply.

    A local (file://) archive is copied only from inside its channel folder (<channel>/<subdir>/<file>:
    a symlink leading out of it is refused), only as a regular file the invoking user may read, and
    never with wider permissions than it has (fsutil.copy_regular): a lock cannot smuggle /etc/shadow,
    /dev/zero or a FIFO into a bundle."""
    remote = []
    for url, dest in items:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if url.startswith("file://"):
            source = file_path(url)
            assert source is not None
            real = confined(source.parent.parent, f"{source.parent.name}/{source.name}", what="local archive",
                            hint="a lock names archives inside their channel folder; check the lock's file:// URLs")
            copy_regular(real, dest, limit=ARCHIVE_LIMIT, what="local archive", hint="check the local channel")
        else:
            remote.append((url, dest))
    if not remote:
        return
    from envkit.engines.rattler_engine import EngineSettings, RattlerEngine  # lazy: rattler's exit pause

    engine = RattlerEngine(EngineSettings(channels=tuple(channels), cache_dir=cache_dir(), mirror=mirror))
    try:
        engine.download(remote)
    except Exception as exc:
        raise BundleError(f"downloading the packages failed: {redact(str(exc))}",
                          "check the network or the mirror (--mirror), then run envkit bundle again") from exc


def _pip_download(lines: Sequence[str], dest: Path, python: str | None, *, no_deps: bool = False) -> list[Path]:
    """The pip section's wheels (with their dependencies) for the env's python, into `dest`."""
    import sys

    dest.mkdir(parents=True, exist_ok=True)
    file_lines, secret_env = pip_index_env(lines)
    reqs = dest.parent / ".pip-requirements.txt"
    reqs.write_text("\n".join(file_lines) + "\n", encoding="utf-8")
    argv = [sys.executable, "-m", "pip", "download", "--no-input", "--disable-pip-version-check", "-q",
            "--only-binary=:all:", "-d", str(dest), "-r", str(reqs)]
    if no_deps:
        argv.append("--no-deps")
    if python:
        argv += ["--python-version", python.rstrip("t"), "--implementation", "cp"]
    before = set(dest.iterdir())
    try:
        done = proc.run(argv, timeout=1800, env=proc.child_env(secret_env))
    finally:
        reqs.unlink(missing_ok=True)
    if done.returncode != 0:
        raise BundleError(f"pip could not download the pip section: {redact(done.stderr_tail(8))}",
                          "check the pip lines and the index; wheels are needed (no source builds offline)")
    return sorted(p for p in dest.iterdir() if p not in before and p.suffix == ".whl")


def write_bundle(out: Path, lock: Lock, *, name: str, selection: dict[str, Any] | None = None,
                 mirror: Mirror | None = None, pip_extra: Sequence[str] = (), python: str | None = None,
                 on_step: Callable[[str], None] | None = None) -> Bundle:
    """A Lock (envkit.lock.file) -> a bundle folder; written beside `out` and renamed into place."""
    start = time.perf_counter()
    out = out.absolute()  # `-o DIR` relative: the staging folder and every archive path inside it agree
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out} exists and is not empty; envkit will not write into it",
                          "choose another -o folder (or remove it first)")
    platform = current_platform() if current_platform() in lock.names() else lock.names()[0]
    entry = lock.platform(platform)
    # create's staging (envkit/prefix/staging.py): locked and marked before it exists, removed on every way out
    # (SIGINT and SIGTERM included) before anything is printed; a SIGKILL's is swept by the next bundle here
    with interrupting(), staging_beside(out) as held:
        staging = held.folder
        step = on_step or (lambda _text: None)
        step(f"fetching {len(entry.conda)} conda archives")
        # every destination is confined to the staging folder: a lock's subdir or file name is never a path
        items = [(c.url, confined(staging, f"conda/{c.platform_subdir}/{c.filename}", what="archive path",
                                  must_exist=False, hint="the lock is damaged or hostile: lock again"))
                 for c in entry.conda]
        _fetch_conda(items, lock.channels, mirror)
        files: list[BundleFile] = []
        local_conda: list[LockedConda] = []
        for pkg, (_url, dest) in zip(entry.conda, items):
            found = sha256_of(dest)
            if pkg.sha256 and found != pkg.sha256:
                raise BundleError(f"{pkg.filename} from {pkg.url}: sha256 {found[:16]}... differs from the lock's "
                                  f"{pkg.sha256[:16]}...", "the channel republished it: lock again, then bundle")
            rel = dest.relative_to(staging).as_posix()
            files.append(BundleFile(rel, found, dest.stat().st_size, clean_url(pkg.url), "conda"))
            local_conda.append(replace(pkg, url=rel, sha256=found, channel=clean_url(pkg.channel_url),
                                       subdir=pkg.platform_subdir))
        pypi: list[LockedPypi] = []
        lines = [f"--index-url {lock.indexes[0]}"] + [f"--extra-index-url {i}" for i in lock.indexes[1:]] \
            if entry.pypi and lock.indexes else []
        if mirror is not None and mirror.pypi:  # behind the mirror, PyPI is the mirror's (as create applies it)
            lines = [line.replace(PYPI_SIMPLE, mirror.pypi.rstrip("/")) if line.endswith(PYPI_SIMPLE) else line
                     for line in lines]
            if not any(line.startswith(("--index-url", "-i ")) for line in [*lines, *pip_extra]):
                lines.insert(0, f"--index-url {mirror.pypi}")
        lines += [p.requirement() for p in entry.pypi] + list(pip_extra)
        if entry.pypi or pip_extra:
            step("downloading the pip wheels")
            # a lock lists the whole closure (--no-deps); a spec's pip section brings its dependencies
            for wheel in _pip_download(lines, staging / "wheels", python, no_deps=bool(entry.pypi)):
                match = _WHEEL.match(wheel.name)
                if not match:
                    continue
                rel = wheel.relative_to(staging).as_posix()
                found = sha256_of(wheel)
                files.append(BundleFile(rel, found, wheel.stat().st_size, wheel.name, "wheel"))
                pypi.append(LockedPypi(match.group("name").replace("_", "-"), match.group("version"), rel, found))
        local = Lock(channels=lock.channels, platforms=(LockedPlatform(platform, tuple(local_conda), tuple(pypi)),),
                     variables=lock.variables)
        write_lock(local, staging / LOCAL_LOCK, version=7)
        # a lock keeps its own PyPI entries; a spec's pip section is known only by its wheels (relative paths)
        source_entry = entry if entry.pypi or not pypi else replace(entry, pypi=tuple(pypi))
        source = Lock(channels=lock.channels, platforms=(source_entry,), indexes=lock.indexes,
                      variables=lock.variables)
        write_lock(source, staging / SOURCE_LOCK, version=6)
        bundle = Bundle(out, name, platform, tuple(files), selection,
                        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.perf_counter() - start)
        (staging / MANIFEST).write_text(json.dumps(bundle.to_json(), indent=1) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()  # empty (checked above)
        staging.rename(out)
    return bundle


def resolve_mirror(mirror: str | None) -> Mirror | None:
    """--mirror NAME|URL -> the Mirror profile (credentials in a URL go to the vault, as create does)."""
    profile = mirrors.resolve(mirror, load_file_config().data)
    if profile is not None and mirror and "://" in mirror:
        VAULT.split(mirror)
    return profile


def bundle_from_lock(lock_file: Path, out: Path, *, name: str | None = None, mirror: str | None = None) -> Bundle:
    lock = read_lock(lock_file)
    python = _python_of(lock)
    return write_bundle(out, lock, name=name or lock_file.stem, mirror=resolve_mirror(mirror), python=python)


def bundle_from_env(prefix: Path, out: Path, *, mirror: str | None = None) -> Bundle:
    """An existing env: its exact package set (export --format lock: canonical URLs), then its archives,
    through `mirror` when given."""
    exported = export_env(prefix, fmt="lock")
    lock = parse_lock(exported.text, f"the lock of {prefix}")
    return write_bundle(out, lock, name=prefix.name, mirror=resolve_mirror(mirror), python=_python_of(lock))


def env_file_name(path: Path) -> str:
    """`bundle --file ENV.yml` without NAME: the file's `name:` (else the file's stem), as conda env create
    names an env from its file."""
    from envkit.safeio import load_yaml

    data = load_yaml(path, "environment file")
    name = data.get("name") if isinstance(data, dict) else None
    return str(name) if isinstance(name, str) and name.strip() else path.stem


def bundle_from_spec(opts: CreateOptions, out: Path, on_step: Callable[[str], None] | None = None) -> Bundle:
    """Render + solve (once, no install) for `opts` (a CreateOptions, dry_run implied), then bundle."""
    import yaml

    (on_step or (lambda _t: None))("solving")
    plan = create_env(replace(opts, dry_run=True))
    conda = tuple(LockedConda(url=p.url, sha256=p.sha256, size=p.size, depends=p.depends, subdir=p.subdir,
                              build_number=p.build_number, channel=p.channel) for p in plan.packages)
    try:
        data = yaml.safe_load(plan.env_file) or {}
    except yaml.YAMLError:
        data = {}
    variables = tuple(sorted((str(k), str(v)) for k, v in (data.get("variables") or {}).items()))
    channels = tuple(dict.fromkeys(p.channel for p in plan.packages if p.channel))
    subdir = next((p.subdir for p in plan.packages if p.subdir != "noarch"), "linux-64")
    lock = Lock(channels=channels, platforms=(LockedPlatform(subdir, conda),), variables=variables)
    mirror = resolve_mirror(opts.mirror)
    python = plan.selection.python if plan.selection else _python_of(lock)
    return write_bundle(out, lock, name=opts.name, selection=plan.selection.to_json() if plan.selection else None,
                        mirror=mirror, pip_extra=plan.pip_lines, python=python, on_step=on_step)


def _python_of(lock: Lock) -> str | None:
    for entry in lock.platforms:
        for pkg in entry.conda:
            if pkg.name == "python":
                return ".".join(pkg.version.split(".")[:2])
    return None


# -- reading ------------------------------------------------------------------------------------
_COPY_HINT = "copy the whole bundle folder again, or rebuild it (envkit bundle NAME -o DIR)"


def load_bundle(root: Path, *, check: bool = True) -> Bundle:
    """Read the manifest and (by default) check every file's size and sha256; name the first bad one.

    Every entry is validated as it is read: its path relative and inside the bundle (fsutil.confined),
    its sha256 64 hex digits and not all zeros (a bundle without a hash for a file is no bundle), its
    size a whole non-negative number, its kind conda or wheel, its URL without credentials."""
    path = root / MANIFEST
    from envkit.errors import InputError
    from envkit.safeio import load_json

    try:
        if not path.exists() and not path.is_symlink():
            raise FileNotFoundError(path)
        data = load_json(path, "bundle manifest")  # bounded: a FIFO, device or huge manifest is named, not read
        if not isinstance(data, dict) or not isinstance(data.get("files"), list):
            raise ValueError("no list of files")
        files = tuple(_manifest_entry(root, i, f) for i, f in enumerate(data["files"]))
        for key in ("conda_packages", "wheels", "bytes"):
            number(data.get(key), key, f"{path}")
    except FileNotFoundError as exc:
        if not root.exists():
            raise BundleError(f"the bundle folder {root} does not exist",
                              "give the folder `envkit bundle ... -o DIR` wrote (copied to this machine)") from exc
        raise BundleError(f"{root} is not an envkit bundle (no {MANIFEST})",
                          "make one on a machine with network: envkit bundle NAME -o DIR") from exc
    except (InputError, BundleError, PathError):
        raise
    except LockError as exc:
        raise BundleError(exc.message, _COPY_HINT) from None
    except (OSError, ValueError, KeyError, TypeError, OverflowError) as exc:
        raise BundleError(f"{path} is unreadable or malformed: {exc}", "copy the bundle again") from exc
    if data.get("format") != FORMAT:
        raise BundleError(f"{root} is bundle format {str(data.get('format'))[:20]}; this envkit reads format {FORMAT}",
                          "make the bundle with the same envkit version")
    seen: set[str] = set()
    for item in files:
        if item.path in seen:
            raise BundleError(f"{MANIFEST} lists {item.path} twice", _COPY_HINT)
        seen.add(item.path)
    selection = data.get("selection")
    bundle = Bundle(root, str(data.get("name") or root.name), str(data.get("platform") or ""), files,
                    selection if isinstance(selection, dict) else None, str(data.get("created") or ""))
    if check:
        check_files(bundle)
    return bundle


def _manifest_entry(root: Path, index: int, item: Any) -> BundleFile:
    if not isinstance(item, dict):
        raise BundleError(f"{MANIFEST}: files[{index}] is not an object", _COPY_HINT)
    rel = item.get("path")
    if not isinstance(rel, str):
        raise BundleError(f"{MANIFEST}: files[{index}] has no path", _COPY_HINT)
    where = f"{MANIFEST}: {rel[:120]}"
    confined(root, rel, what=f"{MANIFEST} path", must_exist=False, hint=_COPY_HINT)
    sha = digest(item.get("sha256"), "sha256", where, zeros=False)
    size = number(item.get("size"), "size", where)
    if sha is None or size is None:
        raise BundleError(f"{where} has no {'sha256' if sha is None else 'size'}; every file of a bundle is listed "
                          "with both", _COPY_HINT)
    kind = str(item.get("kind") or "conda")
    if kind not in _KINDS:
        raise BundleError(f"{where}: kind {kind[:20]!r} is neither conda nor wheel", _COPY_HINT)
    return BundleFile(rel, sha, size, clean_url(str(item.get("url") or "")), kind)


def check_files(bundle: Bundle) -> None:
    """Each listed file: inside the bundle (no symlink out), a regular file, its size and sha256 as listed."""
    for item in bundle.files:
        path = _member(bundle.root, item)
        size = path.stat().st_size
        found = sha256_of(path) if size == item.size else None
        if found != item.sha256:
            raise _corrupt(bundle, item, f"sha256 {found[:16]}..." if found else f"{size} bytes")


def _member(root: Path, item: BundleFile) -> Path:
    path = confined(root, item.path, what=f"{MANIFEST} path", must_exist=False, hint=_COPY_HINT)
    if not os.path.lexists(path):
        raise BundleError(f"the bundle lacks {item.path} (listed in {MANIFEST})", "copy the whole bundle folder again")
    return confined(root, item.path, what=f"{MANIFEST} path", hint=_COPY_HINT)


def _corrupt(bundle: Bundle, item: BundleFile, found: str) -> BundleError:
    return BundleError(f"corrupt bundle file {item.path}: {found}, but {MANIFEST} says "
                       f"sha256 {item.sha256[:16]}... ({item.size} bytes); nothing was installed",
                       f"copy the bundle again, or rebuild it (envkit bundle {bundle.name} -o DIR)")


def matching_lock(bundle: Bundle) -> Lock:
    """The bundle's envkit.lock, checked entry for entry against bundle.json: the same conda archives and
    wheels, each a path inside the bundle, with the manifest's sha256. A lock entry pointing outside the
    bundle, one the manifest does not list (or the other way round), or a hash that differs is refused:
    the manifest is what was checked, so the lock may install nothing else."""
    real = confined(bundle.root, LOCAL_LOCK, what="bundle lock", hint=_COPY_HINT)
    lock = read_lock(real)
    if len(lock.platforms) != 1:
        raise BundleError(f"{LOCAL_LOCK} of {bundle.root} lists {len(lock.platforms)} platforms; a bundle holds one",
                          _COPY_HINT)
    entry = lock.platforms[0]
    base = Path(os.path.realpath(bundle.root))
    listed = {f.path: f for f in bundle.files}
    used: dict[str, str] = {}
    for url, sha, kind in [*((c.url, c.sha256, "conda") for c in entry.conda),
                           *((p.url, p.sha256, "wheel") for p in entry.pypi)]:
        local = file_path(url)
        try:
            rel = Path(os.path.normpath(local)).relative_to(base).as_posix() if local is not None else None
        except ValueError:
            rel = None
        if rel is None or local is None or not os.path.normpath(local) == str(local).rstrip("/") \
                or rel not in listed:
            raise BundleError(f"{LOCAL_LOCK} of {bundle.root} names {redact(url)[:200]}, which is not a file "
                              f"{MANIFEST} lists inside the bundle; nothing was installed", _COPY_HINT)
        item = listed[rel]
        if item.kind != kind or sha != item.sha256:
            raise BundleError(f"{LOCAL_LOCK} and {MANIFEST} of {bundle.root} disagree about {rel} "
                              f"({kind} sha256 {str(sha)[:16]}... vs {item.kind} {item.sha256[:16]}...); "
                              "nothing was installed", _COPY_HINT)
        if rel in used:
            raise BundleError(f"{LOCAL_LOCK} of {bundle.root} lists {rel} twice", _COPY_HINT)
        used[rel] = kind
    missing = sorted(set(listed) - set(used))
    if missing:
        raise BundleError(f"{MANIFEST} of {bundle.root} lists {missing[0]}"
                          + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
                          + f", which {LOCAL_LOCK} does not install; nothing was installed", _COPY_HINT)
    return lock


@contextmanager
def private_copy(bundle: Bundle) -> Iterator[Bundle]:
    """The bundle copied into a folder only envkit writes (0700, under envkit's cache, removed on the way
    out): each file hashed while it is copied and compared with bundle.json, and the lock rewritten to
    point at the copies. The install reads only these copies, so swapping an archive in the bundle after
    it was checked changes nothing: what was hashed is what is installed."""
    import tempfile

    lock = matching_lock(bundle)
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    private = Path(tempfile.mkdtemp(prefix=".envkit-bundle-copy.", dir=cache))  # mkdtemp: mode 0700, ours
    remove_at_exit(private)
    try:
        for item in bundle.files:
            source = _member(bundle.root, item)
            dest = private / item.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            size = source.stat().st_size
            if size != item.size or size > ARCHIVE_LIMIT:
                raise _corrupt(bundle, item, f"{size} bytes")
            # the copy stops at the listed size: a file that grows meanwhile is refused, not read on and on
            found = copy_regular(source, dest, limit=item.size, what=f"bundle file {item.path}", hint=_COPY_HINT)
            if found != item.sha256:
                raise _corrupt(bundle, item, f"sha256 {found[:16]}...")
        entry = lock.platforms[0]
        base = Path(os.path.realpath(bundle.root))

        def rel(url: str) -> str:
            local = file_path(url)
            assert local is not None  # matching_lock checked it
            return Path(os.path.normpath(local)).relative_to(base).as_posix()

        copied = replace(lock, platforms=(replace(
            entry, conda=tuple(replace(c, url=rel(c.url)) for c in entry.conda),
            pypi=tuple(replace(p, url=rel(p.url)) for p in entry.pypi)),))
        write_lock(copied, private / LOCAL_LOCK, version=7)
        yield replace(bundle, root=private)
    finally:
        shutil.rmtree(private, ignore_errors=True)


@contextmanager
def offline_pip(bundle: Bundle) -> Iterator[None]:
    """pip sees only the bundle's wheels: PIP_NO_INDEX + PIP_FIND_LINKS (pip's own variables)."""
    saved = {k: os.environ.get(k) for k in ("PIP_NO_INDEX", "PIP_FIND_LINKS")}
    os.environ["PIP_NO_INDEX"] = "1"
    os.environ["PIP_FIND_LINKS"] = str(bundle.root / "wheels")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def restore_urls(prefix: Path, bundle: Bundle) -> None:
    """Installed records name the archive's original URL (as a networked create would), not the bundle."""
    from envkit.prefix.records import conda_records, write_record

    origin = {bundle.root.joinpath(f.path).absolute().as_uri(): f.url for f in bundle.files if f.kind == "conda"}
    for record, data in conda_records(prefix):
        url = str(data.get("url") or "")
        if url not in origin:
            continue
        # The one "url" member is swapped in rattler's own text: re-encoding the whole record (its file
        # list is most of it) cost more than the install of a small package. Anything unexpected (the
        # member spelt another way, or twice) falls back to writing the parsed record.
        text = record.read_text(encoding="utf-8")
        needle = f'"url": {json.dumps(url)}'
        if text.count(needle) == 1:
            text = text.replace(needle, f'"url": {json.dumps(origin[url])}')
        else:
            data["url"] = origin[url]
            text = json.dumps(data, indent=2) + "\n"
        write_record(record, text)


def create_from_bundle(opts: CreateOptions, bundle: Bundle, *, progress: Progress | None = None,
                       on_line: Callable[[str], None] | None = None) -> CreateResult:
    """`envkit create NAME --bundle DIR`: the bundle's lock, installed with no channel, mirror or index,
    from a private copy of exactly what bundle.json lists (private_copy)."""
    if opts.file is not None:
        raise UsageError("--bundle brings its own package set: drop --file", f"envkit create {opts.name} --bundle DIR")
    with private_copy(bundle) as copy:
        opts = replace(opts, lock=copy.lock_path, mirror=None, channels=(), spec=None)
        with offline_pip(copy):
            result = create_env(opts, progress=progress, on_line=on_line)
        if not opts.dry_run:
            restore_urls(result.prefix, copy)
    return result
