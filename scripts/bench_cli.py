#!/usr/bin/env python3
"""Median wall time of the light CLI paths, each in a fresh process (what a user waits for).

Targets (issues #2, #3): `envkit --help`, a simulated `envkit detect --json` and `envkit render`
<= 0.3 s each on the 2-core dev machine (static data: ENVKIT_OFFLINE=1). Issue 11: `envkit detect --json`
with a warm cached catalogue <= 0.3 s; reading one channel's catalogue cold from a loopback mirror
(fresh cache, `--refresh`) <= 1 s. Usage: python scripts/bench_cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CASES = {
    "envkit --help": ["--help"],
    "envkit detect --json (simulated H200)": ["detect", "--json", "--driver-version", "580.159.04",
                                              "--compute-capability", "9.0"],
    "envkit render dl_train (simulated H200)": ["render", "dl_train", "--driver-version", "580.159.04",
                                                "--compute-capability", "9.0"],
    "envkit render dl_train --mirror tuna --flavor pip": ["render", "dl_train", "--mirror", "tuna", "--flavor",
                                                          "pip", "--cuda", "12.4"],
}


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
H200 = ["--driver-version", "580.159.04", "--compute-capability", "9.0"]


def loopback_mirror() -> tuple[object, str]:
    """The test bed's conda-forge universe plus 100 unrelated packages, served on 127.0.0.1."""
    from pathlib import Path

    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from testbed.channel import bench_universe, build, conda_forge_universe, index, python_pkg
    from testbed.server import ChannelServer

    root = Path(tempfile.mkdtemp(prefix="envkit-bench-mirror-"))
    for pkg in [python_pkg(), *conda_forge_universe(), *bench_universe(100, 1)]:
        build(pkg, root / "conda-forge")
    index(root / "conda-forge")
    server = ChannelServer(root).__enter__()
    return server, server.url


def run_case(label: str, argv: list[str], env: dict[str, str], runs: int, fresh_cache: bool = False) -> None:
    times = []
    for _ in range(runs + 1):
        if fresh_cache:
            env = dict(env, ENVKIT_CACHE_DIR=tempfile.mkdtemp(prefix="envkit-bench-cache-"))
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            print(f"{label}: failed rc={done.returncode}: {done.stderr.decode()[-300:]}")
            return
    times = times[1:]  # the first run warms the OS page cache (and, for the warm case, the catalogue cache)
    print(f"{label:55s} median {statistics.median(times):.3f} s  (min {min(times):.3f}, "
          f"max {max(times):.3f}, n={len(times)})")


def envkit_argv() -> list[str]:
    exe = shutil.which("envkit", path=os.path.dirname(sys.executable)) or shutil.which("envkit")
    return [exe] if exe else [sys.executable, "-m", "envkit"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    base = envkit_argv()
    env = dict(os.environ, HOME=tempfile.mkdtemp(prefix="envkit-bench-"))
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
          f"{' '.join(base)}")
    offline = dict(env, ENVKIT_OFFLINE="1")
    for label, argv in CASES.items():
        run_case(label, base + argv, offline, args.runs)
    server, url = loopback_mirror()
    online = {k: v for k, v in env.items() if k != "ENVKIT_OFFLINE"}
    online["ENVKIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="envkit-bench-cache-")
    run_case("envkit detect --json, warm cached catalogue", base + ["detect", "--json", *H200, "--mirror", url],
             online, args.runs)
    run_case("cold catalogue read, loopback mirror (--refresh)",
             base + ["detect", "--json", *H200, "--mirror", url, "--refresh"], online, args.runs, fresh_cache=True)
    server.__exit__(None, None, None)  # type: ignore[attr-defined]
    return 0


if __name__ == "__main__":
    sys.exit(main())
