"""The embedded engine: py-rattler 0.28 (the only module that imports rattler).

Workarounds for what rattler-notes.md measured (§9):
1. exit-time crash after async work -> cli.main leaves through os._exit after flushing;
2. strict spec parsing -> MatchSpec(s, strict=False);
3. requested_specs needs MatchSpec._match_spec;
4. virtual_packages=None means none, detect() ignores CONDA_OVERRIDE_* -> detect with overrides;
5. default clients have no retry and no auth -> one Client with Retry/Mirror/headers middleware;
7. secrets persisted in records -> channels are always clean URLs; mirrors and /t/<token>/ are
   applied by MirrorMiddleware at request time, credentials as headers (secrets.py);
8. file:// packages not hash-checked -> sha256 checked here before linking; an extracted package in
   the cache is checked against its info/paths.json before it is linked (check_cache);
9. no rollback -> create.py installs into a staging prefix with alternative_target_prefix, then renames.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from envkit import __version__
from envkit.engines.base import Built, PlannedPackage
from envkit.engines.cache_sweep import sweep_rattler_temps
from envkit.engines.errtext import condensed
from envkit.errors import EngineError, InputError, os_error_hint
from envkit.fsutil import confined, sha256_of
from envkit.lock.file import Lock, LockedConda, render_lock
from envkit.prefix.condarc import drop_cache_tag
from envkit.prefix.records import record_paths
from envkit.render.mirrors import Mirror, canonical_urls, unreachable_hint
from envkit.safeio import read_text
from envkit.secrets import VAULT, redact

# rattler-notes §4: a short sleep at exit lets rattler's runtime threads settle (0/50 crashes).
atexit.register(time.sleep, 0.1)

ANACONDA_ORG = "https://conda.anaconda.org"


@dataclass
class EngineSettings:
    channels: tuple[str, ...]  # names or URLs, as the environment file lists them
    cache_dir: Path
    mirror: Mirror | None = None
    cuda_override: str | None = None  # None: detect __cuda; "": no __cuda; "12.4": that version
    platform: str = "linux-64"
    virtual_packages: tuple[str, ...] | None = None  # "__cuda=13.0=0", ...: another platform's (envkit lock)
    retries: int = 3
    sharded: bool = True
    timeout_s: int = 120
    parallel_downloads: int = 6  # archives fetched at once (engines/fetch.py); 1 = one after the other


@dataclass
class Progress:
    """Callbacks the CLI turns into rich bars or plain lines; every argument already redacted."""

    phase: Callable[[str], None] = lambda _name: None
    download_total: Callable[[int], None] = lambda _n: None
    download_bytes: Callable[[int], None] = lambda _n: None
    download_kept: Callable[[int], None] = lambda _n: None  # bytes kept from an earlier attempt or run (resumed)
    link_total: Callable[[int], None] = lambda _n: None
    linked: Callable[[str], None] = lambda _name: None


def channel_url(channel: str) -> str:
    """A channel name or URL -> its clean canonical URL (credentials registered in the vault)."""
    if "://" in channel:
        return VAULT.split(channel).rstrip("/")
    if channel.startswith("/"):
        return "file://" + channel.rstrip("/")
    known = canonical_urls()
    return known.get(channel, f"{ANACONDA_ORG}/{channel}").rstrip("/")


@dataclass
class _Reporter:
    """py-rattler's InstallerReporter protocol (structural), forwarding to Progress."""

    progress: Progress
    names: dict[int, str] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    counter: int = 0

    def _next(self) -> int:
        self.counter += 1
        return self.counter

    def on_transaction_start(self, total_operations: int) -> None:
        self.progress.link_total(total_operations)

    def on_transaction_operation_start(self, operation: int) -> None: ...
    def on_transaction_operation_complete(self, operation: int) -> None: ...
    def on_populate_cache_start(self, operation: int, package_name: str) -> int:
        return self._next()

    def on_populate_cache_complete(self, cache_entry: int) -> None: ...
    def on_validate_start(self, cache_entry: int) -> int:
        return self._next()

    def on_validate_complete(self, validate_idx: int) -> None: ...
    def on_download_start(self, cache_entry: int) -> int:
        return self._next()

    def on_download_progress(self, download_idx: int, progress: int, total: int | None) -> None:
        before = self.sizes.get(download_idx, 0)
        self.sizes[download_idx] = progress
        if progress > before:
            self.progress.download_bytes(progress - before)

    def on_download_completed(self, download_idx: int) -> None: ...
    def on_link_start(self, operation: int, package_name: str) -> int:
        idx = self._next()
        self.names[idx] = package_name
        return idx

    def on_link_complete(self, index: int) -> None:
        self.progress.linked(self.names.get(index, ""))

    def on_unlink_start(self, operation: int, package_name: str) -> int:
        return self._next()

    def on_unlink_complete(self, index: int) -> None: ...
    def on_transaction_complete(self) -> None: ...
    def on_post_link_start(self, package_name: str, script_path: str) -> int:
        return self._next()

    def on_post_link_complete(self, index: int, success: bool) -> None: ...
    def on_pre_unlink_start(self, package_name: str, script_path: str) -> int:
        return self._next()

    def on_pre_unlink_complete(self, index: int, success: bool) -> None: ...


