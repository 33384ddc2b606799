"""Resumable, parallel downloads of package archives into envkit's cache (no rattler here).

Why envkit fetches archives itself before rattler links: py-rattler 0.28 streams each archive straight
into its extraction, so a dropped connection or a Ctrl-C at 80% of a 2 GB torch archive costs the whole
archive again (issue 26; user-pains.md D3/D4). Here each archive is fetched into
`<cache>/downloads/<file>.part` under a per-archive flock; the part is kept when the connection drops or
the run is interrupted, and the next attempt (or the next run) asks for the rest with an HTTP Range
request (RFC 9110 section 14.2). A server that ignores Range answers 200 with the whole body: the part is
truncated and the download restarts cleanly from byte 0 (RFC 9110 section 14.2: "a server MAY ignore the
Range header field"). A 206 whose Content-Range does not start where the part ends is refused the same
way. Whatever path the bytes took, the finished file is checked against the sha256 the repodata lists
before anything uses it; a mismatch discards it.

Retries: connection errors, timeouts, short bodies, 408/425/429/5xx are retried with exponential backoff
(pip and conda retry the same classes of failure); an attempt that brought new bytes resets the count,
so a link that drops every few megabytes still finishes. A 404 for a file the repodata lists is not
retried: the mirror is behind its own index (MirrorLagError names it). 401/403/407 and TLS failures
raise Unfetchable: the caller leaves that archive to rattler's own client, which knows
RATTLER_AUTH_FILE and its own certificate store.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

from envkit.errors import EngineError
from envkit.fsutil import Locked, flocked
from envkit.secrets import redact

CHUNK = 256 * 1024
RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
PART = ".part"
PART_INFO = ".part.json"  # url, sha256, size and validators of the part: a part of another file is dropped


class MirrorLagError(EngineError):
    """A 404 for an archive the channel's repodata lists: the server is behind its own index."""


class Unfetchable(Exception):
    """This fetcher cannot get the file (credentials or TLS it does not have): leave it to rattler."""


class Stopped(Exception):
    """The run is being interrupted: the part stays for the next run."""


@dataclass(frozen=True)
class Item:
    url: str  # where the request goes (mirror applied, token in the path): never shown
    dest: Path  # the finished archive
    sha256: str | None = None
    size: int | None = None
    headers: tuple[tuple[str, str], ...] = ()
    shown: str = ""  # the redacted URL for messages
    channel: str = ""  # the channel as the user named it (for the out-of-sync message)
    mirrored: bool = False  # a mirror stands in for the channel


@dataclass
class Policy:
    parallel: int = 6
    retries: int = 5  # failed attempts in a row (an attempt that brought bytes resets it)
    backoff_s: float = 0.5  # first wait; doubled per failure, capped at backoff_max_s, with jitter
    backoff_max_s: float = 8.0
    timeout_s: float = 60.0  # per socket operation


@dataclass
class Outcome:
    """What one archive cost: bytes over the wire, bytes kept from an earlier attempt or run, restarts."""

    item: Item
    path: Path | None = None  # None: left to the engine (Unfetchable), or `already` in place
    fetched: int = 0
    resumed: int = 0
    restarts: int = 0
    attempts: int = 0
    why_left: str = ""
    already: bool = False  # another process put it in place while this one waited


