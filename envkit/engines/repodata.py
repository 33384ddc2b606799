"""Reading the live catalogue: conda repodata through py-rattler's gateway, wheel index project pages
through PEP 691 JSON (PEP 503 HTML as fallback), and envkit's cache of the last one read.

I/O lives here; what the records mean is envkit/compat/catalogue.py (pure). Policy:
- `auto`: a catalogue cached less than CACHE_FRESH_S ago is used as is; otherwise it is read now; when
  that fails, the last cached one (any age), else the static data -- and the reasons say which;
- `offline` (--offline, ENVKIT_OFFLINE=1): the cached one or the static data, no network;
- `refresh` (--refresh): read now even when the cache is fresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from envkit.compat.catalogue import CONDA_NAMES, PIP_NAMES, Catalogue, Record, now_iso, python_of
from envkit.config import cache_dir, load_file_config
from envkit.errors import EnvkitError
from envkit.fsutil import atomic_write_text
from envkit.render.mirrors import Mirror
from envkit.secrets import VAULT, bearer_from_env, redact

MODES = ("auto", "offline", "refresh")
CACHE_FRESH_S = 6 * 3600  # repodata of the torch family changes a few times a month
FAILED_RETRY_S = 600  # after a failed read, `auto` does not try the network again for this long
READ_TIMEOUT_S = 20
PYTORCH_INDEX = "https://download.pytorch.org/whl"
PIP_VARIANTS = ("cpu", "cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132")
DEFAULT_CHANNELS = {"conda-forge": ("conda-forge",), "pytorch": ("pytorch",)}


@dataclass(frozen=True)
class Obtained:
    """The catalogue selection may use (None: static data) and the first reason to print."""

    catalogue: Catalogue | None
    note: str


def mode_from(offline: bool = False, refresh: bool = False) -> str:
    if offline:
        return "offline"
    if refresh:
        return "refresh"
    return "offline" if os.environ.get("ENVKIT_OFFLINE", "").strip() not in ("", "0", "false", "no") else "auto"


# -- cache ------------------------------------------------------------------------------------------
def _cache_file(cache_root: Path, flavor: str, key: str) -> Path:
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root / "catalogue" / f"{flavor}-{digest}.json"


def load_cached(path: Path) -> Catalogue | None:
    try:
        return Catalogue.from_json(json.loads(path.read_text(encoding="utf-8")), cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(path: Path, catalogue: Catalogue) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(catalogue.to_json(), separators=(",", ":")))


def _age_s(catalogue: Catalogue) -> float:
    from datetime import datetime, timezone

    return (datetime.now(timezone.utc) - catalogue.read_time()).total_seconds()


def _recently_failed(path: Path) -> bool:
    import time

    marker = path.with_suffix(".failed")
    try:
        return time.time() - marker.stat().st_mtime < FAILED_RETRY_S
    except OSError:
        return False


def _mark_failed(path: Path, failed: bool) -> None:
    marker = path.with_suffix(".failed")
    try:
        if failed:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("")
        else:
            marker.unlink(missing_ok=True)
    except OSError:
        pass


# -- the policy ---------------------------------------------------------------------------------------
def obtain(flavor: str, *, mode: str = "auto", mirror: Mirror | None = None, mirror_value: str | None = None,
           channels: tuple[str, ...] = (), index_base: str | None = None, cache_root: Path | None = None,
           platform: str = "linux-64") -> Obtained:
    """The catalogue for one flavor under the policy `mode`; never raises for network trouble."""
    if mode == "auto":
        mode = mode_from()  # ENVKIT_OFFLINE=1 turns the default into --offline
    root = cache_root or cache_dir()
    if flavor == "pip":
        base = (index_base or PYTORCH_INDEX).rstrip("/")
        key = f"pip|{redact(base)}"

        def read() -> Catalogue:
            return read_pip(base)
    else:
        chans = channels or DEFAULT_CHANNELS[flavor]
        key = f"{flavor}|{','.join(redact(c) for c in chans)}|{mirror.title if mirror else ''}|{platform}"

        def read() -> Catalogue:
            return read_conda(flavor, chans, mirror=mirror, mirror_value=mirror_value, cache_root=root,
                              platform=platform)
    path = _cache_file(root, flavor, key)
    cached = load_cached(path)
    if mode == "offline":
        if cached is not None:
            return Obtained(cached, cached.describe() + "; --offline/ENVKIT_OFFLINE: not re-read")
        return Obtained(None, "static data (no catalogue available: offline)")
    if mode == "auto" and cached is not None and _age_s(cached) < CACHE_FRESH_S:
        return Obtained(cached, cached.describe())
    if mode == "auto" and _recently_failed(path):
        if cached is not None:
            return Obtained(cached, cached.describe() + "; the last read failed less than 10 min ago")
        return Obtained(None, "static data (no catalogue available: the last read failed less than 10 min ago; "
                              "--refresh retries now)")
    try:
        fresh = read()
    except (CatalogueError, EnvkitError) as exc:
        _mark_failed(path, True)
        why = exc.message if isinstance(exc, EnvkitError) else str(exc)  # the reason, not the error's fix line
        if cached is not None:
            return Obtained(cached, f"{cached.describe()}; reading it again failed: {why}")
        return Obtained(None, f"static data (no catalogue available: {why})")
    save(path, fresh)
    _mark_failed(path, False)
    return Obtained(fresh, fresh.describe())


class CatalogueError(Exception):
    """A catalogue could not be read (network, mirror, parse); the caller falls back."""


# -- conda: py-rattler's gateway restricted to the torch family --------------------------------------
def _source_text(names: tuple[str, ...], mirror: Mirror | None) -> str:
    shown = ", ".join(redact(n) for n in names)
    if mirror is None:
        return shown
    return f"{shown} via {mirror.name if mirror.name != 'custom' else mirror.title}"


def read_conda(flavor: str, channels: tuple[str, ...], *, mirror: Mirror | None = None,
               mirror_value: str | None = None, cache_root: Path, platform: str = "linux-64",
               names: tuple[str, ...] = CONDA_NAMES) -> Catalogue:
    """Repodata records of the torch family on `platform` + noarch, through the mirror and credentials
    the solve itself uses (same client, same repodata cache)."""
    from envkit.engines.rattler_engine import EngineSettings, RattlerEngine

    if mirror is not None:
        if mirror_value and "://" in mirror_value:
            VAULT.split(mirror_value)  # user:pass@ -> a header, /t/<token>/ -> a request-time rewrite
        first = next(iter(mirror.conda.values()), "")
        bearer_from_env(urlsplit(first).hostname or "")
    # the same repodata, cache and sharded fetch the solve uses (rattler_engine.RattlerEngine.solve)
    settings = EngineSettings(channels=channels, cache_dir=cache_root, mirror=mirror, platform=platform,
                              retries=0, timeout_s=READ_TIMEOUT_S,
                              sharded=bool(load_file_config().get("sharded_repodata", True)))
    engine = RattlerEngine(settings)
    try:
        raw = engine.query(names)
    except Exception as exc:  # GatewayError and friends: the caller falls back to the cache or static data
        where = ", ".join(redact(engine.source_shown(u)) for u in engine.sources)
        raise CatalogueError(f"cannot read {where}: {_short(redact(str(exc)))}") from None
    records = tuple(Record(
        name=r.name.normalized, version=str(r.version), build=str(r.build), subdir=str(r.subdir),
        python=python_of(str(r.build), [str(d) for d in r.depends]) if str(r.subdir) != "noarch" else None,
        depends=tuple(str(d) for d in r.depends)) for r in raw)
    return Catalogue(flavor=flavor, source=_source_text(channels, mirror),
                     urls=tuple(redact(u) for u in engine.sources), read_at=now_iso(), records=records,
                     platform=platform)


def _short(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    reason = (lines[-1] if lines else "unknown error").removeprefix("Caused by:").strip()
    reason = re.sub(r"^error sending request(?: for url \([^)]*\))?:?\s*(Caused by:\s*)?", "", reason)
    return reason[:300] or "unknown error"


# -- pip: PEP 691 JSON, PEP 503 HTML fallback -------------------------------------------------------
_WHEEL = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-(?P<py>[^-]+)-(?P<abi>[^-]+)"
                    r"-(?P<plat>[^-]+)\.whl$")


def _fetch(url: str) -> tuple[str, str]:
    """(content type, body) of an index page; credentials from the vault as headers."""
    import urllib.request

    real = VAULT.with_token(url)
    request = urllib.request.Request(real, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
        **(VAULT.headers_for(urlsplit(real).hostname or "") or {})})
    with urllib.request.urlopen(request, timeout=READ_TIMEOUT_S) as response:  # noqa: S310 - http(s) only
        return response.headers.get("Content-Type", ""), response.read().decode("utf-8", "replace")


def parse_project_page(content_type: str, body: str) -> list[str]:
    """File names on a PEP 691 JSON or PEP 503 HTML project page; ValueError for a page that is neither."""
    if "json" in content_type:
        page = json.loads(body)
        if not isinstance(page, dict):
            raise ValueError("not a PEP 691 project page")
        # PEP 691: a client must refuse a major api-version it does not know (minor ones only add keys)
        meta = page.get("meta")
        version = str(meta.get("api-version", "1.0") if isinstance(meta, dict) else "1.0")
        if version.split(".")[0] != "1":
            raise ValueError(f"PEP 691 api-version {version} (envkit reads 1.x)")
        entries = page.get("files")
        if not isinstance(entries, list):
            return []
        return [str(f.get("filename", "")) for f in entries if isinstance(f, dict)]
    import html.parser

    files: list[str] = []

    class Links(html.parser.HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "a":
                href = dict(attrs).get("href") or ""
                files.append(unquote(href.split("#", 1)[0].rsplit("/", 1)[-1]))  # %2B is the '+' of +cu130

    Links().feed(body)
    return files


def wheel_record(filename: str, variant: str) -> Record | None:
    """torch-2.14.0+cu130-cp312-cp312-manylinux_2_28_x86_64.whl -> a Record (linux x86_64 only)."""
    match = _WHEEL.match(filename)
    if match is None:
        return None
    plat = match.group("plat")
    if plat != "any" and not ("linux" in plat and "x86_64" in plat):
        return None
    public, _, local = match.group("version").partition("+")
    py = match.group("py")
    found = re.match(r"^cp3(\d{1,2})$", py)
    python = f"3.{found.group(1)}" + ("t" if match.group("abi").endswith("t") else "") if found else None
    name = match.group("name").lower().replace("_", "-")
    return Record(name=name, version=public, build=local or variant, subdir=variant, python=python)


def read_pip(base: str, variants: tuple[str, ...] = PIP_VARIANTS) -> Catalogue:
    """<base>/<variant>/<project>/ for torch, torchvision, torchaudio (in parallel; a missing page = none)."""
    import urllib.error
    from concurrent.futures import ThreadPoolExecutor

    if "://" in base:
        base = VAULT.split(base).rstrip("/")
    jobs = [(v, p) for v in variants for p in PIP_NAMES]
    errors: list[str] = []

    def one(job: tuple[str, str]) -> list[Record]:
        variant, project = job
        url = f"{base}/{variant}/{project}/"
        try:
            ctype, body = _fetch(url)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            errors.append(f"{redact(url)}: HTTP {exc.code}")
            return []
        except (urllib.error.URLError, OSError) as exc:
            errors.append(f"{redact(url)}: {getattr(exc, 'reason', exc)}")
            return []
        try:
            names = parse_project_page(ctype, body)
        except ValueError as exc:  # a broken page counts as unread, like an HTTP error
            errors.append(f"{redact(url)}: unreadable index page ({exc})")
            return []
        out = []
        for name in names:
            record = wheel_record(name, variant)
            if record is not None and record.name == project:
                out.append(record)
        return out

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, jobs))
    if errors and len(errors) == len(jobs):
        raise CatalogueError(errors[0])
    records = tuple(r for group in results for r in group)
    if not records:
        raise CatalogueError(f"{redact(base)} lists no torch wheels" + (f" ({errors[0]})" if errors else ""))
    host = urlsplit(base).netloc + urlsplit(base).path
    return Catalogue(flavor="pip", source=redact(host), urls=(redact(base),), read_at=now_iso(), records=records,
                     platform="linux-64")

