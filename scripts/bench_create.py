#!/usr/bin/env python3
"""Benchmark `envkit create --no-verify` of a ~100-package env from a local channel, against the
floor: the same solve + install done by a minimal direct py-rattler script. Also times `envkit export` and
`envkit install` of one more package into that env (re-solve, diff, hard-linked clone, swap) against the create.

Each measurement is a fresh process (what a user waits for). Cold = empty package cache,
warm = cache filled by an earlier run. Targets (issues #4, #6) on the 2-core dev machine:
envkit <= 1.2x the floor; warm-cache create <= 2 s; export of the env <= 0.5 s.

Usage: python scripts/bench_create.py [--runs N]   (needs the test extra: zstandard)
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

FLOOR = r'''
import asyncio, sys, time, atexit
atexit.register(time.sleep, 0.1)
import rattler
from rattler import Gateway, MatchSpec, VirtualPackage, VirtualPackageOverrides
channel, prefix, cache, py = sys.argv[1:5]
async def main():
    gw = Gateway(cache_dir=cache + "/repodata")
    recs = await rattler.solve(sources=[channel], specs=[MatchSpec(f"python={py}", strict=False),
                               MatchSpec("bench-all", strict=False)], gateway=gw, platforms=["linux-64", "noarch"],
                               virtual_packages=VirtualPackage.detect(VirtualPackageOverrides.from_env()))
    await rattler.install(recs, target_prefix=prefix, cache_dir=cache + "/pkgs", show_progress=False)
asyncio.run(main())
'''


CPU: dict[str, list[float]] = {}  # label -> CPU seconds (user + system) of each measured run


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one fresh process; its CPU seconds go to LAST_CPU (on a shared machine the wall
    time stretches with the load, the CPU time much less)."""
    global LAST_CPU
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd: a folder without envkit in it, so `python -m envkit` takes envkit from PYTHONPATH (the tree under
    # test), not from the current directory that -m puts first on sys.path
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          cwd=tempfile.gettempdir())
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-2000:]}")
    return elapsed