class Meter:
    """Bytes, rate and ETA of a download (core, no rich): the display asks it, the workers feed it.

    The rate is over a sliding window of the last `window_s` seconds, so a stall shows at once; bytes kept
    from an earlier run count toward done (and the ETA) but never toward the rate."""

    def __init__(self, total: int = 0, window_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.done = 0
        self.window_s = window_s
        self.clock = clock
        self.samples: list[tuple[float, int]] = [(clock(), 0)]
        self.wire = 0
        self.lock = threading.Lock()

    def skip(self, n: int) -> None:
        with self.lock:
            self.done += n

    def add(self, n: int) -> None:
        with self.lock:
            self.done += n
            self.wire += n
            now = self.clock()
            self.samples.append((now, self.wire))
            while len(self.samples) > 2 and self.samples[1][0] < now - self.window_s:
                self.samples.pop(0)

    def rate(self) -> float:
        """Bytes per second over the window (0.0 before two samples)."""
        with self.lock:
            (t0, b0), (t1, b1) = self.samples[0], self.samples[-1]
            now = self.clock()
        span = max(now, t1) - t0
        return (b1 - b0) / span if span > 0.05 else 0.0

    def eta_s(self) -> float | None:
        rate = self.rate()
        if not self.total or rate <= 0:
            return None
        return max(self.total - self.done, 0) / rate


def describe(meter: Meter) -> str:
    """`120.0 MiB / 2.0 GiB, 4.1 MiB/s, 7m42s left`: what the progress line shows."""
    text = f"{_size(meter.done)} / {_size(meter.total)}" if meter.total else _size(meter.done)
    rate = meter.rate()
    if rate > 0:
        text += f", {_size(rate)}/s"
        eta = meter.eta_s()
        if eta is not None:
            text += f", {_duration(eta)} left"
    return text


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.5)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


