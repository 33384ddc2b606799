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
is served over loopback HTTP, so downloads are real. Needs root and the Slurm packages (installed, or
unpacked from the .deb files in --debs: nothing is installed into /).

--node-disk says where node-local prefixes and package caches live:
  local   each node its own empty tmpfs (its "local scratch disk"; the testbed's private node folders),
          as on a cluster where each node writes its own disk;
  shared  one folder of this machine's disk for all nodes, so 4 simulated nodes share one disk and its
          inode allocator (on a VM whose root ext4 has no journal that alone costs ~0.6 ms per created
          file: perf shows ext4's find_inode_bit/recently_deleted scan).
The bundle and the shared-prefix case always use this machine's disk (the cluster's shared filesystem).

Usage: sudo python scripts/bench_fleet.py [--runs N] [--node-disk local|shared] [--debs DIR]
       (needs the test extra: zstandard)
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
    parser.add_argument("--node-disk", choices=["local", "shared"], default="local")
    parser.add_argument("--debs", type=Path, default=None,
                        help="Slurm/munge .deb files to unpack when Slurm is not installed (e.g. .carry/slurm-debs)")
    args = parser.parse_args()
    from testbed.channel import PY, bench_universe, build, index, pip_pkg, python_pkg
    from testbed.server import ChannelServer
    from testbed.slurm import SlurmCluster, missing_reason, private_dirs_reason, unpack_debs

    work = Path(tempfile.mkdtemp(prefix="envkit-bench-fleet-"))
    install_root = None
    if missing_reason() is not None and args.debs is not None:
        install_root = unpack_debs(args.debs, work / "slurm-root")
    reason = missing_reason(install_root)
    if reason:
        raise SystemExit(f"cannot run a local Slurm cluster here: {reason}")
    local = work / "node-local"  # each node's own tmpfs with --node-disk local, else a folder of this disk
    if args.node_disk == "local" and private_dirs_reason():
        raise SystemExit(f"--node-disk local needs private node folders: {private_dirs_reason()}")
    channel = work / "channels" / "bench"
    pkgs = [python_pkg(), pip_pkg(), *bench_universe()]
    for pkg in pkgs:
        build(pkg, channel)
    index(channel)
    envkit = [sys.executable, "-m", "envkit"]
    results: dict[str, list[float]] = {}
    phases: dict[str, list[float]] = {}
    private = (local,) if args.node_disk == "local" else ()
    with ChannelServer(work / "channels") as srv, SlurmCluster(work / "slurm", install_root=install_root,
                                                               private_dirs=private) as cluster:
        envfile = work / "bench.yml"
        envfile.write_text(f"name: bench\nchannels:\n  - {srv.url}/bench\ndependencies:\n"
                           f"  - python={PY}\n  - bench-all\n")
        base = cluster.env(dict(os.environ, ENVKIT_HOME=str(work / "home"), CONDA_OVERRIDE_CUDA="",
                                PIP_CONFIG_FILE=os.devnull,
                                PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))))
        n_pkgs = len(pkgs)
        print(f"machine: {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()} · "
              f"Slurm cluster of {len(NODES)} nodes on this machine · node-local disk: {args.node_disk} · "
              f"env: {n_pkgs} packages over loopback HTTP", flush=True)

        def fresh_caches(tag: str) -> None:
            cluster.write_node_env({n: {"ENVKIT_CACHE_DIR": str(local / "caches" / tag / n)} for n in NODES})

        def record(label: str, seconds: float, i: int) -> None:
            if i > 0:  # run 0 warms the OS page cache and Python's bytecode
                results.setdefault(label, []).append(seconds)

        def run_fleet(label: str, argv: list[str], i: int) -> None:
            start = time.perf_counter()
            done = subprocess.run(envkit + argv, env=base, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr[-3000:]}")
            record(label, elapsed, i)
            if i > 0 and label == "fleet create, 4 node-local":
                for phase, seconds in json.loads(done.stdout).get("phases_s", {}).items():
                    phases.setdefault(phase, []).append(seconds)

        for i in range(args.runs + 1):
            fresh_caches(f"detect{i}")
            record("fleet detect, 4 nodes", timed(envkit + ["fleet", "detect", "--json"], base), i)

            fresh_caches(f"single{i}")
            record("one create (1 node)", timed(["srun", "-N1", "-w", "n1", *envkit, "create", f"s{i}", "--file",
                                                 str(envfile), "--no-adapt", "--no-verify", "-q", "--prefix",
                                                 str(local / "single" / str(i))], base), i)

            fresh_caches(f"indep{i}")
            start = time.perf_counter()
            procs = [subprocess.Popen(["srun", "-N1", "-w", n, *envkit, "create", f"i{i}", "--file", str(envfile),
                                       "--no-adapt", "--no-verify", "-q", "--prefix", str(local / "indep" / str(i) / n)],
                                      env=base, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                     for n in NODES]
            for p in procs:
                if p.wait() != 0:
                    raise SystemExit(f"independent create failed: {p.stderr.read() if p.stderr else ''}")
            record("4 independent creates", time.perf_counter() - start, i)

            fresh_caches(f"fleet{i}")
            run_fleet("fleet create, 4 node-local", ["fleet", "create", f"f{i}", "--file", str(envfile), "--no-adapt",
                                                 "--json", "--prefix", str(local / "fleet" / str(i) / "{node}"),
                                                 "--bundle-dir", str(work / "bundles" / f"f{i}")], i)

            fresh_caches(f"staged{i}")
            run_fleet("fleet create, 4 staged", ["fleet", "create", f"g{i}", "--file", str(envfile), "--no-adapt",
                                             "--json", "--stage-bundle", "always",
                                             "--prefix", str(local / "staged" / str(i) / "{node}"),
                                             "--bundle-dir", str(work / "bundles" / f"g{i}")], i)

            fresh_caches(f"one{i}")
            run_fleet("fleet create, 1 node", ["fleet", "create", f"o{i}", "--file", str(envfile), "--no-adapt", "--json",
                                           "--nodes", "1", "--prefix", str(local / "fleet1" / str(i) / "{node}"),
                                           "--bundle-dir", str(work / "bundles" / f"o{i}")], i)

            fresh_caches(f"shared{i}")
            run_fleet("fleet create, 1 shared", ["fleet", "create", f"h{i}", "--file", str(envfile), "--no-adapt",
                                             "--json", "--prefix", str(work / "shared" / str(i)),
                                             "--bundle-dir", str(work / "bundles" / f"h{i}")], i)
        # everything is removed once at the end: deleting thousands of files between rounds slows the next
        # round's file creation on a journal-less ext4 (see --node-disk)

    single = statistics.median(results["one create (1 node)"])
    print(f"{'measure':30s} {'median':>8s} {'min':>8s} {'max':>8s}  vs one create")
    for label, times in results.items():
        med = statistics.median(times)
        print(f"{label:30s} {med:7.2f}s {min(times):7.2f}s {max(times):7.2f}s  {med / single:5.2f}x")
    detect = statistics.median(results["fleet detect, 4 nodes"])
    fleet = statistics.median(results["fleet create, 4 node-local"])
    print(f"targets: fleet detect <= 2 s: {detect:.2f} s ({'met' if detect <= 2 else 'MISSED'}); "
          f"fleet create <= 1.5x one create: {fleet / single:.2f}x ({'met' if fleet / single <= 1.5 else 'MISSED'})")
    print("fleet create, 4 node-local, phases (median): " +
          ", ".join(f"{k} {statistics.median(v):.2f}s" for k, v in phases.items()))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
