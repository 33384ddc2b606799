"""A threaded HTTP server on 127.0.0.1 (free port) serving a test bed, with fault injection and auth.

Listen backlog raised to 256: with http.server's default of 5, parallel downloads stall for seconds
(rattler-notes.md, addendum). No conditional responses (never a 304), which keeps clear of the
shards/304 bug (conda/rattler#2719); an open-ended `Range: bytes=N-` gets a 206 with its Content-Range
unless `honour_range` is off (then 200 and the whole body, as a server may answer: RFC 9110 section 14.2).
For the network path (engines/fetch.py, scripts/bench_network.py): `drop_after` closes a connection after
N body bytes, `bucket` rate-limits every connection together (a token bucket: a slow link), and
`bytes_served` counts the body bytes written per path.

A directory holding index.json next to index.html is a "simple" index page (pipindex.py): the answer
is negotiated from the Accept header per PEP 691 (https://peps.python.org/pep-0691/#version-format-selection),
JSON or HTML, unless `offer_json` is off, which makes the server a PEP 503-only one (HTML whatever is asked).
"""

from __future__ import annotations

import base64
import http.server
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class ServerState:
    root: Path
    faults: dict[str, str] = field(default_factory=dict)  # filename suffix -> 404|500|503|truncate|corrupt|slow
    fault_budget: dict[str, int] = field(default_factory=dict)  # suffix -> times left (absent: always)
    auth: str | None = None  # None | basic | token | bearer
    user: str = "envuser"
    password: str = "s3cret-pass"
    token: str = "tk-SECRETTOKEN"
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, status)
    arrivals: list[str] = field(default_factory=list)  # paths, logged before any fault delays the answer
    slow_s: float = 5.0
    offer_json: bool = True  # PEP 691 content negotiation on index pages; False: PEP 503 HTML only
    served: list[tuple[str, str]] = field(default_factory=list)  # (path, Content-Type) of each 200
    honour_range: bool = True  # False: a server that ignores Range (answers 200 with the whole body)
    drop_after: dict[str, int] = field(default_factory=dict)  # suffix -> close the connection after N body bytes
    drop_budget: dict[str, int] = field(default_factory=dict)  # suffix -> drops left (absent: always)
    bucket: TokenBucket | None = None  # a rate limit shared by all connections (the link)
    bytes_served: dict[str, int] = field(default_factory=dict)  # path -> body bytes written, over all requests
    range_asked: list[tuple[str, str]] = field(default_factory=list)  # (path, Range header) of each request
    lock: threading.Lock = field(default_factory=threading.Lock)


class TokenBucket:
    """`rate` bytes/s with a burst of `burst` bytes, shared by every connection: a slow link."""

    def __init__(self, rate: float, burst: int = 64 * 1024) -> None:
        self.rate, self.burst = rate, burst
        self.tokens = float(burst)
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def take(self, n: int) -> None:
        while True:
            with self.lock:
                now = time.monotonic()
                self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
                self.stamp = now
                if self.tokens >= n:
                    self.tokens -= n
                    return
                wait = (n - self.tokens) / self.rate
            time.sleep(wait)


PEP691_JSON = "application/vnd.pypi.simple.v1+json"
PEP691_HTML = "application/vnd.pypi.simple.v1+html"
LEGACY_HTML = "text/html"
_OFFERED = (PEP691_JSON, PEP691_HTML, LEGACY_HTML)  # the server's preference when q values tie
_LATEST = {"application/vnd.pypi.simple.latest+json": PEP691_JSON,
           "application/vnd.pypi.simple.latest+html": PEP691_HTML}


