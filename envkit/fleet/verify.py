"""`envkit fleet verify`: `envkit verify --json` on every node, one table, one verdict.

Verdict rules follow `envkit verify` (README "Exit codes"): any FAIL -> FAIL (3); every node
SKIPPED -> SKIPPED (4); otherwise PASS. A node that cannot be reached counts as FAIL: nothing
proves the environment there. `--nccl` adds one torchrun per node (c10d rendezvous on the first
node: torch.distributed.run docs, "rdzv-backend c10d") for a cross-node all-reduce and DDP step.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import ExitCode, UsageError
from envkit.fleet import nodejson as nj
from envkit.fleet.inventory import parse_json_output
from envkit.fleet.launcher import Launcher, NodeRun, NodeSlot, envkit_argv, run_all
from envkit.prefix.locations import find_prefix

PASS, FAIL, SKIPPED = "PASS", "FAIL", "SKIPPED"
# beside the AMP payload: every script that runs inside the target env (torch, stdlib only) lives there
NCCL_PAYLOAD = Path(__file__).resolve().parent.parent / "verify" / "payload" / "nccl_check.py"
NCCL_MARKER = "@@ENVKIT-NCCL-JSON@@"
VERIFY_TIMEOUT = 360.0


def payload_timeout(node_timeout: float) -> float:
    """The payload's own limit inside a node's: room for srun queueing and envkit's start-up."""
    return max(1.0, node_timeout - min(30.0, node_timeout / 4))


@dataclass(frozen=True)
class Target:
    """What to verify on each node: an env name, a prefix (may hold {node}) or an interpreter."""

    name: str | None = None
    prefix: str | None = None
    python: str | None = None

    def for_node(self, node: str) -> list[str]:
        if self.python:
            return ["--python", self.python.replace("{node}", node)]
        if self.prefix:
            return ["--prefix", self.prefix.replace("{node}", node)]
        assert self.name is not None
        return [self.name]

    def python_for(self, node: str) -> str:
        """The interpreter torchrun runs under on `node` (paths are the node's)."""
        if self.python:
            return self.python.replace("{node}", node)
        if self.prefix:
            return str(Path(self.prefix.replace("{node}", node)) / "bin" / "python")
        return str(find_prefix(self.name, None) / "bin" / "python")


@dataclass(frozen=True)
class NodeVerify:
    node: str
    outcome: str
    summary: str
    checks: dict[str, str] = field(default_factory=dict)  # check -> PASS/FAIL/SKIPPED/WARN (worst over GPUs)
    speedup: float | None = None
    memory_ratio: float | None = None
    tflops: float | None = None
    gpus: tuple[str, ...] = ()
    seconds: float = 0.0
    error: str | None = None
    report: dict[str, Any] | None = None


@dataclass(frozen=True)
class NcclResult:
    outcome: str
    summary: str
    data: dict[str, Any] = field(default_factory=dict)
    node_errors: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FleetVerify:
    nodes: tuple[NodeVerify, ...]
    nccl: NcclResult | None
    outcome: str
    summary: str
    slowest: str | None
    seconds: float

    @property
    def exit_code(self) -> ExitCode:
        return {PASS: ExitCode.OK, FAIL: ExitCode.VERIFY_FAILED, SKIPPED: ExitCode.VERIFY_SKIPPED}[self.outcome]

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome, "exit_code": int(self.exit_code), "summary": self.summary,
            "slowest": self.slowest, "seconds": round(self.seconds, 3),
            "nodes": [{"node": n.node, "outcome": n.outcome, "summary": n.summary, "checks": n.checks,
                       "speedup": n.speedup, "memory_ratio": n.memory_ratio, "tflops": n.tflops,
                       "gpus": list(n.gpus), "seconds": round(n.seconds, 3), "error": n.error,
                       "report": n.report} for n in self.nodes],
            "nccl": None if self.nccl is None else {"outcome": self.nccl.outcome, "summary": self.nccl.summary,
                                                    **self.nccl.data, "node_errors": self.nccl.node_errors},
        }


_RANK = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}
_WORD = {"fail": FAIL, "warn": "WARN", "pass": PASS, "skip": SKIPPED}


def node_result(run: NodeRun) -> NodeVerify:
    """One node's `envkit verify --json` (or its absence) -> a row; every field read typed (a wrong one
    makes the row a FAIL naming the field)."""
    data, error = parse_json_output(run)
    if data is None or "outcome" not in data:
        why = error or f"verify printed no report: {run.stderr_tail(3)}"
        return NodeVerify(run.node, FAIL, f"unreachable or crashed: {why}", seconds=run.seconds, error=why)
    try:
        return _typed_result(run, data)
    except nj.NodeDataError as exc:
        why = f"verify report not understood: {exc}"
        return NodeVerify(run.node, FAIL, why, seconds=run.seconds, error=why)