class RattlerEngine:
    """Solve and install with py-rattler; synchronous facade over its async API. Implements
    engines.base.Engine: plan() solves, build() links into a staging folder that create moves in."""

    name = "rattler"
    version: str | None = None  # envkit's own py-rattler: create.json records envkit's version
    in_place = False
    whole_file = False  # the pip section, variables and history are envkit's steps after build()
    build_phase = "download+link"
    notes: tuple[str, ...] = ()

    def __init__(self, settings: EngineSettings, progress: Progress | None = None) -> None:
        try:
            import rattler  # noqa: F401 - fail early with a clear message if missing
        except ImportError as exc:  # envkit run from a checkout (PYTHONPATH) on a host without py-rattler
            raise EngineError(f"the embedded engine needs py-rattler, which this Python cannot import ({exc})",
                              "install envkit with its dependencies (./install.sh), or pick --engine conda|mamba|"
                              "micromamba") from exc

        self.settings = settings
        self.progress = progress or Progress()
        self.sources = [channel_url(c) for c in settings.channels]
        self._client: Any = None
        self._records: list[Any] = []
        self._plan: list[PlannedPackage] = []
        self._mirror_map: dict[str, str] = {}
        self._targets: dict[str, str] = {}  # clean source -> where its requests go (mirror, token): never shown
        self._fresh: list[str] = []
        self._prefetched = 0
        self._unpacked: set[str] = set()  # stems prefetch() put into the cache
        self._listing: set[str] | None = None  # names in pkgs/ when the plan was made

    # -- plumbing ---------------------------------------------------------------------------
    def client(self) -> Any:
        if self._client is not None:
            return self._client
        from rattler.networking import AddHeadersMiddleware, AuthenticationMiddleware, Client, MirrorMiddleware
        from rattler.networking import RetryMiddleware

        mirrors: dict[str, list[str]] = {}
        for source in self.sources:
            target = source
            mirror = self.settings.mirror
            if mirror is not None:
                name = next((n for n, u in canonical_urls().items() if u.rstrip("/") == source), None)
                if name is None and source.startswith(ANACONDA_ORG + "/"):
                    name = source[len(ANACONDA_ORG) + 1:]
                if name and mirror.channel_url(name):
                    target = VAULT.split(mirror.conda[name]).rstrip("/")
            target = VAULT.with_token(target)  # conda-style /t/<token>/ goes back in here, and only here
            if target != source:
                mirrors[source] = [target]
                self._mirror_map[source] = redact(target)
                self._targets[source] = target

        def headers(host: str, _path: str) -> dict[str, str] | None:
            return VAULT.headers_for(host)

        middlewares: list[Any] = []
        if mirrors:
            middlewares.append(MirrorMiddleware(mirrors))
        middlewares += [AddHeadersMiddleware(headers), AuthenticationMiddleware(),
                        RetryMiddleware(self.settings.retries)]
        self._client = Client(middlewares, user_agent=f"envkit/{__version__}", timeout=self.settings.timeout_s)
        return self._client

    def virtual_packages(self) -> list[Any]:
        from rattler import BuildString, GenericVirtualPackage, Override, PackageName, Version, VirtualPackage
        from rattler import VirtualPackageOverrides

        if self.settings.virtual_packages is not None:  # a target platform's, not this machine's
            out = []
            for text in self.settings.virtual_packages:
                name, version, build = (text.split("=") + ["0", "0"])[:3]
                out.append(GenericVirtualPackage(PackageName(name), Version(version), BuildString(build)))
            return out
        cuda = self.settings.cuda_override
        try:
            if cuda:
                found = VirtualPackage.detect(VirtualPackageOverrides(cuda=Override.string(cuda)))
            else:
                found = VirtualPackage.detect(VirtualPackageOverrides.from_env())
        except Exception as exc:  # DetectVirtualPackageError: e.g. a malformed CONDA_OVERRIDE_CUDA
            raise EngineError(f"could not detect virtual packages: {exc}",
                              "fix CONDA_OVERRIDE_CUDA (a version like 12.4, or empty for no CUDA)") from exc
        if cuda == "":
            found = [v for v in found if not str(v.into_generic()).startswith("__cuda")]
        return found

    def locked_conda(self) -> list[LockedConda]:
        """The solved records as envkit.lock.file entries (for `envkit lock`)."""
        out = []
        for record in self._records:
            url = str(record.url)
            timestamp = record.timestamp
            out.append(LockedConda(
                url=redact(VAULT.split(url)) if "://" in url else url,
                sha256=record.sha256.hex() if record.sha256 else None, md5=record.md5.hex() if record.md5 else None,
                size=int(record.size) if record.size else None, depends=tuple(str(d) for d in record.depends),
                constrains=tuple(str(c) for c in record.constrains), subdir=str(record.subdir),
                build_number=int(record.build_number), license=str(record.license) if record.license else None,
                timestamp=int(timestamp.timestamp() * 1000) if timestamp else None,
                channel=redact(str(record.channel or "")).rstrip("/")))
        return out

    def describe_virtual_packages(self) -> list[str]:
        return [_vp_text(v) for v in self.virtual_packages()]

    # -- solve ------------------------------------------------------------------------------
    def solve(self, specs: Sequence[str], locked: Sequence[Any] = (),
              requested: Sequence[str] | None = None) -> list[PlannedPackage]:
        """`locked`: records the solver prefers to keep (an env's installed PrefixRecords, for a change);
        `requested`: the specs the records name as asked for, when the solve had more (a change's torch pins)."""
        from rattler import Gateway, MatchSpec, SourceConfig, Subdir
        from rattler.exceptions import InvalidMatchSpecError

        try:
            matchspecs = [MatchSpec(s, strict=False) for s in specs]
        except InvalidMatchSpecError as exc:
            raise EngineError(f"invalid package spec: {exc}", "fix the spec in the environment file") from exc
        gateway = Gateway(cache_dir=self.settings.cache_dir / "repodata", client=self.client(),
                          default_config=SourceConfig(sharded_enabled=self.settings.sharded))
        vps = self.virtual_packages()

        async def go() -> list[Any]:
            import rattler

            return await rattler.solve(sources=self.sources, specs=matchspecs, gateway=gateway,
                                       platforms=[Subdir(self.settings.platform), Subdir("noarch")],
                                       virtual_packages=vps, locked_packages=list(locked) or None)

        self.progress.phase("solve")
        try:
            self._records = asyncio.run(go())
        except Exception as exc:
            raise self._solve_error(exc, vps) from None
        self._specs = list(specs if requested is None else requested)
        self._listing = None
        self._plan = [self._planned(r) for r in self._records]
        return self._plan

    def _solve_error(self, exc: Exception, vps: list[Any]) -> EngineError:
        full = redact(str(exc))
        text = condensed(full, f"solve failed ({type(exc).__name__})")
        kind = type(exc).__name__
        if "__cuda" in full:
            have = next((_vp_text(v) for v in vps if _vp_text(v).startswith("__cuda")), None)
            why = (f"this solve had {have}" if have else
                   "this solve had no __cuda: no NVIDIA driver was detected and no CUDA override was given")
            return EngineError(
                f"the CUDA build cannot be installed: {why}. __cuda is the virtual package for the highest CUDA "
                f"the NVIDIA driver supports; CUDA builds of pytorch require it: {text}",
                "on a machine without a GPU (Docker build, CI) pass --cuda X.Y (or set CONDA_OVERRIDE_CUDA=X.Y) "
                "for the target machine's CUDA, or use --cuda cpu for a CPU build")
        if "__glibc" in full:
            return EngineError(f"a package needs a newer glibc than this system has: {text}",
                               "pick an older release of that package, or set CONDA_OVERRIDE_GLIBC for another host")
        fs_hint = os_error_hint(full)
        if fs_hint is not None:
            return EngineError(f"could not read or write the package cache {self.settings.cache_dir}: {text}",
                               fs_hint)
        if kind == "GatewayError" or "could not find subdir" in full or "failed to fetch" in full.lower():
            return EngineError(f"could not read channel repodata: {text}",
                               unreachable_hint(self.settings.mirror))
        return EngineError(f"the solver found no solution: {text}",
                           "relax the pins named in the error, or run `envkit detect` to see what this machine supports")

    def _planned(self, record: Any) -> PlannedPackage:
        url = str(record.url)
        clean_url = redact(VAULT.split(url)) if "://" in url else url
        cached = self._is_cached(record)
        return PlannedPackage(
            name=record.name.normalized, version=str(record.version), build=str(record.build),
            build_number=int(record.build_number), channel=redact(str(record.channel or "")).rstrip("/"),
            subdir=str(record.subdir), file_name=str(record.file_name), url=clean_url,
            size=int(record.size) if record.size else None,
            sha256=record.sha256.hex() if record.sha256 else None,
            depends=tuple(str(d) for d in record.depends), cached=cached,
        )

    def _is_cached(self, record: Any) -> bool:
        """Whether the cache holds the package, from one listing of pkgs/ per plan (not a stat per record)."""
        if self._listing is None:
            try:
                self._listing = set(os.listdir(self.settings.cache_dir / "pkgs"))
            except OSError:
                self._listing = set()
        return _stem(str(record.file_name)) in self._listing

    # -- recreate without solving ------------------------------------------------------------
    def load_locked(self, locked: Any) -> list[PlannedPackage]:
        """One platform of a lock (envkit.lock.file: v6 or v7, pixi's or envkit's): its records go straight
        to install, no solve and no repodata. The entry is handed to rattler as v7, its own format, so
        fields that v6 leaves to be derived (subdir, channel) are explicit."""
        import tempfile

        from rattler import LockFile

        lock, entry = locked
        single = Lock(channels=lock.channels, platforms=(entry,), environment="default")
        with tempfile.TemporaryDirectory(prefix="envkit-lock-") as tmp:
            path = Path(tmp) / "single.lock"
            path.write_text(render_lock(single, 7), encoding="utf-8")
            try:
                env = LockFile.from_path(path).default_environment()
                assert env is not None  # render_lock always writes the default environment
                platform = next(p for p in env.platforms() if str(p) == entry.name)
                records = list(env.conda_repodata_records_for_platform(platform) or [])
            except Exception as exc:
                raise EngineError(f"cannot use the {entry.name} packages of the lock: {redact(str(exc))}",
                                  "regenerate it with `envkit lock` or `envkit export --format lock`") from exc
        if len(records) != len(entry.conda):
            raise EngineError(f"the lock lists {len(entry.conda)} conda packages for {entry.name}, "
                              f"rattler read {len(records)}", "regenerate the lock")
        self._records = records
        self._specs = [r.name.normalized for r in self._records]
        self._listing = None
        self._plan = [self._planned(r) for r in self._records]
        return self._plan

    def load_explicit(self, path: Path) -> list[PlannedPackage]:
        """An @EXPLICIT list: each URL is looked up in its channel's repodata and its hash checked."""
        from rattler import Channel, Gateway, SourceConfig, Subdir

        urls = []
        for number, line in enumerate(read_text(path, "explicit file").splitlines(), 1):
            line = line.strip()
            if line and not line.startswith(("#", "@")):
                if not re.fullmatch(r"(https?|file)://\S+/[\w-]+/[^/\s#]+(\.conda|\.tar\.bz2)(#\S*)?", line):
                    raise InputError(f"{path}:{number}: {redact(line[:80])!r} is not a package URL "
                                     "(an @EXPLICIT file lists one https://.../<subdir>/<package>.conda per line)",
                                     "fix or delete that line, or export the file again: envkit export NAME "
                                     "--format explicit")
                urls.append(line)
        wanted: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        for raw in urls:
            url, _, fragment = raw.partition("#")
            digest = fragment.split("=", 1)[-1].split(":", 1)[-1] if fragment else None
            base, subdir, file_name = url.rsplit("/", 2)
            wanted.setdefault((base, subdir), []).append((file_name, digest))
        gateway = Gateway(cache_dir=self.settings.cache_dir / "repodata", client=self.client(),
                          default_config=SourceConfig(sharded_enabled=self.settings.sharded))
        records: list[Any] = []

        async def go() -> None:
            for (base, subdir), items in wanted.items():
                names = sorted({re.sub(r"-[^-]+-[^-]+(\.tar\.bz2|\.conda)$", "", f) for f, _ in items})
                result = await gateway.query([Channel(channel_url(base))], [Subdir(subdir)], names, recursive=False)
                by_file = {str(r.file_name): r for group in result for r in group}
                for file_name, digest in items:
                    record = by_file.get(file_name)
                    if record is None:
                        raise EngineError(f"{file_name} is not in the repodata of {redact(base)}/{subdir}",
                                          "the channel changed since the export; export again or use the lock format")
                    have = record.sha256.hex() if record.sha256 else None
                    if digest and len(digest) == 64 and have and have != digest:
                        raise EngineError(f"sha256 of {file_name} in {redact(base)} differs from the explicit file",
                                          "the channel republished the package; export again")
                    records.append(record)

        try:
            asyncio.run(go())
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(f"cannot read the channels of {path}: {redact(str(exc))}",
                              "check that the channels are reachable (or use --mirror)") from exc
        self._records = records
        self._specs = [r.name.normalized for r in records]
        self._listing = None
        self._plan = [self._planned(r) for r in records]
        return self._plan

    # -- install ----------------------------------------------------------------------------
    # -- the Engine contract (engines/base.py) -------------------------------------------------
    def plan(self, specs: Sequence[str]) -> list[PlannedPackage]:
        return self.solve(specs)

    def build(self, target: Path, final: Path, changing: Collection[str] | None = None,
              reinstall: Collection[str] = ()) -> Built:
        """Check the archives and the cache, link the plan into `target` (its paths rewritten for `final`),
        stamp what was extracted, and keep conda from tagging the env folder as a package cache.
        `changing`: the file names a change to an existing env installs (the others are linked already, so
        their archives are neither read nor checked); `reinstall`: package names linked again although installed."""
        notes = self.check_cache(changing)
        self.check_file_hashes(changing)  # only the archives rattler will read: those the cache does not hold
        notes += self.prefetch()
        self.install(target, final, reinstall)
        self.stamp_fresh()
        drop_cache_tag(target)
        return Built(tuple(self._plan), tuple(notes))

    def query(self, names: Sequence[str]) -> list[Any]:
        """The repodata records of `names` on this platform + noarch, not recursive: what the live
        catalogue reads, through the same client, repodata cache and sharded fetch as solve()."""
        from rattler import Channel, Gateway, SourceConfig, Subdir

        gateway = Gateway(cache_dir=self.settings.cache_dir / "repodata", client=self.client(),
                          default_config=SourceConfig(sharded_enabled=self.settings.sharded))

        async def go() -> list[Any]:
            found = await gateway.query([Channel(u) for u in self.sources],
                                        [Subdir(self.settings.platform), Subdir("noarch")], list(names),
                                        recursive=False)
            return [r for group in found for r in group]

        return asyncio.run(go())

    def source_shown(self, url: str) -> str:
        """The channel URL as the user named it (the mirror's, not the canonical one it stands for)."""
        return self._mirror_map.get(url, url)

    def download(self, items: Sequence[tuple[str, Path]], parallel: int = 8) -> None:
        """Download archives as they are (no extraction), resumable and retried (engines/fetch.py), with this
        engine's mirror and credentials; `envkit bundle` carries them to machines without network."""
        from envkit.engines.fetch import Fetcher, Policy

        self.client()  # fills the mirror and token map
        fetcher = Fetcher(Policy(parallel=parallel), on_bytes=self.progress.download_bytes,
                          on_skip=self.progress.download_kept)
        outcomes = fetcher.fetch_all([self._item(url, dest) for url, dest in items])
        left = [o.item for o in outcomes if o.path is None]
        if left:  # credentials or TLS only rattler's client has
            from rattler.package_streaming import download_to_path

            client = self.client()

            async def go() -> None:
                for item in left:
                    url = next(u for u, d in items if d == item.dest)
                    await download_to_path(client, url, item.dest)

            asyncio.run(go())

    def _item(self, url: str, dest: Path, sha256: str | None = None, size: int | None = None) -> Any:
        """What engines/fetch.py needs for one archive: the request URL with the mirror and the /t/<token>/
        applied (as MirrorMiddleware and the vault do for rattler's own requests), the host's headers."""
        from envkit.engines.fetch import Item

        clean = VAULT.split(url) if "://" in url else url
        source = next((s for s in sorted(self._targets, key=len, reverse=True)
                       if clean == s or clean.startswith(s + "/")), None)
        target = self._targets[source] + clean[len(source):] if source else VAULT.with_token(clean)
        host = urlsplit(target).hostname or ""
        headers = tuple(sorted((VAULT.headers_for(host) or {}).items()))
        channel = clean.rsplit("/", 2)[0]
        return Item(url=target, dest=dest, sha256=sha256, size=size, headers=headers, shown=redact(target),
                    channel=redact(channel), mirrored=source is not None and source in self._mirror_map
                    and urlsplit(target).netloc != urlsplit(clean).netloc)

    def prefetch(self) -> list[str]:
        """Fetch the http(s) archives the cache lacks, resumably (engines/fetch.py), and unpack each into
        rattler's package cache as it completes, so rattler.install only links. rattler takes an unpacked
        `pkgs/<name>-<version>-<build>/` folder without its `.lock` file as cached (it writes the lock
        itself; measured with py-rattler 0.28, see tests/integration/test_downloads.py)."""
        fresh = set(self._fresh)
        records = [r for r in self._records if str(r.url).startswith(("http://", "https://"))
                   and _stem(str(r.file_name)) in fresh]
        self._prefetched = 0
        if not records:
            return []
        from envkit.engines.fetch import Fetcher, Policy

        self.client()
        downloads = self.settings.cache_dir / "downloads"
        _sweep_unpacking(downloads)
        by_dest = {}
        items = []
        for record in records:
            item = self._item(str(record.url), downloads / str(record.file_name),
                              record.sha256.hex() if record.sha256 else None,
                              int(record.size) if record.size else None)
            by_dest[item.dest] = record
            items.append(item)
        total = sum(int(r.size or 0) for r in records)
        self.progress.download_total(total)
        self.progress.phase("download")

        def unpack(outcome: Any) -> None:
            self._unpack(outcome.path, by_dest[outcome.item.dest])

        policy = Policy(parallel=self.settings.parallel_downloads, retries=self.settings.retries,
                        timeout_s=float(self.settings.timeout_s))
        pkgs = self.settings.cache_dir / "pkgs"
        fetcher = Fetcher(policy, on_bytes=self.progress.download_bytes, on_skip=self.progress.download_kept,
                          on_done=unpack, have=lambda item: (pkgs / _stem(item.dest.name)).is_dir())
        outcomes = fetcher.fetch_all(items)
        placed = [o for o in outcomes if o.path is not None or o.already]
        self._unpacked = {_stem(o.item.dest.name) for o in placed}
        self._prefetched = sum(o.item.size or 0 for o in placed)
        notes = []
        resumed = [o for o in outcomes if o.resumed and o.path is not None]
        if resumed:
            kept = sum(o.resumed for o in resumed)
            notes.append(f"resumed {len(resumed)} download(s) left by an earlier attempt ({kept / 2**20:.1f} MiB kept)")
        left = [o for o in outcomes if o.path is None and not o.already]
        if left:
            notes.append(f"{len(left)} archive(s) fetched by rattler's own client instead ({left[0].why_left})")
        return notes

    def _unpack(self, archive: Path, record: Any) -> None:
        """Extract a finished, sha256-checked archive into rattler's cache: into a folder of envkit's first
        (downloads/<stem>.unpacking, removed first if an interrupted run left it), then one rename."""
        import shutil

        from rattler.package_streaming import extract

        stem = _stem(str(record.file_name))
        pkgs = self.settings.cache_dir / "pkgs"
        pkgs.mkdir(parents=True, exist_ok=True)
        final = pkgs / stem
        if not final.is_dir():
            work = archive.with_name(archive.name + UNPACKING)
            if work.exists():
                shutil.rmtree(work)
            try:
                sha256, _md5 = extract(archive, work)
            except Exception as exc:
                shutil.rmtree(work, ignore_errors=True)
                archive.unlink(missing_ok=True)
                raise EngineError(f"cannot unpack {record.file_name}: {redact(str(exc))}",
                                  "the archive is damaged; run the same command again to fetch it anew") from None
            if record.sha256 and bytes(sha256) != bytes(record.sha256):  # checked while downloading; free here
                shutil.rmtree(work, ignore_errors=True)
                archive.unlink(missing_ok=True)
                raise EngineError(f"{record.file_name} changed after it was checked", "run the same command again")
            try:
                os.rename(work, final)
            except OSError:  # another install put it there meanwhile
                shutil.rmtree(work, ignore_errors=True)
        archive.unlink(missing_ok=True)

    def check_file_hashes(self, only: Collection[str] | None = None) -> None:
        """rattler does not verify file:// packages (rattler-notes §4): compare sha256 to repodata. Only the
        archives rattler will extract (not in the cache, or evicted by check_cache); a cached package is
        linked from its extracted folder, which check_cache checks against its paths.json instead, so
        hashing its archive again on every create checked nothing rattler reads."""
        fresh = set(self._fresh)
        for record in self._records:
            if only is not None and str(record.file_name) not in only:
                continue
            url = str(record.url)
            if not url.startswith("file://") or not record.sha256 or _stem(str(record.file_name)) not in fresh:
                continue
            path = Path(unquote(urlsplit(url).path))
            # inside its channel folder and a regular file, before anything opens it (a FIFO would block,
            # /dev/zero never end; fsutil.confined)
            path = confined(path.parent.parent, f"{path.parent.name}/{path.name}", what="local archive",
                            hint="a lock or channel names archives inside their channel folder")
            try:
                digest = sha256_of(path)
            except OSError as exc:
                raise EngineError(f"cannot read {record.file_name} from {path.parent}: {exc}",
                                  "check the local channel") from exc
            if digest != record.sha256.hex():
                raise EngineError(
                    f"sha256 mismatch for {record.file_name} in {path.parent}: repodata says "
                    f"{record.sha256.hex()[:16]}..., the file is {digest[:16]}...",
                    "the local channel is corrupt or was changed after indexing: rebuild or re-index it")

    def check_cache(self, only: Collection[str] | None = None) -> list[str]:
        """Evict cached packages whose files no longer match their info/paths.json (size, and sha256
        where recorded), so rattler extracts them again instead of linking a truncated or edited file
        (a hardlinked file edited inside any env edits the cache too). Returns what was evicted."""
        pkgs = self.settings.cache_dir / "pkgs"
        stamps = self.settings.cache_dir / "envkit-verified"
        evicted: list[str] = sweep_rattler_temps(pkgs)
        self._fresh = []
        for record in self._records:
            if only is not None and str(record.file_name) not in only:
                continue
            stem = re.sub(r"(\.tar\.bz2|\.conda)$", "", str(record.file_name))
            entry = pkgs / stem
            if not entry.is_dir():
                self._fresh.append(stem)
                continue
            problem = cache_entry_problem(entry, stamps / f"{stem}.json")
            if problem is None:
                continue
            _evict(entry, stamps / f"{stem}.json")
            self._fresh.append(stem)
            evicted.append(f"the cached {stem} was damaged ({problem}); it is fetched again")
        return evicted

    def stamp_fresh(self) -> None:
        """After install: stamp the entries rattler just extracted, so the next run only stats them."""
        pkgs = self.settings.cache_dir / "pkgs"
        for stem in self._fresh:
            if (pkgs / stem).is_dir():
                cache_entry_problem(pkgs / stem, self.settings.cache_dir / "envkit-verified" / f"{stem}.json",
                                    fresh=True)

    def install(self, staging: Path, final: Path, reinstall: Collection[str] = ()) -> None:
        import rattler
        from rattler import MatchSpec

        requested = [MatchSpec(s, strict=False)._match_spec for s in self._specs]
        reporter = _Reporter(self.progress)
        fetch = set(self._fresh) - self._unpacked  # what rattler itself still fetches
        left = sum(int(r.size or 0) for r in self._records if _stem(str(r.file_name)) in fetch)
        if left or not self._prefetched:
            self.progress.download_total(self._prefetched + left)

        async def go() -> None:
            await rattler.install(self._records, target_prefix=staging, cache_dir=self.settings.cache_dir / "pkgs",
                                  client=self.client(), show_progress=False, reporter=reporter,
                                  requested_specs=requested, alternative_target_prefix=final,
                                  platform=None, reinstall_packages=set(reinstall) or None)

        self.progress.phase("install")
        try:
            asyncio.run(go())
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            raise self._install_error(exc) from None

    def _install_error(self, exc: Exception) -> EngineError:
        text = redact(str(exc))
        line = condensed(text, f"install failed ({type(exc).__name__})")
        pkg = re.search(r"failed to fetch (\S+)", text)
        url = re.search(r"for url \((\S+?)\)", text) or re.search(r"((?:https?|file)://\S+)", text)
        server = ""
        if url:
            parts = urlsplit(url.group(1))
            server = f"{parts.scheme}://{parts.netloc}" if parts.netloc else url.group(1)
        elif pkg:
            server = self._server_of(pkg.group(1))
        what = f"downloading {pkg.group(1)}" if pkg else "installing"
        where = f" from {server}" if server else ""
        cause = line or type(exc).__name__
        if "No space left" in text or "Disk quota exceeded" in text:
            return EngineError(f"{what} failed: the disk is full: {cause}",
                               "free space where the environment and the package cache live (df -h), or use "
                               "--prefix PATH / ENVKIT_CACHE_DIR on a bigger disk")
        return EngineError(f"{what}{where} failed: {cause}",
                           os_error_hint(text) or
                           "nothing was left behind; check the server (or mirror) and run the same command again")


    def _server_of(self, file_name: str) -> str:
        """Where a package was really fetched from (the mirror, when one rewrote its channel)."""
        record = next((r for r in self._records if str(r.file_name) == file_name), None)
        if record is None:
            return ""
        url = redact(str(record.url))
        for source, target in self._mirror_map.items():
            if url.startswith(source):
                url = target + url[len(source):]
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}" if parts.netloc else url


