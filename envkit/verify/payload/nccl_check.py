"""Runs INSIDE the target environment under torchrun, one torchrun per node (stdlib + torch only).

Every rank joins one process group (c10d rendezvous on the first node), checks a cross-node
all-reduce, measures all-reduce bus bandwidth and takes one DDP + AMP step whose parameters must
agree on every rank afterwards. Rank 0 prints one JSON line after MARKER. Without CUDA the same
steps run over gloo on the CPU (the rendezvous is then proven, NCCL is not: SKIPPED).

Bus bandwidth follows nccl-tests (doc/PERFORMANCE.md): algbw = bytes / time, and for all-reduce
busbw = algbw * 2 (n - 1) / n, n = number of ranks.
"""

import datetime
import json
import os
import socket
import sys
import time

MARKER = "@@ENVKIT-NCCL-JSON@@"


def _gather_names(torch, dist, name, world, device):
    """Every rank's node name (all_gather_object would need numpy, which an env may lack)."""
    raw = list(name.encode()[:64].ljust(64, b"\0"))
    mine = torch.tensor(raw, dtype=torch.uint8, device=device)
    out = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(out, mine)
    return [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for t in out]


def main(argv):
    args = json.loads(argv[1]) if len(argv) > 1 else {}
    import torch
    import torch.distributed as dist

    node = os.environ.get("SLURMD_NODENAME") or os.environ.get("ENVKIT_FLEET_NODE") or socket.gethostname()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    backend = "nccl" if cuda else "gloo"
    result = {"rank": rank, "world_size": world, "backend": backend, "torch": torch.__version__}
    try:
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=float(args.get("timeout", 120))))
        nodes = _gather_names(torch, dist, node, world, device)
        result["nodes"] = sorted(set(nodes))
        result["ranks_per_node"] = {n: nodes.count(n) for n in sorted(set(nodes))}
        t = torch.full((1024,), float(rank + 1), device=device)
        dist.all_reduce(t)
        result["all_reduce_ok"] = bool(torch.all(t == world * (world + 1) / 2))
        size_mb = float(args.get("size_mb", 256 if cuda else 8))
        numel = int(size_mb * (1 << 20)) // 4
        x = torch.ones(numel, dtype=torch.float32, device=device)
        for _ in range(3):
            dist.all_reduce(x)
        if cuda:
            torch.cuda.synchronize()
        iters = int(args.get("iters", 20 if cuda else 5))
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        if cuda:
            torch.cuda.synchronize()
        elapsed = (time.perf_counter() - start) / iters
        mine = torch.tensor([elapsed], dtype=torch.float64, device=device)
        times = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(times, mine)
        slowest = max(float(t.item()) for t in times)
        algbw = numel * 4 / slowest / 1e9
        result.update(size_bytes=numel * 4, iters=iters, time_ms=round(slowest * 1e3, 3),
                      algbw_gbps=round(algbw, 2), busbw_gbps=round(algbw * 2 * (world - 1) / world, 2))
        if cuda:
            version = torch.cuda.nccl.version()
            result["nccl"] = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).to(device)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler("cuda", enabled=cuda)
        data = torch.randn(64, 256, device=device) + rank
        dtype = torch.float16 if cuda else torch.bfloat16
        with torch.autocast(device_type=device.type, dtype=dtype):
            loss = ddp(data).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        checksum = torch.stack([p.detach().float().sum() for p in model.parameters()]).sum().reshape(1)
        gathered = [torch.zeros_like(checksum) for _ in range(world)]
        dist.all_gather(gathered, checksum)
        result["ddp_in_sync"] = all(torch.allclose(g, gathered[0]) for g in gathered)
        result["amp_dtype"] = str(dtype).replace("torch.", "")
        dist.destroy_process_group()
    except Exception as exc:  # reported, not raised: the caller turns it into a FAIL row
        result["error"] = "rank %d on %s: %s: %s" % (rank, node, type(exc).__name__, str(exc).strip()[:500])
    if rank == 0 or "error" in result:
        sys.stdout.write("\n" + MARKER + "\n" + json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # The report is out. Leave without the interpreter's finalizers: gloo/c10d threads still tearing down
    # can abort the process at exit (SIGABRT after a complete, correct report, seen under load on CPU
    # torch), which torchrun then reports as a failed worker.
    os._exit(code)