def _typed_result(run: NodeRun, data: dict[str, Any]) -> NodeVerify:
    outcome = nj.text(data, "outcome", required=True, choices=(PASS, FAIL, SKIPPED))
    assert outcome is not None
    worst: dict[str, str] = {}
    values: dict[str, dict[str, Any]] = {}
    for i, check in enumerate(nj.objects(data, "checks")):
        where = f"checks[{i}]."
        name = nj.text(check, "name", where, required=True)
        status = nj.text(check, "status", where, required=True, choices=tuple(_RANK))
        assert name is not None and status is not None
        if _RANK[status] >= _RANK[worst.get(name, "skip")]:
            worst[name] = status
        found = nj.field(check, "values", dict, where)
        if found:
            values[name] = found
    tflops_map = nj.field(values.get("matmul_tflops") or {}, "tflops", dict, "checks[matmul_tflops].values.") or {}
    best = max((nj.field(tflops_map, k, float, "checks[matmul_tflops].values.tflops.") for k in ("fp16", "bf16")
                if tflops_map.get(k) is not None), default=None)
    gpus = []
    for i, g in enumerate(nj.objects(data, "gpus")):
        cc = nj.text(g, "compute_capability", f"gpus[{i}].") or ""
        gpus.append(f"{nj.text(g, 'name', f'gpus[{i}].')} sm_{cc.replace('.', '')}")
    return NodeVerify(run.node, outcome, nj.text(data, "summary") or "",
                      {k: _WORD[v] for k, v in worst.items()},
                      nj.field(values.get("speed") or {}, "speedup", float, "checks[speed].values."),
                      nj.field(values.get("memory") or {}, "ratio", float, "checks[memory].values."),
                      best, tuple(gpus), run.seconds, None, data)


def verify_argv(target: Target, node: str, *, all_gpus: bool, quick: bool, timeout: float) -> list[str]:
    argv = [*envkit_argv(), "verify", *target.for_node(node), "--json", "--timeout", f"{timeout:g}"]
    if all_gpus:
        argv.append("--all-gpus")
    if quick:
        argv.append("--quick")
    return argv


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def nccl_argv(target: Target, node: str, *, nnodes: int, endpoint: str, rdzv_id: str, is_host: bool,
              nproc: str, timeout: float) -> list[str]:
    """torchrun (python -m torch.distributed.run) for one node of the c10d rendezvous."""
    return [target.python_for(node), "-m", "torch.distributed.run", f"--nnodes={nnodes}",
            f"--nproc-per-node={nproc}", "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}",
            f"--rdzv-id={rdzv_id}", f"--rdzv-conf=is_host={'true' if is_host else 'false'}",
            "--max-restarts=0", str(NCCL_PAYLOAD), json.dumps({"timeout": timeout})]


def run_nccl(launcher: Launcher, nodes: Sequence[NodeSlot], target: Target, *, nproc: str = "gpu",
             timeout: float = 180.0, no_gpu: Sequence[str] = ()) -> NcclResult:
    """One torchrun per node; `nproc` "gpu" means one rank per visible GPU, and one rank (gloo on the CPU)
    on the nodes in `no_gpu`, where torchrun would refuse "gpu".

    When no rank got as far as a report (the rendezvous port, picked free on this machine, can be taken
    before torchrun binds it on the first node), the step runs once more on a new port and the result
    says so; a step whose ranks ran and disagreed is never retried."""
    first = _run_nccl_once(launcher, nodes, target, nproc=nproc, timeout=timeout, no_gpu=no_gpu)
    if first.outcome != FAIL or first.data:
        return first
    second = _run_nccl_once(launcher, nodes, target, nproc=nproc, timeout=timeout, no_gpu=no_gpu)
    return NcclResult(second.outcome, f"{second.summary} (second attempt; the first failed: {first.summary})",
                      second.data, second.node_errors or first.node_errors)


