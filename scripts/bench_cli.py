#!/usr/bin/env python3
"""Median wall time of the light CLI paths, each in a fresh process (what a user waits for).

Targets (issues #2, #3): `envkit --help`, a simulated `envkit detect --json` and `envkit render`
<= 0.3 s each on the 2-core dev machine. Usage: python scripts/bench_cli.py [--runs N]
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
    for label, argv in CASES.items():
        times = []
        for _ in range(args.runs + 1):
            start = time.perf_counter()
            done = subprocess.run(base + argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                print(f"{label}: failed rc={done.returncode}: {done.stderr.decode()[-300:]}")
                break
        else:
            times = times[1:]  # the first run warms the OS page cache
            print(f"{label:55s} median {statistics.median(times):.3f} s  (min {min(times):.3f}, "
                  f"max {max(times):.3f}, n={len(times)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
