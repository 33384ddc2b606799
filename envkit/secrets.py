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
from pathlib import Path
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit, urlunsplit

_TOKEN_RE = re.compile(r"/t/([^/]+)(?=/|$)")
_REDACTED = "********"
REDACTED = _REDACTED  # what a redacted secret reads as in a record (a recorded mirror URL, for one)


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

    def learn(self, value: str) -> None:
        """Remember the credential-looking parts of a value the user gave (a --mirror, an ENVKIT_*
        variable, a config entry), however malformed: a typo'd scheme, no scheme, a space inside."""
        found: list[str] = []
        for piece in {value, *value.split()}:
            at = piece.rfind("@")
            if at > 0:
                userinfo = piece[piece.rfind("/", 0, at) + 1:at]
                user, sep, password = userinfo.partition(":")
                if sep:  # (a password with a space: its pieces too, should a message split it)
                    found += [password, unquote(password), userinfo, *password.split()]
                elif len(user) >= 20:  # a token used as the user name (https://<token>@host)
                    found.append(user)
            if _URLISH_RE.search(piece) and not any(ch.isspace() for ch in piece):
                found += [m.group(1) for m in _TOKEN_ANY_RE.finditer(piece)]
            found += [m.group(2) for m in _QUERY_SECRET_RE.finditer(piece)]
        with self.lock:
            self.secrets.update(s.strip() for s in found if len(s.strip()) >= 3)

    def redact(self, text: str) -> str:
        out = text
        for secret in sorted(self.secrets, key=len, reverse=True):
            if len(secret) >= 3:
                out = out.replace(secret, _REDACTED)
        return redact_patterns(out)


# Credentials recognised without having been seen before, in well-formed and malformed URLs alike.
# (bounded repeats and a start boundary keep every pattern linear: no backtracking blow-up on long lines)
_USERINFO_RE = re.compile(r"(://)([^/\s'\"<>@]{0,512})@")  # any scheme, even a typo'd one
# anaconda.org-style /t/<token>/ in anything URL-like (a '//' earlier in the same word, even with a typo'd
# scheme), or a token-shaped /t/ segment anywhere; a plain folder named t (/scratch/t/envs) is left alone
_TOKEN_ANY_RE = re.compile(r"/t/([^/\s'\"<>]+)(?=[/\s'\"<>]|$)", re.MULTILINE)
_TOKEN_SHAPE_RE = re.compile(r"(?=[^/\s'\"<>]*\d)[\w.-]{20,}")
_WORD_BREAK_RE = re.compile(r"[\s'\"<>]")
_SCHEMEISH_RE = re.compile(r"[A-Za-z][\w+.-]*:/")
_URLISH_RE = re.compile(r"//|^[A-Za-z][\w+.-]*:/")
_BEARER_RE = re.compile(r"\b(Bearer\s+)(?=[\w.~+/=-]*[0-9_-])[\w.~+/=-]{6,}")
_AUTH_HEADER_RE = re.compile(r"(?i)\b(authorization\s*[:=]\s*)(\w+\s+)?[^\s'\",]+")
_QUERY_SECRET_RE = re.compile(r"(?i)([?&;](?:token|access_token|api_key|apikey|key|password|passwd|pass|secret|"
                              r"auth|sig|signature)=)([^&\s'\"<>#]+)")


_USERINFO_STOP = frozenset("/'\"(<=,;@")


def _redact_bare_userinfo(text: str) -> str:
    """user:pass@host with no scheme, or after a typo'd one (htps:user:pass@host): the password goes
    (everything after the first colon of the segment before '@', so a colon in it cannot leak a part).

    Done token by token in plain Python (not one regex), so a long line costs linear time."""
    if "@" not in text or ":" not in text:
        return text
    parts = re.split(r"(\s+)", text)
    for i, token in enumerate(parts):
        if "@" not in token or ":" not in token:
            continue
        out: list[str] = []
        last = 0
        for at in (k for k, ch in enumerate(token) if ch == "@"):
            if at + 1 >= len(token) or not (token[at + 1].isalnum() or token[at + 1] in "_["):
                continue
            start = at
            while start > max(last, at - 768) and token[start - 1] not in _USERINFO_STOP:
                start -= 1
            colon = token.find(":", start, at)
            if start < colon < at - 1:
                out.append(token[last:colon + 1] + _REDACTED)
                last = at
        parts[i] = "".join(out) + token[last:]
    return "".join(parts)


def _drop_userinfo(m: re.Match[str]) -> str:
    """user:pass@ and a token used as the user (https://<token>@host) go; a plain user (ssh://git@) stays."""
    userinfo = m.group(2)
    return m.group(1) if ":" in userinfo or len(userinfo) >= 20 else m.group(0)


def _redact_tokens(text: str) -> str:
    """/t/<token> segments inside URL-like words (linear: bisect over the '//' and word-break positions)."""
    if "/t/" not in text:
        return text
    import bisect

    breaks = [m.start() for m in _WORD_BREAK_RE.finditer(text)]
    slashes = [m.start() for m in re.finditer("//", text)]

    def replace(m: re.Match[str]) -> str:
        at = m.start()
        i = bisect.bisect_left(slashes, at) - 1
        word_start = breaks[bisect.bisect_left(breaks, at) - 1] if breaks and breaks[0] < at else -1
        if (i >= 0 and slashes[i] > word_start) or _SCHEMEISH_RE.match(text, word_start + 1) \
                or _TOKEN_SHAPE_RE.fullmatch(m.group(1)):
            return "/t/" + _REDACTED
        return m.group(0)

    return _TOKEN_ANY_RE.sub(replace, text)


def redact_patterns(text: str) -> str:
    """The shape-based half of redaction: userinfo, /t/<token>, bearer and Authorization values, ?token=."""
    out = _USERINFO_RE.sub(_drop_userinfo, text)
    out = _redact_bare_userinfo(out)
    out = _redact_tokens(out)
    out = _BEARER_RE.sub(lambda m: m.group(1) + _REDACTED, out)
    out = _AUTH_HEADER_RE.sub(lambda m: m.group(1) + (m.group(2) or "") + _REDACTED, out)
    return _QUERY_SECRET_RE.sub(lambda m: m.group(1) + _REDACTED, out)


VAULT = Vault()


def redact(text: str) -> str:
    return VAULT.redact(text)


def learn(value: str | None) -> None:
    if value:
        VAULT.learn(value)


def learn_environment(environ: dict[str, str] | None = None) -> None:
    """ENVKIT_* values (a mirror, an index, a bearer token) are known secrets before anything runs."""
    env = os.environ if environ is None else environ
    for key, value in env.items():
        if key.startswith("ENVKIT_") and value:
            if key == "ENVKIT_MIRROR_TOKEN":
                with VAULT.lock:
                    VAULT.secrets.add(value.strip())
            else:
                VAULT.learn(value)


def bearer_from_env(host: str) -> None:
    """ENVKIT_MIRROR_TOKEN: a bearer token sent to the mirror's host (never written anywhere)."""
    token = os.environ.get("ENVKIT_MIRROR_TOKEN")
    if token:
        VAULT.add_bearer(host, token)


def redact_file(path: Path) -> None:
    """Rewrite a file another tool wrote into an env (pip's direct_url.json) without its credentials."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    clean = redact(text)
    if clean != text:
        path.write_text(clean, encoding="utf-8")