UNPACKING = ".unpacking"  # downloads/<file>.unpacking: an archive being extracted, under downloads/<file>.lock


def _sweep_unpacking(downloads: Path) -> None:
    """Remove extractions an interrupted run left in downloads/ (envkit's own folders: `<file>.unpacking`),
    each only while nobody holds its archive's lock."""
    import shutil

    from envkit.fsutil import Locked, flocked

    try:
        names = [n for n in os.listdir(downloads) if n.endswith(UNPACKING)]
    except OSError:
        return
    for name in names:
        archive = name[:-len(UNPACKING)]
        try:
            with flocked(downloads / f"{archive}.lock", blocking=False):
                shutil.rmtree(downloads / name, ignore_errors=True)
        except Locked:
            continue


def _stem(file_name: str) -> str:
    return re.sub(r"(\.tar\.bz2|\.conda)$", "", file_name)


def _key(info: os.stat_result) -> list[int]:
    return [info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino]


def _unchanged(base: str, files: dict[str, list[int]]) -> bool:
    """The hot loop of a warm create: one lstat per file, compared without building objects."""
    lstat = os.lstat
    for rel, (mode, size, mtime, ino) in files.items():
        info = lstat(base + rel)
        if info.st_size != size or info.st_mtime_ns != mtime or info.st_ino != ino or info.st_mode != mode:
            return False
    return True


