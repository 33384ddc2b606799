"""engines/fetch.py against a real loopback HTTP server (testbed/server.py) that drops connections after
N bytes, ignores Range on demand, answers 404/503 and rate-limits: resume, the sha256 of a resumed file,
retries, a server that does not honour Range, the out-of-sync mirror message, a part kept across runs,
and the bytes/rate/ETA meter."""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from envkit.engines.fetch import Fetcher, Item, Meter, MirrorLagError, Outcome, Policy, describe
from envkit.errors import EngineError
from testbed.server import ChannelServer

SIZE = 3 * 1024 * 1024 + 17
NAME = "big-1.0-0.conda"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ChannelServer, bytes]]:
    data = os.urandom(SIZE)
    (tmp_path / "srv" / "linux-64").mkdir(parents=True)
    (tmp_path / "srv" / "linux-64" / NAME).write_bytes(data)
    with ChannelServer(tmp_path / "srv") as srv:
        yield srv, data


def item(srv: ChannelServer, data: bytes, dest: Path, **kw: object) -> Item:
    url = f"{srv.url}/linux-64/{NAME}"
    fields: dict[str, object] = dict(url=url, dest=dest, sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                                     shown=url, channel=srv.url)
    fields.update(kw)
    return Item(**fields)  # type: ignore[arg-type]


def fast() -> Policy:
    return Policy(parallel=4, retries=3, backoff_s=0.01, backoff_max_s=0.02, timeout_s=10)


def test_a_dropped_connection_resumes_with_range_and_the_file_is_whole(served: tuple[ChannelServer, bytes],
                                                                      tmp_path: Path) -> None:
    srv, data = served
    srv.state.drop_after[NAME] = SIZE // 2
    srv.state.drop_budget[NAME] = 1
    dest = tmp_path / "dl" / NAME
    [out] = Fetcher(fast()).fetch_all([item(srv, data, dest)])
    assert out.path == dest and dest.read_bytes() == data
    assert srv.state.range_asked == [(f"/linux-64/{NAME}", f"bytes={SIZE // 2}-")]
    assert [s for _m, _p, s in srv.hits(NAME)] == [200, 206]
    assert srv.served_bytes(NAME) == SIZE  # nothing fetched twice
    assert out.fetched == SIZE and out.restarts == 0
    assert not dest.with_name(NAME + ".part").exists() and not dest.with_name(NAME + ".part.json").exists()


def test_a_resumed_file_whose_bytes_do_not_match_its_sha256_is_thrown_away(served: tuple[ChannelServer, bytes],
                                                                          tmp_path: Path) -> None:
    srv, data = served
    dest = tmp_path / "dl" / NAME
    dest.parent.mkdir()
    good = item(srv, data, dest)
    part = dest.with_name(NAME + ".part")
    # an earlier run left a part whose bytes are wrong (a broken proxy): the resumed whole fails the sha256
    part.write_bytes(b"\0" * 1000)
    dest.with_name(NAME + ".part.json").write_text(
        '{"sha256": "%s", "size": %d, "url": null}' % (good.sha256, SIZE))
    [out] = Fetcher(fast()).fetch_all([good])
    assert out.resumed == 1000 and out.restarts == 1  # resumed, found wrong, fetched again from byte 0
    assert dest.read_bytes() == data
    assert srv.state.range_asked[0][1] == "bytes=1000-"


def test_a_file_that_never_matches_its_sha256_is_an_error_not_a_loop(served: tuple[ChannelServer, bytes],
                                                                    tmp_path: Path) -> None:
    srv, data = served
    with pytest.raises(EngineError, match="does not match the sha256") as info:
        Fetcher(fast()).fetch_all([item(srv, data, tmp_path / NAME, sha256="0" * 64)])
    assert "--mirror" in (info.value.hint or "")
    assert not (tmp_path / NAME).exists()


def test_a_server_that_ignores_range_restarts_cleanly_from_byte_zero(served: tuple[ChannelServer, bytes],
                                                                    tmp_path: Path) -> None:
    srv, data = served
    srv.state.honour_range = False
    srv.state.drop_after[NAME] = SIZE // 3
    srv.state.drop_budget[NAME] = 1
    dest = tmp_path / NAME
    [out] = Fetcher(fast()).fetch_all([item(srv, data, dest)])
    assert dest.read_bytes() == data  # not the first third twice
    assert out.restarts == 1 and srv.state.range_asked  # it asked, got a 200, started over
    assert [s for _m, _p, s in srv.hits(NAME)] == [200, 200]