@dataclass
class Fetcher:
    """Fetch items in parallel (up to policy.parallel), each resumable; `on_done(outcome)` runs in the
    worker right after an archive is complete and verified (the engine extracts it there, pipelined)."""

    policy: Policy = field(default_factory=Policy)
    meter: Meter = field(default_factory=Meter)
    on_bytes: Callable[[int], None] = lambda _n: None
    on_skip: Callable[[int], None] = lambda _n: None
    on_done: Callable[[Outcome], None] = lambda _o: None
    sleep: Callable[[float], None] = time.sleep
    stop: threading.Event = field(default_factory=threading.Event)
    have: Callable[[Item], bool] = lambda _i: False  # already in place (the engine: unpacked in its cache)

    def fetch_all(self, items: Sequence[Item]) -> list[Outcome]:
        """All items, biggest first (the long one starts at once); the first error stops the others
        (their parts stay) and is raised; KeyboardInterrupt stops them the same way."""
        from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

        order = sorted(items, key=lambda i: -(i.size or 0))
        if not order:
            return []
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.policy.parallel, len(order))),
                                  thread_name_prefix="envkit-fetch")
        futures = [pool.submit(self._one, item) for item in order]
        try:
            wait(futures, return_when=FIRST_EXCEPTION)
            failed = next((f for f in futures if f.done() and f.exception() is not None), None)
            if failed is not None:
                self.stop.set()
                exc = failed.exception()
                assert exc is not None
                raise exc
            return [f.result() for f in futures]
        except BaseException:
            self.stop.set()
            raise
        finally:
            # not waiting: a worker blocked on a stalled socket notices `stop` only after its read returns, and
            # Ctrl-C must not wait for that; what it wrote is a prefix of its part, which stays resumable
            pool.shutdown(wait=False, cancel_futures=True)

    # -- one archive ------------------------------------------------------------------------
    def _one(self, item: Item) -> Outcome:
        item.dest.parent.mkdir(parents=True, exist_ok=True)
        outcome = Outcome(item)
        lock = self._lock(item)
        try:
            if self.have(item):  # another process put it in place while this one waited for the lock
                outcome.already = True
                return outcome
            if item.dest.is_file() and _matches(item.dest, item):
                outcome.path = item.dest  # finished by an earlier run that stopped before using it
                outcome.resumed = item.dest.stat().st_size
                self.meter.skip(outcome.resumed)
                self.on_skip(outcome.resumed)
            else:
                try:
                    self._download(item, outcome)
                except Unfetchable as exc:
                    outcome.why_left = str(exc)
                    return outcome
            self.on_done(outcome)
        finally:
            lock.__exit__(None, None, None)
        return outcome

    def _lock(self, item: Item) -> AbstractContextManager[int]:
        """The archive's flock, waited for without blocking a Ctrl-C: another envkit fetching the same
        archive into the same cache holds it until that archive is done."""
        path = item.dest.with_name(item.dest.name + ".lock")
        while True:
            if self.stop.is_set():
                raise Stopped(item.shown)
            held = flocked(path, blocking=False)
            try:
                held.__enter__()
                return held
            except Locked:
                self.sleep(0.05)

    def _download(self, item: Item, outcome: Outcome) -> None:
        part = item.dest.with_name(item.dest.name + PART)
        info_path = item.dest.with_name(item.dest.name + PART_INFO)
        info = _read_info(info_path)
        # the content a part belongs to: its sha256 when the repodata lists one (any mirror's bytes are the
        # same file then), else the (redacted) URL; never a credential
        key = {"sha256": item.sha256, "size": item.size, "url": None if item.sha256 else redact(item.shown)}
        if {k: info.get(k) for k in key} != key:
            part.unlink(missing_ok=True)  # a part of another file, or of nothing known: start over
            info = dict(key)
            _write_info(info_path, info)
        failures = 0
        best = 0  # the most bytes the part has held: only an attempt that beats it counts as progress
        first = True
        while True:
            if self.stop.is_set():
                raise Stopped(item.shown)
            have = part.stat().st_size if part.exists() else 0
            if item.size is not None and have > item.size:
                part.unlink()
                have = 0
            if first and have:
                outcome.resumed = have
                self.meter.skip(have)
                self.on_skip(have)
            first = False
            outcome.attempts += 1
            try:
                got = self._attempt(item, part, have, info, info_path, outcome)
            except _Retry as why:
                now = part.stat().st_size if part.exists() else 0
                failures = 0 if why.progressed and now > best else failures + 1
                best = max(best, now)
                if failures > self.policy.retries:
                    raise EngineError(
                        f"downloading {item.dest.name} from {item.shown} failed {failures} times in a row: {why}",
                        "check the network or the mirror, then run the same command again: the part already "
                        f"downloaded ({_size(part.stat().st_size if part.exists() else 0)}) is kept and resumed") \
                        from None
                if failures:
                    wait = min(self.policy.backoff_s * 2 ** (failures - 1), self.policy.backoff_max_s)
                    self._pause(wait * (0.75 + random.random() / 2))
                continue
            if item.sha256 is not None and got != item.sha256:
                part.unlink(missing_ok=True)
                outcome.restarts += 1
                failures += 1
                if failures > self.policy.retries:
                    raise EngineError(f"{item.dest.name} from {item.shown} does not match the sha256 its repodata "
                                      f"lists ({item.sha256[:16]}..., the download was {got[:16]}...)",
                                      "the server sends a different file than its index describes (a broken "
                                      "mirror or proxy): try again later, or use another mirror (--mirror)")
                continue
            os.replace(part, item.dest)
            info_path.unlink(missing_ok=True)
            outcome.path = item.dest
            return

    def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stop.is_set() and time.monotonic() < end:
            self.sleep(min(0.1, max(end - time.monotonic(), 0)))

    def _attempt(self, item: Item, part: Path, have: int, info: dict, info_path: Path, outcome: Outcome) -> str:
        """One request: append to the part from `have`; the sha256 of the whole file once complete."""
        import http.client
        import ssl
        import urllib.error
        import urllib.request

        headers = {"User-Agent": _user_agent(), "Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
            validator = info.get("etag") or info.get("last_modified")
            if validator:
                headers["If-Range"] = validator
        request = urllib.request.Request(item.url, headers=headers)
        for name, value in item.headers:  # credentials: never carried to where a redirect points
            request.add_unredirected_header(name, value)
        try:
            response = urllib.request.urlopen(request, timeout=self.policy.timeout_s)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 416 and have:  # the part is no prefix the server knows: start over
                part.unlink(missing_ok=True)
                outcome.restarts += 1
                raise _Retry("the server refused the resume range (416)", progressed=True) from None
            if exc.code == 404:
                raise _lag(item) from None
            if exc.code in (401, 403, 407):
                raise Unfetchable(f"HTTP {exc.code}") from None
            if exc.code in RETRYABLE_STATUS:
                raise _Retry(f"HTTP {exc.code} {exc.reason}") from None
            raise EngineError(f"downloading {item.dest.name} from {item.shown} failed: HTTP {exc.code} {exc.reason}",
                              "check the server (or mirror) and run the same command again") from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLError):
                raise Unfetchable(f"TLS: {exc.reason}") from None
            raise _Retry(str(exc.reason)) from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Retry(f"{type(exc).__name__}: {exc}") from None
        with response:
            status = response.status
            digest = hashlib.sha256()
            if status == 206 and have:
                start = _range_start(response.headers.get("Content-Range", ""))
                if start != have:  # not the rest of our part: drop it and ask for the whole file
                    part.unlink(missing_ok=True)
                    outcome.restarts += 1
                    raise _Retry(f"the server answered a different range ({response.headers.get('Content-Range')})",
                                 progressed=True)
                with part.open("rb") as old:
                    for block in iter(lambda: old.read(1 << 20), b""):
                        digest.update(block)
                mode = "ab"
            else:
                if have:  # 200 to a Range request: the server ignores Range; restart cleanly from byte 0
                    outcome.restarts += 1
                    self.meter.skip(-have)
                    self.on_skip(-have)
                    outcome.resumed = 0
                mode = "wb"
                have = 0
            validators = {"etag": response.headers.get("ETag"), "last_modified": response.headers.get("Last-Modified")}
            if any(validators.values()) and {k: info.get(k) for k in validators} != validators:
                info.update(validators)
                _write_info(info_path, info)
            length = response.headers.get("Content-Length")
            expect = have + int(length) if length and length.isdigit() else item.size
            got = 0
            with part.open(mode) as out:
                while True:
                    if self.stop.is_set():
                        raise Stopped(item.shown)
                    try:
                        block = response.read(CHUNK)
                    except (OSError, http.client.HTTPException) as exc:
                        raise _Retry(f"the connection dropped after {_size(have + got)} ({type(exc).__name__})",
                                     progressed=got > 0) from None
                    if not block:
                        break
                    out.write(block)
                    digest.update(block)
                    got += len(block)
                    outcome.fetched += len(block)
                    self.meter.add(len(block))
                    self.on_bytes(len(block))
            if expect is not None and have + got < expect:
                raise _Retry(f"the connection closed after {_size(have + got)} of {_size(expect)}",
                             progressed=got > 0)
        return digest.hexdigest()