LAST_CPU = 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another envkit source tree (e.g. `git archive main` "
                        "unpacked) timed in the same alternation, as `baseline`")
    args = parser.parse_args()
    from testbed.channel import PY, Pkg, bench_universe, build, index, pip_pkg, python_pkg

    work = Path(tempfile.mkdtemp(prefix="envkit-bench-"))
    channel = work / "channel"
    start = time.perf_counter()
    pkgs = [python_pkg(), pip_pkg(), *bench_universe()]
    extra = Pkg("bench-extra", "1.0.0", "0", subdir="noarch", noarch="generic",
                files={f"share/bench-extra/f{j:02d}.txt": b"extra\n" * 40 for j in range(25)})
    for pkg in (*pkgs, extra):
        build(pkg, channel)
    index(channel)
    files = sum(len(p.files) for p in pkgs if p.name.startswith("bench"))
    print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
          f"channel: {len(pkgs) - 2} bench packages + python + pip, {files} files (built in "
          f"{time.perf_counter() - start:.1f} s)")
    envfile = work / "bench.yml"
    envfile.write_text(f"name: bench\nchannels:\n  - {channel.as_uri()}\ndependencies:\n"
                       f"  - python={PY}\n  - bench-all\n")
    envkit = [sys.executable, "-m", "envkit"]
    # Byte-code as an installed envkit has it: pip compiles every module at install time, so a user's create
    # never compiles envkit's sources. Run from a checkout with PYTHONDONTWRITEBYTECODE=1 (this machine sets
    # it), each run would compile ~55 modules again (~0.15-0.2 s on 2 cores, measured with cProfile), a cost
    # no user pays. Run 0 below fills the cache for both the floor and envkit.
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base_env.update(ENVKIT_HOME=str(work / "home"), CONDA_OVERRIDE_CUDA="", PYTHONPYCACHEPREFIX=str(work / "pycache"),
                    PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    labels = ["floor cold", "envkit cold", "floor warm", "envkit warm", "envkit export", "envkit install"]
    if args.baseline:
        labels[2:2] = ["baseline cold"]
        labels[5:5] = ["baseline warm"]
        base_path = os.pathsep.join(p for p in (str(args.baseline.resolve()), os.environ.get("PYTHONPATH", "")) if p)
    results: dict[str, list[float]] = {k: [] for k in labels}
    warm_floor = work / "cache-floor-warm"
    warm_envkit = work / "cache-envkit-warm"
    for i in range(args.runs + 1):
        runs = {
            "floor cold": lambda: timed([sys.executable, "-c", FLOOR, channel.as_uri(), str(work / f"f{i}"),
                                         str(work / f"cache-floor-{i}"), PY], base_env),
            "envkit cold": lambda: timed(envkit + ["create", f"e{i}", "--file", str(envfile), "--no-adapt",
                                                   "--no-verify", "-q"],
                                         dict(base_env, ENVKIT_CACHE_DIR=str(work / f"cache-envkit-{i}"))),
            "floor warm": lambda: timed([sys.executable, "-c", FLOOR, channel.as_uri(), str(work / f"fw{i}"),
                                         str(warm_floor), PY], base_env),
            "envkit warm": lambda: timed(envkit + ["create", f"w{i}", "--file", str(envfile), "--no-adapt",
                                                   "--no-verify", "-q"],
                                         dict(base_env, ENVKIT_CACHE_DIR=str(warm_envkit))),
            "envkit export": lambda: timed(envkit + ["export", f"w{i}"],
                                           dict(base_env, ENVKIT_CACHE_DIR=str(warm_envkit))),
            "envkit install": lambda: timed(envkit + ["install", f"w{i}", "bench-extra", "--yes", "--json"],
                                            dict(base_env, ENVKIT_CACHE_DIR=str(warm_envkit))),
        }
        if args.baseline:
            runs["baseline cold"] = lambda: timed(envkit + ["create", f"b{i}", "--file", str(envfile), "--no-adapt",
                                                            "--no-verify", "-q"],
                                                  dict(base_env, PYTHONPATH=base_path,
                                                       ENVKIT_CACHE_DIR=str(work / f"cache-base-{i}")))
            runs["baseline warm"] = lambda: timed(envkit + ["create", f"bw{i}", "--file", str(envfile), "--no-adapt",
                                                            "--no-verify", "-q"],
                                                  dict(base_env, PYTHONPATH=base_path,
                                                       ENVKIT_CACHE_DIR=str(work / "cache-base-warm")))
        for label in labels:
            run = runs[label]
            elapsed = run()
            if i > 0:  # run 0 fills the warm caches and the OS page cache
                results[label].append(elapsed)
                CPU.setdefault(label, []).append(LAST_CPU)
    for label, times in results.items():
        print(f"{label:14s} median {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f}, "
              f"n={len(times)}; CPU median {statistics.median(CPU[label]):.3f} s)")
    for who, kind in [(w, k) for w in ("envkit", "baseline") for k in ("cold", "warm") if f"{w} {k}" in results]:
        ratio = statistics.median(results[f"{who} {kind}"]) / statistics.median(results[f"floor {kind}"])
        pairs = [e / f for e, f in zip(results[f"{who} {kind}"], results[f"floor {kind}"])]
        print(f"{who} / floor ({kind}): {ratio:.2f}x of the medians; median of the {len(pairs)} alternated pairs "
              f"{statistics.median(pairs):.2f}x (pairs: {' '.join(f'{r:.2f}' for r in pairs)}); CPU time "
              f"{statistics.median(CPU[f'{who} {kind}']) / statistics.median(CPU[f'floor {kind}']):.2f}x")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    ratio = statistics.median(results["envkit install"]) / statistics.median(results["envkit warm"])
    print(f"install of one package / warm create of the env: {ratio:.2f}x")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