def test_503s_are_retried_with_backoff(served: tuple[ChannelServer, bytes], tmp_path: Path) -> None:
    srv, data = served
    srv.state.faults[NAME] = "503"
    srv.state.fault_budget[NAME] = 2
    waits: list[float] = []
    fetcher = Fetcher(fast(), sleep=lambda s: waits.append(s))
    [out] = fetcher.fetch_all([item(srv, data, tmp_path / NAME)])
    assert out.attempts == 3 and (tmp_path / NAME).read_bytes() == data
    assert waits  # it waited between attempts


def test_retries_give_up_and_keep_the_part_for_the_next_run(served: tuple[ChannelServer, bytes],
                                                            tmp_path: Path) -> None:
    srv, data = served
    srv.state.drop_after[NAME] = SIZE // 4
    srv.state.drop_budget[NAME] = 1
    srv.state.faults[NAME] = "503"
    srv.state.fault_budget[NAME] = 0  # the first request is served (and dropped), then 503 for good
    dest = tmp_path / NAME
    fetcher = Fetcher(fast())
    fetcher.on_bytes = lambda _n: srv.state.fault_budget.__setitem__(NAME, 99)
    with pytest.raises(EngineError, match="failed 4 times in a row") as info:
        fetcher.fetch_all([item(srv, data, dest)])
    assert "kept and resumed" in (info.value.hint or "")
    part = dest.with_name(NAME + ".part")
    assert part.stat().st_size == SIZE // 4
    srv.state.faults.clear()
    served_before = srv.served_bytes(NAME)
    [out] = Fetcher(fast()).fetch_all([item(srv, data, dest)])  # the next run
    assert out.resumed == SIZE // 4 and dest.read_bytes() == data
    assert srv.served_bytes(NAME) - served_before == SIZE - SIZE // 4


def test_an_interrupted_run_leaves_its_part_and_the_next_run_fetches_only_the_rest(
        served: tuple[ChannelServer, bytes], tmp_path: Path) -> None:
    srv, data = served
    dest = tmp_path / NAME
    fetcher = Fetcher(fast())
    seen = [0]

    def on_bytes(n: int) -> None:  # "Ctrl-C" at 60%: the run's stop event, as KeyboardInterrupt sets it
        seen[0] += n
        if seen[0] >= SIZE * 6 // 10:
            fetcher.stop.set()

    fetcher.on_bytes = on_bytes
    with pytest.raises(Exception, match=NAME):
        fetcher.fetch_all([item(srv, data, dest)])
    kept = dest.with_name(NAME + ".part").stat().st_size
    assert SIZE * 6 // 10 <= kept < SIZE and not dest.exists()
    before = srv.served_bytes(NAME)
    [out] = Fetcher(fast()).fetch_all([item(srv, data, dest)])
    assert out.resumed == kept and dest.read_bytes() == data
    assert srv.served_bytes(NAME) - before == SIZE - kept  # <= 0.4x of the archive again


def test_a_part_of_another_file_is_not_resumed(served: tuple[ChannelServer, bytes], tmp_path: Path) -> None:
    srv, data = served
    dest = tmp_path / NAME
    dest.with_name(NAME + ".part").write_bytes(data[:1000])
    dest.with_name(NAME + ".part.json").write_text('{"sha256": "%s", "size": 5, "url": null}' % ("1" * 64))
    [out] = Fetcher(fast()).fetch_all([item(srv, data, dest)])
    assert out.resumed == 0 and srv.state.range_asked == [] and dest.read_bytes() == data


def test_a_404_for_a_listed_package_names_the_mirror_out_of_sync(served: tuple[ChannelServer, bytes],
                                                                tmp_path: Path) -> None:
    srv, data = served
    srv.state.faults[NAME] = "404"
    lagging = item(srv, data, tmp_path / NAME, mirrored=True, channel="https://conda.anaconda.org/conda-forge")
    with pytest.raises(MirrorLagError) as info:
        Fetcher(fast()).fetch_all([lagging])
    text = str(info.value)
    assert f"the mirror {srv.url} is out of sync with https://conda.anaconda.org/conda-forge" in text
    assert NAME in text and "404" in text
    hint = info.value.hint or ""
    assert "again in a while" in hint and "another mirror" in hint and "drop --mirror" in hint
    assert len(srv.hits(NAME)) == 1  # a 404 is not retried
    plain = item(srv, data, tmp_path / NAME)
    with pytest.raises(MirrorLagError, match="out of sync with itself"):
        Fetcher(fast()).fetch_all([plain])