class _Retry(Exception):
    def __init__(self, why: str, progressed: bool = False) -> None:
        super().__init__(why)
        self.progressed = progressed


def _lag(item: Item) -> MirrorLagError:
    name = item.dest.name
    if item.mirrored:
        return MirrorLagError(
            f"the mirror {item.shown.rsplit('/', 2)[0]} is out of sync with {item.channel}: its repodata lists {name} "
            "but it answers 404 for the file (mirrors copy the index and the packages at different times)",
            "run the same command again in a while (finished downloads are kept), or use another mirror "
            "(--mirror tuna|ustc|bfsu|sjtu|nju|aliyun), or drop --mirror to fetch from the channel itself")
    return MirrorLagError(
        f"the channel {item.channel or item.shown.rsplit('/', 2)[0]} is out of sync with itself: its repodata lists "
        f"{name} but the server answers 404 for the file (a CDN or proxy in front of it is behind)",
        "run the same command again in a while (finished downloads are kept), or use a mirror (--mirror tuna|ustc|...)")


def _range_start(content_range: str) -> int | None:
    """`bytes 100-199/200` -> 100 (RFC 9110 section 14.4)."""
    unit, _, rest = content_range.strip().partition(" ")
    first = rest.split("-", 1)[0]
    return int(first) if unit.lower() == "bytes" and first.isdigit() else None


def _matches(path: Path, item: Item) -> bool:
    from envkit.fsutil import sha256_of

    if item.size is not None and path.stat().st_size != item.size:
        return False
    return item.sha256 is None or sha256_of(path) == item.sha256


def _read_info(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_info(path: Path, info: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(info), encoding="utf-8")
    os.replace(tmp, path)


def _user_agent() -> str:
    from envkit import __version__

    return f"envkit/{__version__}"