def negotiate(accept: str | None) -> str | None:
    """The content type to answer a simple-index request with; None: nothing acceptable (406).

    PEP 691: no Accept header means the legacy text/html; `latest` aliases the newest version (v1);
    q=0 refuses a type; among equal q values the server chooses: JSON first among types named
    outright, text/html when only a wildcard (`*/*`) matched.
    """
    if accept is None or not accept.strip():
        return LEGACY_HTML
    ranges: list[tuple[str, float]] = []
    for part in accept.split(","):
        media, *params = (x.strip() for x in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if media:
            ranges.append((_LATEST.get(media.lower(), media.lower()), q))

    def quality(offered: str) -> tuple[float, bool]:
        """(q, named exactly): the most specific matching range decides (RFC 9110 section 12.5.1)."""
        major = offered.split("/")[0] + "/*"
        for pattern in (offered, major, "*/*"):
            found = [q for media, q in ranges if media == pattern]
            if found:
                return max(found), pattern == offered
        return 0.0, False

    def rank(offered: str) -> tuple[float, bool, int]:
        q, exact = quality(offered)
        # a type named outright beats one only a wildcard covers; among wildcards, the legacy default
        preference = -_OFFERED.index(offered) if exact else int(offered == LEGACY_HTML)
        return q, exact, preference

    best = max(_OFFERED, key=rank)
    return best if quality(best)[0] > 0 else None


class _Handler(http.server.BaseHTTPRequestHandler):
    state: ServerState
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes; with Nagle on, the body waits for the client's delayed ACK
    # (~40 ms on Linux) on every keep-alive request, which made each archive cost 40 ms over loopback.
    # Real servers and CDNs send without that stall (socketserver.StreamRequestHandler sets TCP_NODELAY).
    disable_nagle_algorithm = True

    def log_message(self, *_args: object) -> None:
        return

    def _record(self, status: int) -> None:
        with self.state.lock:
            self.state.requests.append((self.command, self.path, status))

    def _deny(self, status: int = 401) -> None:
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        if status == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="envkit-test"')
        self.end_headers()

    def _authorized_path(self) -> str | None:
        path = unquote(urlsplit(self.path).path)
        st = self.state
        if st.auth == "basic":
            want = "Basic " + base64.b64encode(f"{st.user}:{st.password}".encode()).decode()
            return path if self.headers.get("Authorization") == want else None
        if st.auth == "bearer":
            return path if self.headers.get("Authorization") == f"Bearer {st.token}" else None
        if st.auth == "token":
            prefix = f"/t/{st.token}"
            return path[len(prefix):] if path.startswith(prefix + "/") else None
        return path

    def _fault_for(self, path: str) -> str | None:
        st = self.state
        with st.lock:
            for suffix, fault in st.faults.items():
                if path.endswith(suffix):
                    left = st.fault_budget.get(suffix)
                    if left is not None:
                        if left <= 0:
                            return None
                        st.fault_budget[suffix] = left - 1
                    return fault
        return None

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(head=True)

    def do_GET(self) -> None:  # noqa: N802
        self._serve(head=False)

    def _serve(self, head: bool) -> None:
        with self.state.lock:
            self.state.arrivals.append(self.path)
        path = self._authorized_path()
        if path is None:
            self._deny(403 if self.state.auth == "token" else 401)
            return
        target = (self.state.root / path.lstrip("/")).resolve()
        if self.state.root.resolve() not in target.parents and target != self.state.root.resolve():
            self._deny(404)
            return
        content_type = None
        if target.is_dir():
            if self.state.offer_json and (target / "index.json").is_file():
                content_type = negotiate(self.headers.get("Accept"))
                if content_type is None:
                    self._deny(406)
                    return
                target = target / ("index.json" if content_type == PEP691_JSON else "index.html")
            else:
                target = target / "index.html"
        fault = self._fault_for(path)
        if fault in ("404", "500", "503"):
            self._deny(int(fault))
            return
        if not target.is_file():
            self._deny(404)
            return
        if content_type is None:
            content_type = "text/html" if target.suffix == ".html" else "application/octet-stream"
        body = target.read_bytes()
        if fault == "corrupt":
            body = bytes(b ^ 0x5A for b in body)
        if fault == "slow":
            time.sleep(self.state.slow_s)
        asked = self.headers.get("Range")
        start, status = 0, 200
        if asked is not None:
            with self.state.lock:
                self.state.range_asked.append((path, asked))
            match = re.fullmatch(r"bytes=(\d+)-", asked.strip())
            if match and self.state.honour_range and fault != "truncate":  # RFC 9110 section 14.2, open-ended form
                start, status = int(match.group(1)), 206
                if start >= len(body):
                    self._deny(416)
                    return
        self._record(status)
        with self.state.lock:
            self.state.served.append((self.path, content_type))
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Accept-Ranges", "bytes" if self.state.honour_range else "none")
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("Content-Type", content_type)
        if self.state.offer_json and target.name in ("index.json", "index.html") \
                and (target.parent / "index.json").is_file():
            self.send_header("Vary", "Accept")
        self.end_headers()
        if head:
            return
        if fault == "truncate":
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        limit = self._drop_limit(path)
        view = memoryview(body)[start:]
        sent = 0
        try:
            for offset in range(0, len(view), 64 * 1024):
                chunk = view[offset:offset + 64 * 1024]
                if limit is not None and sent + len(chunk) >= limit:
                    chunk = chunk[:max(limit - sent, 0)]
                if self.state.bucket is not None:
                    self.state.bucket.take(len(chunk))
                self.wfile.write(chunk)
                sent += len(chunk)
                with self.state.lock:
                    self.state.bytes_served[path] = self.state.bytes_served.get(path, 0) + len(chunk)
                if limit is not None and sent >= limit:
                    self.wfile.flush()
                    self.close_connection = True  # a dropped connection: fewer bytes than Content-Length
                    return
        except OSError:  # the client went away (Ctrl-C)
            self.close_connection = True

    def _drop_limit(self, path: str) -> int | None:
        st = self.state
        with st.lock:
            for suffix, after in st.drop_after.items():
                if path.endswith(suffix):
                    left = st.drop_budget.get(suffix)
                    if left is not None:
                        if left <= 0:
                            return None
                        st.drop_budget[suffix] = left - 1
                    return after
        return None


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True


class ChannelServer:
    """`with ChannelServer(root) as srv:` -> srv.url is http://127.0.0.1:PORT."""

    def __init__(self, root: Path) -> None:
        self.state = ServerState(root)
        handler = type("Handler", (_Handler,), {"state": self.state})
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> ChannelServer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def arrived(self, suffix: str) -> bool:
        with self.state.lock:
            return any(p.endswith(suffix) for p in self.state.arrivals)

    def content_types(self, suffix: str) -> list[str]:
        """The Content-Type of each 200 answer for a path ending in `suffix`."""
        with self.state.lock:
            return [ctype for path, ctype in self.state.served if path.endswith(suffix)]

    def served_bytes(self, suffix: str) -> int:
        """Body bytes written for paths ending in `suffix`, over all requests (what the link carried)."""
        with self.state.lock:
            return sum(n for p, n in self.state.bytes_served.items() if p.endswith(suffix))

    def hits(self, suffix: str) -> list[tuple[str, str, int]]:
        with self.state.lock:
            return [r for r in self.state.requests if r[1].endswith(suffix)]
