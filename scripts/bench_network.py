#!/usr/bin/env python3
"""Benchmark the network path of `envkit create` against a slow, dropping loopback mirror.

The mirror (tests/testbed/server.py) serves a channel holding one large archive (random bytes, so it
does not compress) and a small one, rate-limited by a token bucket shared by all connections (a slow
link), optionally dropping a connection after N bytes, and counting the body bytes it serves. Cases:

  clean      a fresh cache, nothing goes wrong
  drop@50%   the connection carrying the large archive is dropped once, at half of it
  ctrl-c@60% SIGINT to `envkit create` once 60% of the large archive has been served; then the same
             command again (the rerun)

Figures: wall time against bytes/rate (the physical floor: the link cannot carry the bytes faster),
and the bytes of the large archive served again after a drop or in the rerun. With --rattler, the same
cases run through a direct py-rattler install (what envkit did before issue 26: rattler streams each
archive into its extraction, so a drop or a Ctrl-C costs the archive again). Real conda is not in this
comparison: it cannot be built from source here (no network to fetch its dependencies).

Targets (issue 26): clean <= 1.1x bytes/rate; after the drop at 50% the large archive's bytes <= 1.15x
its size; the rerun after Ctrl-C at 60% fetches <= 0.6x of it.

Usage: python scripts/bench_network.py [--mib 64] [--rate-mib 4] [--rattler]   (needs the test extra)
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

BIG = "bench-big-1.0-0.conda"

RATTLER = r'''
import asyncio, sys, time, atexit
atexit.register(time.sleep, 0.1)
import rattler
from rattler import Gateway, MatchSpec
channel, prefix, cache = sys.argv[1:4]
async def main():
    gw = Gateway(cache_dir=cache + "/repodata")
    recs = await rattler.solve(sources=[channel], specs=[MatchSpec("bench-big"), MatchSpec("bench-small")],
                               gateway=gw, platforms=["linux-64", "noarch"])
    await rattler.install(recs, target_prefix=prefix, cache_dir=cache + "/pkgs", show_progress=False)
asyncio.run(main())
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mib", type=int, default=64, help="size of the large archive (MiB)")
    parser.add_argument("--rate-mib", type=float, default=4.0, help="the link's rate (MiB/s)")
    parser.add_argument("--rattler", action="store_true", help="also run the cases through py-rattler alone")
    args = parser.parse_args()
    from testbed.channel import Pkg, build, index
    from testbed.server import ChannelServer, TokenBucket

    work = Path(tempfile.mkdtemp(prefix="envkit-bench-net-"))
    channel = work / "mirror" / "conda-forge"
    build(Pkg("bench-big", "1.0", "0", files={"share/big/blob.bin": os.urandom(args.mib * 2**20)}), channel)
    build(Pkg("bench-small", "1.0", "0", files={"share/small/a.txt": b"small\n" * 1000}, fmt=".tar.bz2"), channel)
    index(channel)
    size = (channel / "linux-64" / BIG).stat().st_size
    small = (channel / "linux-64" / "bench-small-1.0-0.tar.bz2").stat().st_size
    rate = args.rate_mib * 2**20
    envfile = work / "env.yml"
    envfile.write_text("name: bench\nchannels:\n  - conda-forge\ndependencies:\n  - bench-big\n  - bench-small\n")
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
          f"large archive {size / 2**20:.1f} MiB + small {small / 1024:.1f} KiB · link {args.rate_mib:g} MiB/s "
          f"(token bucket) · floor = bytes/rate = {(size + small) / rate:.2f} s")
    rows: list[tuple[str, str, float, float, int, str]] = []

    with ChannelServer(work / "mirror") as srv:
        srv.state.bucket = TokenBucket(rate, burst=256 * 1024)

        def envkit(name: str, cache: Path, *, stop_at: float | None = None) -> tuple[float, int, int]:
            """(wall s, bytes of the large archive served, exit code)."""
            argv = [sys.executable, "-m", "envkit", "create", name, "--file", str(envfile), "--mirror", srv.url,
                    "--no-adapt", "--no-verify", "--cuda", "cpu", "-q"]
            path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
            env = dict(os.environ, ENVKIT_HOME=str(work / "home"), ENVKIT_CACHE_DIR=str(cache), PYTHONPATH=path)
            return run(argv, env, stop_at)

        def rattler_alone(name: str, cache: Path, *, stop_at: float | None = None) -> tuple[float, int, int]:
            argv = [sys.executable, "-c", RATTLER, f"{srv.url}/conda-forge", str(work / name), str(cache)]
            return run(argv, dict(os.environ), stop_at)

        def run(argv: list[str], env: dict[str, str], stop_at: float | None) -> tuple[float, int, int]:
            before = srv.served_bytes(BIG)
            start = time.perf_counter()
            proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if stop_at is not None:
                while srv.served_bytes(BIG) - before < stop_at * size and proc.poll() is None:
                    time.sleep(0.005)
                proc.send_signal(signal.SIGINT)
            _out, err = proc.communicate()
            wall = time.perf_counter() - start
            if stop_at is None and proc.returncode != 0:
                raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{err[-2000:]}")
            return wall, srv.served_bytes(BIG) - before, proc.returncode

        tools = [("envkit", envkit)] + ([("rattler", rattler_alone)] if args.rattler else [])
        for tool, go in tools:
            wall, served, _ = go(f"{tool}-clean", work / f"cache-{tool}-clean")
            rows.append((tool, "clean", wall, (size + small) / rate, served, f"{wall / ((size + small) / rate):.2f}x "
                         "bytes/rate"))
            srv.state.drop_after[BIG] = size // 2
            srv.state.drop_budget[BIG] = 1
            wall, served, _ = go(f"{tool}-drop", work / f"cache-{tool}-drop")
            srv.state.drop_after.clear()
            rows.append((tool, "drop@50%", wall, (size + small) / rate, served,
                         f"{served / size:.2f}x the archive served"))
            cache = work / f"cache-{tool}-int"
            wall, served, code = go(f"{tool}-int", cache, stop_at=0.6)
            rows.append((tool, "ctrl-c@60%", wall, 0.6 * size / rate, served, f"exit {code}"))
            wall, served, _ = go(f"{tool}-int", cache)
            rows.append((tool, "  rerun", wall, max(size - 0.6 * size, 0) / rate + small / rate, served,
                         f"{served / size:.2f}x the archive fetched again"))

    print(f"{'tool':8s} {'case':11s} {'wall s':>7s} {'floor s':>8s} {'large archive bytes':>20s}  figure")
    for tool, case, wall, floor, served, figure in rows:
        print(f"{tool:8s} {case:11s} {wall:7.2f} {floor:8.2f} {served:20,d}  {figure}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
