"""Mirror profiles: built-in (mirrors.yaml), from the config file (`mirrors:`), or a custom URL.

A custom `--mirror https://host/path` uses the documented layout `<URL>/<channel>` for conda
channels (`<URL>/pkgs/main`, `<URL>/pkgs/free` for Anaconda's) and `<URL>/pypi/simple` for PyPI.
Credentials in a mirror URL (user:pass@, /t/<token>/) are never written into a rendered file: they
are split off and handed to the engine as auth (see `secrets.py`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from envkit.errors import MirrorError
from envkit.safeio import load_packaged_yaml

DATA = Path(__file__).with_name("mirrors.yaml")
_TOKEN_RE = re.compile(r"/t/[^/]+(?=/|$)")


@dataclass(frozen=True)
class Mirror:
    name: str
    title: str
    conda: dict[str, str]  # canonical channel name -> mirror URL
    missing: tuple[str, ...]
    pypi: str | None
    src: str
    credentials_stripped: bool = False

    def channel_url(self, channel: str) -> str | None:
        return self.conda.get(channel)


@functools.lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return load_packaged_yaml(DATA, "mirror table")


def canonical_urls() -> dict[str, str]:
    return dict(_data()["canonical"])


def builtin_names() -> list[str]:
    return sorted(_data()["profiles"])


def unreachable_hint(mirror: Mirror | None = None, name: str = "NAME") -> str:
    """The fix for a channel that cannot be reached: any mirror URL, the three ways to set it, and the
    offline route (a bundle made on a connected machine) -- one line, for every engine and verb."""
    from envkit.config import config_path

    which = "" if mirror is None else mirror.title if mirror.name == "custom" else f"mirror {mirror.name}"
    lacks = f"is the {which} up, and does it carry this channel? " if which else ""
    return (f"{lacks}check the network (or HTTPS_PROXY); any mirror: --mirror https://your.mirror/conda, "
            f"ENVKIT_MIRROR=URL or 'mirror: URL' in {config_path()} (built-in profiles: "
            f"{', '.join(builtin_names())}); no network here: on a connected machine "
            f"`envkit bundle {name} -o DIR`, copy DIR over, then `envkit create {name} --bundle DIR`")


def _from_row(name: str, row: dict[str, Any]) -> Mirror:
    return Mirror(name=name, title=row.get("title", name), conda={k: v.rstrip("/") for k, v in row["conda"].items()},
                  missing=tuple(row.get("missing") or ()), pypi=row.get("pypi"), src=row.get("src", "config file"))


def strip_credentials(url: str) -> tuple[str, bool]:
    """Remove user:pass@ and /t/<token>/ from a URL; say whether anything was removed."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    path = _TOKEN_RE.sub("", parts.path)
    clean = urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))
    return clean, clean != url


def custom(url: str) -> Mirror:
    if not re.match(r"^(https?|file)://[A-Za-z0-9_.~\-/%@:+\[\]]+\Z", url):
        raise MirrorError(f"--mirror {url!r} is neither a known profile nor an http(s) URL",
                          f"use one of {', '.join(builtin_names())} or a URL such as https://mirror.example/conda")
    clean, stripped = strip_credentials(url.rstrip("/"))
    conda = {name: f"{clean}/{name}" for name in ("conda-forge", "pytorch", "nvidia")}
    conda.update({"main": f"{clean}/pkgs/main", "free": f"{clean}/pkgs/free"})
    return Mirror("custom", f"custom mirror {clean}", conda, (), f"{clean}/pypi/simple",
                  "--mirror URL (layout <URL>/<channel>, <URL>/pypi/simple)", stripped)


def resolve(value: str | None, config: dict[str, Any] | None = None) -> Mirror | None:
    """A profile name (config file first, then built-in) or a URL; None means no mirror."""
    if not value:
        return None
    user = (config or {}).get("mirrors") or {}
    if value in user:
        row = user[value]
        if not isinstance(row, dict) or not isinstance(row.get("conda"), dict):
            raise MirrorError(f"mirror profile {value!r} in the config file needs a 'conda:' mapping",
                              "see README, 'Mirrors'")
        mirror = _from_row(value, row)
        cleaned = {k: strip_credentials(v) for k, v in mirror.conda.items()}
        pypi = strip_credentials(mirror.pypi)[0] if mirror.pypi else None
        return Mirror(mirror.name, mirror.title, {k: v[0] for k, v in cleaned.items()}, mirror.missing, pypi,
                      mirror.src, any(v[1] for v in cleaned.values()))
    profiles = _data()["profiles"]
    if value in profiles:
        return _from_row(value, profiles[value])
    if "://" in value:
        return custom(value)
    raise MirrorError(f"unknown mirror {value!r}",
                      f"use one of {', '.join(builtin_names() + sorted(user))}, or a URL (https://host/path)")


def apply_channels(channels: tuple[str, ...], mirror: Mirror) -> tuple[str, ...]:
    """Canonical channel names -> the mirror's full URLs; a channel it lacks is an error."""
    lacking = [c for c in channels if c in mirror.missing or (mirror.channel_url(c) is None and "://" not in c)]
    if lacking:
        others = [n for n in builtin_names() if all(_data()["profiles"][n]["conda"].get(c) for c in channels)]
        alternatives = (f"use another mirror ({', '.join(others)})" if others else
                        "no built-in mirror carries it: use a custom mirror (--mirror URL)")
        raise MirrorError(
            f"mirror {mirror.name} ({mirror.title}) does not carry the channel(s) {', '.join(lacking)} "
            "that this selection needs",
            f"{alternatives}, or switch to --flavor conda-forge (only needs conda-forge) or --flavor pip")
    return tuple(c if "://" in c else mirror.conda[c] for c in channels)


def canonical_channel(url: str, config: dict[str, Any] | None = None) -> str:
    """A mirror URL (credentials stripped) back to its canonical channel name, when one is known."""
    clean = strip_credentials(url.rstrip("/"))[0]
    for name, canon in canonical_urls().items():
        if clean == canon:
            return name
    profiles = dict(_data()["profiles"])
    profiles.update((config or {}).get("mirrors") or {})
    for row in profiles.values():
        for channel, mirror_url in (row.get("conda") or {}).items():
            base = strip_credentials(str(mirror_url).rstrip("/"))[0]
            if clean == base:
                return channel
    # anaconda.org style hosts and generic mirrors laid out as <base>/<channel>
    match = re.match(r"^https?://conda\.anaconda\.org/([A-Za-z0-9_.\-]+)$", clean)
    if match:
        return match.group(1)
    if clean.startswith(("http://", "https://")):  # a mirror laid out as <base>/<channel>; local paths stay
        for known in ("conda-forge", "pytorch", "nvidia"):
            if clean.endswith("/" + known):
                return known
        if clean.endswith("/pkgs/main"):
            return "main"
    return clean
