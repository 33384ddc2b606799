#!/usr/bin/env python3
"""GPU evidence for issue 13: `envkit fleet verify --nccl` across two "nodes" of one 2-GPU host.

Preferred: a real Slurm cluster on the host (tests/testbed/slurm.py) with two nodes, n1 seeing GPU 0
and n2 seeing GPU 1 (CUDA_VISIBLE_DEVICES set per node by the cluster's TaskProlog), Slurm either
installed or unpacked from the .deb files in --debs (dpkg-deb -x into .carry/slurm-root: nothing is
installed into the host's root file system). If Slurm cannot run there, the same verbs run through
`--launcher local --nodes 2 --gpus-per-node 1` (two pseudo nodes, one GPU each) and the JSON says why.

Writes one JSON file: the commands, the launcher used (and why), `fleet detect` and `fleet verify --nccl`
results. Needs no network and no env: every node verifies --python (an interpreter that has torch).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def run(argv: list[str], env: dict[str, str], timeout: float) -> dict:  # type: ignore[type-arg]
    print("+", shlex.join(argv), flush=True)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    sys.stdout.write(done.stderr[-4000:])
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = {"unparsed_stdout": done.stdout[-4000:]}
    print(f"  -> exit {done.returncode} in {seconds:.1f} s", flush=True)
    return {"command": shlex.join(argv), "exit_code": done.returncode, "seconds": round(seconds, 2), "result": data}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter with torch that every node verifies")
    parser.add_argument("--debs", type=Path, default=ROOT / ".carry" / "slurm-debs")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "gpu-runs" / "fleet-verify-nccl-h200x2.json")
    parser.add_argument("--launcher", choices=["auto", "slurm", "local"], default="auto")
    parser.add_argument("--timeout", type=float, default=420.0)
    parser.add_argument("--gpus", type=int, default=2, choices=[1, 2],
                        help="GPUs on this host: 2 = one per node and --nccl across them; 1 = both nodes verify "
                             "GPU 0 (no cross-node NCCL: two NCCL ranks cannot share one GPU), then --nccl on n1 alone")
    args = parser.parse_args()
    from testbed.slurm import SlurmCluster, missing_reason, unpack_debs

    envkit = [sys.executable, "-m", "envkit"]
    base = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}".rstrip(os.pathsep),
                ENVKIT_FLEET_ENVKIT=shlex.join(envkit), NCCL_NVLS_ENABLE=os.environ.get("NCCL_NVLS_ENABLE", "0"))
    evidence: dict = {"host": platform.node(), "python": args.python,  # type: ignore[type-arg]
                      "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "script": "scripts/gpu_fleet_evidence.sh"}
    verify = ["fleet", "verify", "--python", args.python, "--nccl", "--json", "--timeout", f"{args.timeout:g}"]
    cluster = None
    why_local = None
    work = Path(tempfile.mkdtemp(prefix="envkit-fleet-gpu-"))
    if args.launcher in ("auto", "slurm"):
        install_root = None
        if missing_reason() is not None:
            install_root = unpack_debs(args.debs, ROOT / ".carry" / "slurm-root")
        why_local = missing_reason(install_root)
        if why_local is None:
            cluster = SlurmCluster(work / "slurm", nodes=("n1", "n2"), gpus_per_node=1, cpus_per_node=8,
                                   node_env={"n1": {"CUDA_VISIBLE_DEVICES": "0"},
                                             "n2": {"CUDA_VISIBLE_DEVICES": "1" if args.gpus == 2 else "0"}},
                                   install_root=install_root)
            try:
                cluster.start()
            except Exception as exc:  # the evidence still comes, through the local launcher
                why_local = f"the local Slurm cluster did not start: {exc}"
                cluster = None
        if cluster is None and args.launcher == "slurm":
            raise SystemExit(why_local)
    try:
        if cluster is not None:
            env = cluster.env(base)
            evidence["launcher"] = "slurm"
            evidence["slurm"] = {"nodes": ["n1", "n2"], "unpacked_from_debs": cluster.install_root is not None,
                                 "version": subprocess.run(["sinfo", "--version"], env=env, capture_output=True,
                                                           text=True).stdout.strip()}
            where: list[str] = []
        else:
            env = base
            evidence["launcher"] = "local"
            evidence["why_not_slurm"] = why_local
            where = ["--launcher", "local", "--nodes", "2", "--gpus-per-node", "1"]
        evidence["gpus"] = args.gpus
        evidence["fleet_detect"] = run(envkit + ["fleet", "detect", "--json", *where], env, 300)
        if args.gpus == 2:
            evidence["fleet_verify_nccl"] = run(envkit + verify + where, env, args.timeout + 120)
        else:
            plain = [a for a in verify if a != "--nccl"]
            evidence["fleet_verify"] = run(envkit + plain + where, env, args.timeout + 120)
            one = ["--nodelist", "n1"] if cluster is not None else ["--launcher", "local", "--nodes", "1"]
            evidence["fleet_verify_nccl"] = run(envkit + verify + one, env, args.timeout + 120)
    finally:
        if cluster is not None:
            cluster.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(evidence, indent=1) + "\n", encoding="utf-8")
    result = evidence["fleet_verify_nccl"]["result"]
    print(f"wrote {args.out}: launcher {evidence['launcher']}, outcome {result.get('outcome')}, "
          f"NCCL {(result.get('nccl') or {}).get('outcome')}: {(result.get('nccl') or {}).get('summary')}")
    return int(evidence["fleet_verify_nccl"]["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
