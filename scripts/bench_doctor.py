#!/usr/bin/env python3
"""Benchmark `envkit doctor` on a ~100-package env (bench_create's generator plus a CUDA torch laid
out as the real one), as a fresh process per run (what a user waits for) and the checks alone (the
report's own `seconds`). Target (issue 15): well under a second on the 2-core dev machine.

Usage: python scripts/bench_doctor.py [--runs N]   (needs the test extra: zstandard)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

MACHINE = ["--driver-version", "580.65.06", "--compute-capability", "9.0"]  # simulated H200


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    from testbed.channel import PY, PYTAG, Pkg, bench_universe, build, index, pip_pkg, python_pkg
    from testbed.doctorbed import torch_files

    work = Path(tempfile.mkdtemp(prefix="envkit-bench-doctor-"))
    channel = work / "channel"
    pkgs = [python_pkg(), pip_pkg(), *bench_universe(),
            Pkg("pytorch", "2.13.0", f"cuda130_generic_{PYTAG}_h0_200", build_number=200,
                depends=[f"python >={PY},<{PY}.9999", "cuda-version >=13.0,<14"], files=torch_files("2.13.0", "13.0")),
            Pkg("cuda-version", "13.0", "h_envkit_3", subdir="noarch", noarch="generic")]
    for pkg in pkgs:
        build(pkg, channel)
    index(channel)
    envfile = work / "bench.yml"
    envfile.write_text(f"name: bench\nchannels:\n  - {channel.as_uri()}\ndependencies:\n"
                       f"  - python={PY}\n  - bench-all\n  - pytorch=2.13.0=cuda130*\n  - cuda-version=13.0\n  - pip\n")
    env = dict(os.environ, ENVKIT_HOME=str(work / "home"), ENVKIT_CACHE_DIR=str(work / "cache"),
               CONDA_OVERRIDE_CUDA="13.0")
    envkit = [sys.executable, "-m", "envkit"]
    subprocess.run(envkit + ["create", "bench", "--file", str(envfile), "--no-adapt", "--no-verify", "-q"],
                   env=env, check=True)
    meta = work / "home" / "envs" / "bench" / "conda-meta"
    records = [json.loads(p.read_text()) for p in meta.glob("*.json")]
    files = sum(len(r.get("files") or ()) for r in records)
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
          f"env: {len(records)} conda packages, {files} files")
    wall: list[float] = []
    checks: list[float] = []
    for i in range(args.runs + 1):
        start = time.perf_counter()
        done = subprocess.run(envkit + ["doctor", "bench", "--json", *MACHINE], env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if done.returncode not in (0, 5):
            raise SystemExit(f"doctor failed ({done.returncode}): {done.stderr[-2000:]}")
        if i > 0:  # run 0 warms the OS page cache
            wall.append(elapsed)
            checks.append(json.loads(done.stdout)["seconds"])
    print(f"envkit doctor (fresh process) median {statistics.median(wall):.3f} s (min {min(wall):.3f}, "
          f"max {max(wall):.3f}, n={len(wall)})")
    print(f"checks alone (report.seconds) median {statistics.median(checks):.3f} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
