#!/usr/bin/env python3
"""Benchmark the fleet verbs on a real local Slurm cluster of 4 nodes (tests/testbed/slurm.py).

1. `envkit fleet detect` of 4 nodes (whole command, a fresh process each time). Target <= 2 s.
2. The 103-package benchmark env (tests/testbed: python + pip + bench-all + 100 bench packages,
   the env scripts/bench_create.py measures) on 4 nodes:
   - one single `envkit create` on one node (the yardstick);
   - 4 independent creates, one per node in parallel, each solving and downloading on its own;
   - `envkit fleet create` from one bundle: detect, select, solve once, bundle, install on 4 nodes
     (node-local prefixes), check the records everywhere. Target <= 1.5x one single create;
   - the same with the bundle staged onto every node (--stage-bundle always: tar once, each node's srun
     carries it on stdin, unpacked node-locally, removed after), as for nodes without the shared folder;
   - the same on 1 node: what one node's share costs when it has its own CPUs (on this 2-core box the
     4 simulated nodes share 2 cores, so their installs cannot run truly in parallel);
   - the same with one shared prefix (created once, checked from every node).
Every node has its own, initially empty package cache (as separate machines would) and the channel
is served over loopback HTTP, so downloads are real. Needs root and the Slurm packages.

Usage: sudo python scripts/bench_fleet.py [--runs N]   (needs the test extra: zstandard)
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
NODES = ("n1", "n2", "n3", "n4")


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-3000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from testbed.channel import PY, bench_universe, build, index, pip_pkg, python_pkg
    from testbed.server import ChannelServer
    from testbed.slurm import SlurmCluster, missing_reason

    reason = missing_reason()
    if reason:
        raise SystemExit(f"cannot run a local Slurm cluster here: {reason}")
    work = Path(tempfile.mkdtemp(prefix="envkit-bench-fleet-"))
    channel = work / "channels" / "bench"
    pkgs = [python_pkg(), pip_pkg(), *bench_universe()]
    for pkg in pkgs:
        build(pkg, channel)
    index(channel)
    envkit = [sys.executable, "-m", "envkit"]
    results: dict[str, list[float]] = {}
    with ChannelServer(work / "channels") as srv, SlurmCluster(work / "slurm") as cluster:
        envfile = work / "bench.yml"
        envfile.write_text(f"name: bench\nchannels:\n  - {srv.url}/bench\ndependencies:\n"
                           f"  - python={PY}\n  - bench-all\n")
        base = cluster.env(dict(os.environ, ENVKIT_HOME=str(work / "home"), CONDA_OVERRIDE_CUDA="",
                                PIP_CONFIG_FILE=os.devnull))
        n_pkgs = len(pkgs)
        print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
              f"Slurm cluster of {len(NODES)} nodes on this machine · env: {n_pkgs} packages over loopback HTTP")

        def fresh_caches(tag: str) -> None:
            cluster.write_node_env({n: {"ENVKIT_CACHE_DIR": str(work / "caches" / tag / n)} for n in NODES})

        def record(label: str, seconds: float, i: int) -> None:
            if i > 0:  # run 0 warms the OS page cache and Python's bytecode
                results.setdefault(label, []).append(seconds)

        for i in range(args.runs + 1):
            fresh_caches(f"detect{i}")
            record("fleet detect, 4 nodes", timed(envkit + ["fleet", "detect", "--json"], base), i)

            fresh_caches(f"single{i}")
            record("one create (1 node)", timed(["srun", "-N1", "-w", "n1", *envkit, "create", f"s{i}", "--file",
                                                 str(envfile), "--no-adapt", "--no-verify", "-q", "--prefix",
                                                 str(work / "single" / str(i))], base), i)

            fresh_caches(f"indep{i}")
            start = time.perf_counter()
            procs = [subprocess.Popen(["srun", "-N1", "-w", n, *envkit, "create", f"i{i}", "--file", str(envfile),
                                       "--no-adapt", "--no-verify", "-q", "--prefix", str(work / "indep" / str(i) / n)],
                                      env=base, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                     for n in NODES]
            for p in procs:
                if p.wait() != 0:
                    raise SystemExit(f"independent create failed: {p.stderr.read() if p.stderr else ''}")
            record("4 independent creates", time.perf_counter() - start, i)

            fresh_caches(f"fleet{i}")
            record("fleet create, 4 node-local", timed(
                envkit + ["fleet", "create", f"f{i}", "--file", str(envfile), "--no-adapt", "--json",
                          "--prefix", str(work / "fleet" / str(i) / "{node}"),
                          "--bundle-dir", str(work / "bundles" / f"f{i}")], base), i)

            fresh_caches(f"staged{i}")
            record("fleet create, 4 staged", timed(
                envkit + ["fleet", "create", f"g{i}", "--file", str(envfile), "--no-adapt", "--json",
                          "--stage-bundle", "always", "--prefix", str(work / "staged" / str(i) / "{node}"),
                          "--bundle-dir", str(work / "bundles" / f"g{i}")], base), i)

            fresh_caches(f"one{i}")
            record("fleet create, 1 node", timed(
                envkit + ["fleet", "create", f"o{i}", "--file", str(envfile), "--no-adapt", "--json", "--nodes", "1",
                          "--prefix", str(work / "fleet1" / str(i) / "{node}"),
                          "--bundle-dir", str(work / "bundles" / f"o{i}")], base), i)

            fresh_caches(f"shared{i}")
            record("fleet create, 1 shared", timed(
                envkit + ["fleet", "create", f"h{i}", "--file", str(envfile), "--no-adapt", "--json",
                          "--prefix", str(work / "shared" / str(i)),
                          "--bundle-dir", str(work / "bundles" / f"h{i}")], base), i)
            for folder in ("single", "indep", "fleet", "staged", "fleet1", "shared", "caches", "bundles"):
                shutil.rmtree(work / folder, ignore_errors=True)

    single = statistics.median(results["one create (1 node)"])
    print(f"{'measure':30s} {'median':>8s} {'min':>8s} {'max':>8s}  vs one create")
    for label, times in results.items():
        med = statistics.median(times)
        print(f"{label:30s} {med:7.2f}s {min(times):7.2f}s {max(times):7.2f}s  {med / single:5.2f}x")
    detect = statistics.median(results["fleet detect, 4 nodes"])
    fleet = statistics.median(results["fleet create, 4 node-local"])
    print(f"targets: fleet detect <= 2 s: {detect:.2f} s ({'met' if detect <= 2 else 'MISSED'}); "
          f"fleet create <= 1.5x one create: {fleet / single:.2f}x ({'met' if fleet / single <= 1.5 else 'MISSED'})")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
