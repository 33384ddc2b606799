"""Credentials for mirrors and channels: kept out of URLs, files, logs and error messages.

A URL such as http://user:pass@host/x or https://host/t/<token>/conda-forge is split into a clean
URL (what envkit writes anywhere) and a credential (what reaches the server: a header for basic
auth and bearer tokens, the rewritten request path for conda-style /t/<token>/ channels). Every
message that leaves envkit passes through `redact`.
"""

from __future__ import annotations

import base64
import os
import re
import threading
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit, urlunsplit

_TOKEN_RE = re.compile(r"/t/([^/]+)(?=/|$)")
_REDACTED = "********"


@dataclass
class Vault:
    """The secrets seen in this process, and the per-host headers that carry them."""

    secrets: set[str] = field(default_factory=set)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> headers
    token_urls: dict[str, str] = field(default_factory=dict)  # clean URL -> URL with /t/<token>
    lock: threading.Lock = field(default_factory=threading.Lock)

    def split(self, url: str) -> str:
        """Register any credential in `url`; return the clean URL."""
        parts = urlsplit(url)
        clean_netloc = parts.netloc.rsplit("@", 1)[-1]
        host = (parts.hostname or "").lower()
        if "@" in parts.netloc:
            userinfo = parts.netloc.rsplit("@", 1)[0]
            user, _, password = userinfo.partition(":")
            user, password = unquote(user), unquote(password)
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            with self.lock:
                self.secrets.update(s for s in (password, token, userinfo) if s)
                self.headers.setdefault(host, {})["Authorization"] = f"Basic {token}"
        clean_path = parts.path
        match = _TOKEN_RE.search(parts.path)
        if match:
            with self.lock:
                self.secrets.add(match.group(1))
            clean_path = _TOKEN_RE.sub("", parts.path)
        clean = urlunsplit((parts.scheme, clean_netloc, clean_path, parts.query, ""))
        if match:
            with_token = urlunsplit((parts.scheme, clean_netloc, parts.path, parts.query, ""))
            self.token_urls[clean.rstrip("/")] = with_token.rstrip("/")
        return clean

    def with_token(self, url: str) -> str:
        """The URL a request really goes to: a clean URL under a /t/<token>/ base gets its token back."""
        for clean, tokened in self.token_urls.items():
            if url == clean or url.startswith(clean + "/"):
                return tokened + url[len(clean):]
        return url

    def with_credentials(self, url: str) -> str:
        """The URL with its token path and basic-auth userinfo back (for pip's environment only)."""
        url = self.with_token(url)
        parts = urlsplit(url)
        header = (self.headers_for(parts.hostname or "") or {}).get("Authorization", "")
        if header.startswith("Basic ") and "@" not in parts.netloc:
            userinfo = base64.b64decode(header[6:]).decode()
            user, _, password = userinfo.partition(":")
            netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.netloc}"
            url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        return url

    def add_bearer(self, host: str, token: str) -> None:
        with self.lock:
            self.secrets.add(token)
            self.headers.setdefault(host.lower(), {})["Authorization"] = f"Bearer {token}"

    def headers_for(self, host: str) -> dict[str, str] | None:
        return self.headers.get(host.lower().split(":")[0])

    def redact(self, text: str) -> str:
        out = text
        for secret in sorted(self.secrets, key=len, reverse=True):
            if len(secret) >= 3:
                out = out.replace(secret, _REDACTED)
        out = re.sub(r"(://)[^/@\s]+:[^/@\s]+@", r"\1", out)  # any userinfo left
        return _TOKEN_RE.sub("/t/" + _REDACTED, out)


VAULT = Vault()


def redact(text: str) -> str:
    return VAULT.redact(text)


def bearer_from_env(host: str) -> None:
    """ENVKIT_MIRROR_TOKEN: a bearer token sent to the mirror's host (never written anywhere)."""
    token = os.environ.get("ENVKIT_MIRROR_TOKEN")
    if token:
        VAULT.add_bearer(host, token)