def cache_entry_problem(entry: Path, stamp: Path, fresh: bool = False) -> str | None:
    """What is wrong with an extracted package, or None.

    A stamp records (mode, size, mtime, inode) of every path and of info/paths.json after a full
    check; while all of them are unchanged nothing is read or hashed again (the way git's index skips
    unchanged files), so a warm create pays one lstat per file. `fresh`: just extracted by rattler from
    a hash-checked archive, so only sizes are checked before stamping."""
    import json
    import stat as st

    base = str(entry)
    paths_json = os.path.join(base, "info", "paths.json")
    try:
        known = json.loads(stamp.read_text(encoding="utf-8"))
        if isinstance(known, dict) and known.get("paths.json") == _key(os.lstat(paths_json)) and _unchanged(
                base + "/", known["files"]):
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        known = {}
    old_files = known.get("files", {}) if isinstance(known, dict) else {}
    try:
        listing = json.loads(Path(paths_json).read_text(encoding="utf-8"))["paths"]
        paths_key = _key(os.lstat(paths_json))
    except (OSError, ValueError, KeyError, TypeError):
        return "info/paths.json is missing or unreadable"
    seen: dict[str, list[int]] = {}
    for item in listing:
        rel = str(item.get("_path", ""))
        path = os.path.join(base, rel)
        kind = item.get("path_type", "hardlink")
        try:
            info = os.lstat(path)
        except OSError:
            return f"{rel} is missing"
        key = _key(info)
        if kind == "softlink":
            if not st.S_ISLNK(info.st_mode):
                return f"{rel} is not a symlink"
        elif kind == "directory":
            if not st.S_ISDIR(info.st_mode):
                return f"{rel} is not a folder"
        else:
            if not st.S_ISREG(info.st_mode):
                return f"{rel} is not a regular file"
            size = item.get("size_in_bytes")
            if size is not None and info.st_size != int(size):
                return f"{rel} has {info.st_size} bytes, paths.json says {size}"
            digest = item.get("sha256")
            if digest and not fresh and old_files.get(rel) != key:
                try:
                    if sha256_of(Path(path)) != digest:
                        return f"{rel} does not match its sha256 in paths.json"
                except OSError as exc:
                    return f"{rel} is unreadable ({exc.strerror})"
        seen[rel] = key
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f".{stamp.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"paths.json": paths_key, "files": seen}), encoding="utf-8")
        os.replace(tmp, stamp)
    except OSError:
        pass  # no stamp: the next run checks in full again
    return None


def _evict(entry: Path, stamp: Path) -> None:
    """Move a damaged cache entry out of rattler's way (a rename: no half-deleted entry), then delete it."""
    import secrets
    import shutil

    stamp.unlink(missing_ok=True)
    gone = entry.with_name(f".envkit-evicted.{entry.name}.{secrets.token_hex(4)}")
    try:
        os.rename(entry, gone)
    except OSError as exc:
        raise EngineError(f"the cached package {entry} is damaged and could not be moved aside: {exc.strerror}",
                          f"remove it by hand: rm -rf {entry}") from exc
    shutil.rmtree(gone, ignore_errors=True)


def _vp_text(vp: Any) -> str:
    """`__cuda=13.0=0` for a detected VirtualPackage or a GenericVirtualPackage (another platform's)."""
    return str(vp.into_generic()) if hasattr(vp, "into_generic") else str(vp)




def read_prefix_records(prefix: Path) -> list[Any]:
    """PrefixRecords of an environment (rattler has no collect_from_prefix in Python): rattler parses the
    record files itself, records.py says which files they are."""
    from rattler import PrefixRecord

    return [PrefixRecord.from_path(p) for p in record_paths(prefix)]