def test_credentials_make_it_unfetchable_here_so_rattler_gets_it(served: tuple[ChannelServer, bytes],
                                                                tmp_path: Path) -> None:
    srv, data = served
    srv.state.auth = "bearer"
    [out] = Fetcher(fast()).fetch_all([item(srv, data, tmp_path / NAME)])
    assert out.path is None and "401" in out.why_left
    [out] = Fetcher(fast()).fetch_all([item(srv, data, tmp_path / NAME,
                                           headers=(("Authorization", f"Bearer {srv.state.token}"),))])
    assert out.path is not None and (tmp_path / NAME).read_bytes() == data


def test_downloads_run_in_parallel_up_to_the_limit(tmp_path: Path) -> None:
    (tmp_path / "srv").mkdir()
    blobs = {f"p{i}-1-0.conda": os.urandom(300_000) for i in range(6)}
    for name, blob in blobs.items():
        (tmp_path / "srv" / name).write_bytes(blob)
    active, peak, lock = [0], [0], threading.Lock()
    with ChannelServer(tmp_path / "srv") as srv:
        from testbed.server import TokenBucket

        srv.state.bucket = TokenBucket(4_000_000)
        items = [Item(url=f"{srv.url}/{n}", dest=tmp_path / "dl" / n, sha256=hashlib.sha256(b).hexdigest(),
                      size=len(b), shown=n) for n, b in blobs.items()]

        def on_done(_o: object) -> None:
            with lock:
                active[0] -= 1

        fetcher = Fetcher(Policy(parallel=3), on_done=on_done)
        original = fetcher._download

        def counting(it: Item, outcome: Outcome) -> None:
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            original(it, outcome)

        setattr(fetcher, "_download", counting)
        outs = fetcher.fetch_all(items)
    assert all(o.path is not None and o.path.read_bytes() == blobs[o.path.name] for o in outs)
    assert peak[0] == 3


def test_the_meter_gives_rate_and_eta_and_kept_bytes_do_not_count_as_speed() -> None:
    now = [100.0]
    meter = Meter(total=10 * 2**20, clock=lambda: now[0])
    meter.skip(4 * 2**20)  # resumed from an earlier run
    assert meter.rate() == 0.0 and meter.eta_s() is None
    for _ in range(4):
        now[0] += 0.5
        meter.add(2**19)  # 1 MiB/s
    assert meter.rate() == pytest.approx(2**20)
    assert meter.eta_s() == pytest.approx(4.0)  # 4 MiB left at 1 MiB/s
    assert describe(meter) == "6.0 MiB / 10.0 MiB, 1.0 MiB/s, 4s left"
    now[0] += 20  # a stall: the window empties, the rate falls
    assert meter.rate() < 2**20 / 10


def test_a_second_envkit_waits_for_the_archive_and_takes_what_the_first_put_in_place(
        served: tuple[ChannelServer, bytes], tmp_path: Path) -> None:
    import time

    from envkit.fsutil import flocked

    srv, data = served
    dest = tmp_path / NAME
    placed: list[bool] = []
    results: list[list[Outcome]] = []
    with flocked(dest.with_name(NAME + ".lock")):  # another envkit is fetching it into the same cache...
        fetcher = Fetcher(fast(), have=lambda _item: bool(placed))
        worker = threading.Thread(target=lambda: results.append(fetcher.fetch_all([item(srv, data, dest)])))
        worker.start()
        time.sleep(0.3)
        assert worker.is_alive() and srv.hits(NAME) == []
        placed.append(True)  # ...and unpacks it into the package cache before letting go
    worker.join(10)
    [[out]] = results
    assert out.already and out.path is None and srv.hits(NAME) == []  # not fetched twice


def test_ctrl_c_while_waiting_for_another_envkit_stops_at_once(served: tuple[ChannelServer, bytes],
                                                              tmp_path: Path) -> None:
    import time

    from envkit.engines.fetch import Stopped
    from envkit.fsutil import flocked

    srv, data = served
    dest = tmp_path / NAME
    errors: list[BaseException] = []

    def run(fetcher: Fetcher) -> None:
        try:
            fetcher.fetch_all([item(srv, data, dest)])
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            errors.append(exc)

    with flocked(dest.with_name(NAME + ".lock")):
        fetcher = Fetcher(fast())
        worker = threading.Thread(target=run, args=(fetcher,))
        worker.start()
        time.sleep(0.2)
        fetcher.stop.set()  # what KeyboardInterrupt in the main thread does
        worker.join(2)
        assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], Stopped)