def _run_nccl_once(launcher: Launcher, nodes: Sequence[NodeSlot], target: Target, *, nproc: str,
                   timeout: float, no_gpu: Sequence[str]) -> NcclResult:
    usable = [n for n in nodes if n.usable]
    if len(usable) < 1:
        return NcclResult(FAIL, "no node to run the NCCL check on")
    first = usable[0].name
    endpoint = f"{launcher.address(first)}:{_free_port()}"
    rdzv_id = f"envkit-{secrets.token_hex(4)}"
    runs = run_all(launcher, usable, lambda n: nccl_argv(target, n.name, nnodes=len(usable), endpoint=endpoint,
                                                         rdzv_id=rdzv_id, is_host=n.name == first,
                                                         nproc="1" if nproc == "gpu" and n.name in no_gpu else nproc,
                                                         timeout=payload_timeout(timeout)),
                   timeout=timeout)
    errors: dict[str, str] = {}
    rank0: dict[str, Any] | None = None
    for run in runs:
        if run.error:
            errors[run.node] = run.error
        for block in run.stdout.split(NCCL_MARKER)[1:]:
            lines = block.strip().splitlines()
            try:
                data = _nccl_block(lines[0]) if lines else None
            except nj.NodeDataError as exc:
                errors[run.node] = f"the NCCL check's report is not understood: {exc}"
                continue
            if data is None:
                continue
            if data.get("error"):
                errors[run.node] = str(data["error"])
            if data.get("rank") == 0 and "error" not in data:
                rank0 = data
        if not run.error and run.returncode not in (0, None) and run.node not in errors:
            errors[run.node] = f"torchrun exited {run.returncode}: {run.stderr_tail(4)}"
    if rank0 is None or errors:
        first_error = next(iter(errors.items()), (None, "no rank reported"))
        return NcclResult(FAIL, f"cross-node all-reduce failed ({first_error[0] or '?'}: {first_error[1]})",
                          rank0 or {}, errors)
    world, span = rank0.get("world_size"), len(rank0.get("nodes") or [])
    if not (rank0.get("all_reduce_ok") and rank0.get("ddp_in_sync")):
        return NcclResult(FAIL, f"all-reduce or DDP gave wrong results across {span} node(s) ({world} ranks)", rank0)
    bw = f"bus bandwidth {rank0.get('busbw_gbps')} GB/s ({(rank0.get('size_bytes') or 0) >> 20} MiB all-reduce)"
    if rank0.get("backend") != "nccl":
        return NcclResult(SKIPPED, f"no GPU: rendezvous, all-reduce and one DDP step ran over gloo across {span} "
                                   f"node(s), {world} ranks ({bw}); NCCL itself was not tested", rank0)
    return NcclResult(PASS, f"NCCL {rank0.get('nccl')}: all-reduce and one DDP + AMP step agree across {span} "
                            f"node(s), {world} ranks; {bw}", rank0)


# the fields of the NCCL payload's report (verify/payload/nccl_check.py) and their types
_NCCL_FIELDS: dict[str, type] = {"rank": int, "error": str, "world_size": int, "all_reduce_ok": bool,
                                 "ddp_in_sync": bool, "busbw_gbps": float, "size_bytes": int, "backend": str,
                                 "nccl": str}


def _nccl_block(line: str) -> dict[str, Any] | None:
    """One rank's report line, typed; None when the line is not JSON at all (other output after a marker)."""
    if not line.lstrip().startswith("{"):
        return None
    data = nj.parse_object(line, "the NCCL check's report")
    for key, kind in _NCCL_FIELDS.items():
        nj.field(data, key, kind)
    nj.texts(data, "nodes")
    return data


def aggregate(rows: Sequence[NodeVerify], nccl: NcclResult | None, seconds: float) -> FleetVerify:
    outcomes = [r.outcome for r in rows] + ([nccl.outcome] if nccl else [])
    failed = [r.node for r in rows if r.outcome == FAIL]
    skipped = [r.node for r in rows if r.outcome == SKIPPED]
    speeds = [(r.speedup, r.node) for r in rows if r.speedup is not None]
    slowest = min(speeds)[1] if len(speeds) > 1 else None
    if FAIL in outcomes:
        outcome = FAIL
        parts = [f"FAIL on {', '.join(failed)}"] if failed else []
        if nccl and nccl.outcome == FAIL:
            parts.append(f"NCCL: {nccl.summary}")
        summary = "; ".join(parts)
    elif outcomes and all(o == SKIPPED for o in outcomes):
        outcome, summary = SKIPPED, "SKIPPED on every node (no usable GPU): nothing proves the env trains on a GPU"
    else:
        outcome = PASS
        summary = f"PASS on {len([r for r in rows if r.outcome == PASS])} of {len(rows)} node(s)"
        if skipped:
            summary += f"; SKIPPED (no GPU) on {', '.join(skipped)}"
    return FleetVerify(tuple(rows), nccl, outcome, summary, slowest, seconds)


def fleet_verify(launcher: Launcher, target: Target, *, all_gpus: bool = False, quick: bool = False,
                 nccl: bool = False, nproc: str = "gpu", timeout: float = VERIFY_TIMEOUT,
                 on_event: Callable[[str, str, NodeRun | None], None] | None = None) -> FleetVerify:
    if sum(x is not None for x in (target.name, target.prefix, target.python)) != 1:
        raise UsageError("give one of NAME, --prefix or --python", "envkit fleet verify dl_train")
    start = time.perf_counter()
    nodes = launcher.nodes()
    runs = run_all(launcher, nodes, lambda n: verify_argv(target, n.name, all_gpus=all_gpus, quick=quick,
                                                          timeout=payload_timeout(timeout)),
                   timeout=timeout, on_event=on_event)
    rows = [node_result(r) for r in runs]
    nccl_result = None
    if nccl:
        reachable = [n for n, r in zip(nodes, rows) if r.error is None]
        no_gpu = [r.node for r in rows if r.checks.get("driver") != PASS]
        nccl_result = run_nccl(launcher, reachable, target, nproc=nproc, timeout=timeout, no_gpu=no_gpu)
    return aggregate(rows, nccl_result, time.perf_counter() - start)
