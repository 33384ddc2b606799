"""envkit's AMP smoke test. Runs INSIDE the target environment with its own python.

Imports only the standard library and torch (1.13 through the newest). Reads one JSON argument
(what envkit's detection knows, and the options), prints one JSON document on stdout, exit 0
whenever it could report (the verdict is envkit's to draw from the checks).

Checks (issue #5): build, driver, architecture, autocast dtypes, GradScaler, fp32-vs-AMP training,
speed/memory/TFLOP/s, FP8 matmuls on compute capability >= 8.9
(issue 25), and with several GPUs an NCCL all-reduce plus one DDP + AMP step.
Sources: PyTorch AMP docs (https://pytorch.org/docs/stable/amp.html: autocast op lists, GradScaler
semantics) and the AMP examples (https://pytorch.org/docs/stable/notes/amp_examples.html: the
scale -> backward -> unscale_ -> clip -> step -> update order).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import traceback
import warnings

PAYLOAD_VERSION = 1
SPEEDUP_BAR = 1.3  # the seed guides' "30% faster or it is not worth it"
MEMORY_BAR = 0.8
CHECKS: list = []  # the report's checks, in the order they ran


def recreate_command(extra=""):
    """`envkit create` for this very env: its name when it sits in an envs folder, else with --prefix."""
    prefix = sys.prefix.rstrip("/")
    options = (extra + " " if extra else "") + "--force"
    if not os.path.isdir(os.path.join(prefix, "conda-meta")):
        return "envkit create NAME %s" % options
    parent, name = os.path.split(prefix)
    if os.path.basename(parent) == "envs":
        return "envkit create %s %s" % (name, options)
    return "envkit create %s --prefix %s %s" % (name, prefix, options)


def check(name, status, explanation, values=None, duration=0.0, device=None):
    entry = {"name": name, "status": status, "explanation": explanation, "values": values or {},
             "duration_s": round(duration, 4)}
    if device is not None:
        entry["device"] = device
    CHECKS.append(entry)
    return entry


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.perf_counter() - self.start
        return False


def amp_api(torch):
    """autocast / GradScaler with the current spelling where it exists, the old one otherwise."""
    amp = getattr(torch, "amp", None)

    def autocast(device_type, dtype):
        if amp is not None and hasattr(amp, "autocast"):
            return amp.autocast(device_type=device_type, dtype=dtype)
        return torch.cuda.amp.autocast(dtype=dtype)  # pragma: no cover - torch < 1.10

    def grad_scaler(**kwargs):
        if amp is not None and hasattr(amp, "GradScaler"):
            return amp.GradScaler("cuda", **kwargs)  # torch >= 2.3
        return torch.cuda.amp.GradScaler(**kwargs)

    return autocast, grad_scaler


def sm_covered(cc, arch_list):
    """A GPU runs a build if its sm is there, a lower sm of the same major is (binary compatible),
    or a lower compute_XY PTX is (JIT); NVIDIA CUDA programming guide, binary compatibility."""
    major, minor = cc
    sms = set()
    ptx = set()
    for arch in arch_list:
        kind, _, num = arch.partition("_")
        if not num.isdigit():
            continue
        value = (int(num[:-1]), int(num[-1]))
        (ptx if kind == "compute" else sms).add(value)
    if (major, minor) in sms:
        return "sm_%d%d in build" % cc
    lower = [s for s in sms if s[0] == major and s[1] < minor]
    if lower:
        return "binary compatible with sm_%d%d" % max(lower)
    jit = [p for p in ptx if p <= (major, minor)]
    if jit:
        return "PTX compute_%d%d JIT" % max(jit)
    return None


# ---------------------------------------------------------------------------------------------
def check_build(torch, info):
    cuda = torch.version.cuda
    cudnn = None
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:
        pass
    values = {"torch": torch.__version__, "cuda": cuda, "cudnn": cudnn, "python": platform.python_version(),
              "arch_list": list(torch.cuda.get_arch_list()) if cuda else []}
    has_driver = bool(info.get("driver"))
    if cuda is None and has_driver:
        return check("build", "fail", "CPU build of PyTorch installed on a machine with an NVIDIA driver: "
                     "the solver or pip picked the CPU variant (no __cuda / CONDA_OVERRIDE_CUDA at solve time, "
                     "a cpuonly or pytorch-mutex pin, or a +cpu wheel). Recreate with `%s`" % recreate_command(),
                     values)
    if cuda is None:
        return check("build", "pass", "torch %s CPU build (no NVIDIA driver seen)" % torch.__version__, values)
    return check("build", "pass", "torch %s built for CUDA %s, cuDNN %s" % (torch.__version__, cuda, cudnn), values)


def check_driver(torch, info):
    with Timer() as t:
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    driver = info.get("driver") or {}
    values = {"cuda_available": available, "device_count": count, "driver": driver.get("version"),
              "driver_cuda": driver.get("cuda"), "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if available:
        return check("driver", "pass", "CUDA is available: %d GPU(s) visible" % count, values, t.elapsed)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return check("driver", "skip", "GPUs hidden by CUDA_VISIBLE_DEVICES=%r: no GPU check ran" % visible,
                     values, t.elapsed)
    if not driver:
        return check("driver", "skip", "no NVIDIA driver on this machine: no GPU check ran", values, t.elapsed)
    if torch.version.cuda is None:
        return check("driver", "fail", "CPU build: CUDA unavailable although driver %s is present"
                     % driver.get("version"), values, t.elapsed)
    reason = None
    build, drv = torch.version.cuda, driver.get("cuda")
    if drv and _ver(build)[0] > _ver(drv)[0]:
        reason = ("the build's CUDA %s is newer than the CUDA %s driver %s supports; update the driver or "
                  "recreate with `%s`" % (build, drv, driver.get("version"), recreate_command("--cuda %s" % drv)))
    if reason is None:
        try:
            torch.cuda.init()
        except Exception as exc:  # the runtime's own words: mismatch, no device, ...
            reason = "CUDA initialisation failed: %s" % str(exc).strip().splitlines()[-1]
            if "mismatch" in str(exc).lower():
                reason += " (driver/library mismatch: reboot or reload the nvidia module)"
    return check("driver", "fail", reason or "torch.cuda.is_available() is False with driver %s present"
                 % driver.get("version"), values, t.elapsed)


def _ver(text):
    parts = str(text).split(".")
    return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0


def check_arch(torch, dev):
    with Timer() as t:
        cc = torch.cuda.get_device_capability(dev)
        arch_list = list(torch.cuda.get_arch_list())
        how = sm_covered(cc, arch_list)
        name = torch.cuda.get_device_name(dev)
    values = {"gpu": name, "compute_capability": "%d.%d" % cc, "arch_list": arch_list}
    if how is None:
        return check("architecture", "fail", "sm_%d%d is not in this build (%s): kernels would fail with "
                     "'no kernel image is available'; choose a build that covers it (envkit detect)"
                     % (cc[0], cc[1], " ".join(arch_list)), values, t.elapsed, dev)
    return check("architecture", "pass", "%s (compute capability %d.%d): %s" % (name, cc[0], cc[1], how),
                 values, t.elapsed, dev)


def check_autocast(torch, dev, autocast):
    F = torch.nn.functional
    device = "cuda:%d" % dev
    cc = torch.cuda.get_device_capability(dev)
    results = {}
    bad = []
    with Timer() as t:
        a = torch.randn(64, 64, device=device)
        b = torch.randn(64, 64, device=device)
        lin = torch.nn.Linear(64, 64).to(device)
        conv = torch.nn.Conv2d(3, 8, 3).to(device)
        img = torch.randn(2, 3, 16, 16, device=device)
        target = torch.randn(64, 64, device=device)
        dtypes = [("float16", torch.float16)]
        if cc >= (8, 0):
            dtypes.append(("bfloat16", torch.bfloat16))
        for label, dtype in dtypes:
            with autocast("cuda", dtype):
                mm = a @ b
                got = {
                    "matmul": mm.dtype, "linear": lin(a).dtype, "conv2d": conv(img).dtype,
                    "softmax": F.softmax(mm, dim=-1).dtype,
                    "layer_norm": F.layer_norm(mm, (64,)).dtype,
                    "mse_loss": F.mse_loss(mm, target).dtype,
                }
            want = {"matmul": dtype, "linear": dtype, "conv2d": dtype,
                    "softmax": torch.float32, "layer_norm": torch.float32, "mse_loss": torch.float32}
            results[label] = {k: str(v).replace("torch.", "") for k, v in got.items()}
            bad += ["%s %s -> %s (want %s)" % (label, k, str(got[k]).replace("torch.", ""),
                                                  str(want[k]).replace("torch.", "")) for k in want if got[k] != want[k]]
        torch.cuda.synchronize(dev)
    if bad:
        return check("autocast", "fail", "autocast chose the wrong dtype: " + "; ".join(bad), results, t.elapsed, dev)
    note = "" if cc >= (8, 0) else "; bf16 skipped: compute capability %d.%d < 8.0 (no native bf16)" % cc
    return check("autocast", "pass", "matmul/linear/conv run in reduced precision, softmax/layer_norm/loss "
                 "in float32" + note, results, t.elapsed, dev)


def check_scaler(torch, dev, grad_scaler):
    device = "cuda:%d" % dev
    with Timer() as t:
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = grad_scaler(init_scale=2.0 ** 16, growth_interval=3)
        x = torch.randn(16, 8, device=device)
        before = [p.detach().clone() for p in model.parameters()]
        s0 = scaler.get_scale()
        loss = model(x).float().pow(2).mean() * float("inf")
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        unchanged = all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
        s1 = scaler.get_scale()
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(model(x).float().pow(2).mean()).backward()
            scaler.step(opt)
            scaler.update()
        s2 = scaler.get_scale()
        opt.zero_grad()
        scaler.scale(model(x).float().pow(2).mean() * 1e3).backward()
        scaler.unscale_(opt)
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
        clipped = float(torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])))
        scaler.step(opt)
        scaler.update()
        torch.cuda.synchronize(dev)
    values = {"scale_initial": s0, "scale_after_inf": s1, "scale_after_growth": s2,
              "params_unchanged_on_inf": unchanged, "grad_norm_before_clip": norm, "grad_norm_after_clip": clipped}
    problems = []
    if not unchanged:
        problems.append("the step with inf gradients changed the parameters")
    if not s1 < s0:
        problems.append("the scale did not back off after inf (%.0f -> %.0f)" % (s0, s1))
    if not s2 > s1:
        problems.append("the scale did not grow after growth_interval clean steps (%.0f -> %.0f)" % (s1, s2))
    if not (norm == norm and clipped <= 1.0 + 1e-3):
        problems.append("unscale_ + clip_grad_norm_ left a gradient norm of %.3g" % clipped)
    if problems:
        return check("grad_scaler", "fail", "; ".join(problems), values, t.elapsed, dev)
    return check("grad_scaler", "pass", "inf step skipped (params unchanged), scale %g -> %g, grew to %g after "
                 "3 clean steps; unscale_ + clipping works" % (s0, s1, s2), values, t.elapsed, dev)


def _train(torch, device, mode, autocast, grad_scaler, steps):
    torch.manual_seed(1234)
    gen = torch.Generator(device="cpu").manual_seed(99)
    x = torch.randn(2048, 64, generator=gen).to(device)
    w = torch.randn(64, 1, generator=gen).to(device)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(2048, 1, generator=gen).to(device)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                torch.nn.ReLU(), torch.nn.Linear(256, 1)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scaler = grad_scaler(enabled=(mode == "fp16"))  # GradScaler only for fp16 (user-pains F3)
    losses = []
    skipped = 0
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode)
    for step in range(steps):
        idx = torch.randint(0, 2048, (256,), generator=gen).to(device)
        opt.zero_grad(set_to_none=True)
        if dtype is None:
            loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        else:
            with autocast("cuda", dtype):
                loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        scale_before = scaler.get_scale() if mode == "fp16" else None
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        if mode == "fp16" and scaler.get_scale() < scale_before:
            skipped += 1
        if step % 10 == 0 or step == steps - 1:
            losses.append(float(loss.detach()))
    with torch.no_grad():
        final = float(torch.nn.functional.mse_loss(model(x).float(), y))
    return losses, final, skipped


def check_training(torch, dev, autocast, grad_scaler, steps=150):
    device = "cuda:%d" % dev
    cc = torch.cuda.get_device_capability(dev)
    with Timer() as t:
        results = {}
        for mode in ["fp32", "fp16"] + (["bf16"] if cc >= (8, 0) else []):
            losses, final, skipped = _train(torch, device, mode, autocast, grad_scaler, steps)
            results[mode] = {"loss_first": losses[0], "loss_last": losses[-1], "final_eval_loss": final,
                             "skipped_steps": skipped, "finite": all(v == v and abs(v) != float("inf") for v in losses)}
        torch.cuda.synchronize(dev)
    ref = results["fp32"]["final_eval_loss"]
    tolerance = 0.15 * ref + 0.01  # AMP within 15% (+0.01 absolute) of fp32 after the same steps
    problems = []
    for mode, r in results.items():
        if not r["finite"]:
            problems.append("%s loss is not finite" % mode)
        elif not r["loss_last"] < 0.5 * r["loss_first"]:
            problems.append("%s loss did not fall (%.4g -> %.4g)" % (mode, r["loss_first"], r["loss_last"]))
        if mode != "fp32" and abs(r["final_eval_loss"] - ref) > tolerance:
            problems.append("%s final loss %.4g is not within %.3g of fp32's %.4g"
                            % (mode, r["final_eval_loss"], tolerance, ref))
        if r["skipped_steps"] > max(5, steps // 20):
            problems.append("%s skipped %d of %d steps" % (mode, r["skipped_steps"], steps))
    values = {"steps": steps, "tolerance": tolerance, "runs": results}
    if problems:
        return check("training", "fail", "; ".join(problems), values, t.elapsed, dev)
    amp = [m for m in results if m != "fp32"]
    return check("training", "pass", "%d steps: fp32 %.4g, %s; losses finite and falling, within %.3g of fp32" % (
        steps, ref, ", ".join("%s %.4g (%d skipped)" % (m, results[m]["final_eval_loss"], results[m]["skipped_steps"])
                              for m in amp), tolerance), values, t.elapsed, dev)


def _time_steps(torch, dev, step, warmup, reps):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize(dev)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        step()
    end.record()
    torch.cuda.synchronize(dev)
    return start.elapsed_time(end) / reps


def _mlp_step(torch, device, width, batch, depth, mode, autocast, grad_scaler):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = grad_scaler(enabled=(mode == "fp16"))
    x = torch.randn(batch, width, device=device)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode)

    def step():
        opt.zero_grad(set_to_none=True)
        if dtype is None:
            loss = model(x).float().pow(2).mean()
        else:
            with autocast("cuda", dtype):
                loss = model(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def _conv_step(torch, device, batch, size, mode, autocast, grad_scaler):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = grad_scaler(enabled=(mode == "fp16"))
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    dtype = {"fp16": torch.float16}.get(mode)

    def step():
        opt.zero_grad(set_to_none=True)
        if dtype is None:
            loss = nn.functional.cross_entropy(model(x), y)
        else:
            with autocast("cuda", dtype):
                loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def _is_oom(exc):
    return "out of memory" in str(exc).lower()


def _free_memory(torch, dev):
    try:
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    except Exception:
        return int(torch.cuda.get_device_properties(dev).total_memory * 0.8)


def check_speed(torch, dev, autocast, grad_scaler):
    """fp32 vs AMP on a Tensor-Core-sized MLP (a tiny model is launch-bound: gpu-h200.md)."""
    device = "cuda:%d" % dev
    free = _free_memory(torch, dev)
    # 4 x 4096 MLP, batch 8192 needs ~2.5 GiB in fp32 (AdamW states + activations); shrink to fit.
    width, batch = 4096, 8192
    while width > 512 and (width * width * 4 * 4 * 4 + batch * width * 4 * 10) > 0.5 * free:
        width //= 2
        batch //= 2
    attempts = []
    with Timer() as t:
        for _ in range(3):
            try:
                times = {}
                for mode in ("fp32", "fp16"):
                    step = _mlp_step(torch, device, width, batch, 4, mode, autocast, grad_scaler)
                    times[mode] = _time_steps(torch, dev, step, warmup=3, reps=8)
                    del step
                    torch.cuda.empty_cache()
                break
            except RuntimeError as exc:
                if not _is_oom(exc):
                    raise
                attempts.append("OOM at width %d batch %d" % (width, batch))
                torch.cuda.empty_cache()
                width //= 2
                batch //= 2
        else:
            return check("speed", "warn", "out of memory even at a small workload: " + "; ".join(attempts),
                         {"attempts": attempts}, t.elapsed, dev)
    speedup = times["fp32"] / times["fp16"]
    values = {"workload": "MLP 4x%d, batch %d, AdamW" % (width, batch), "fp32_ms": round(times["fp32"], 3),
              "amp_fp16_ms": round(times["fp16"], 3), "speedup": round(speedup, 2), "oom_retries": attempts}
    if speedup < SPEEDUP_BAR:
        return check("speed", "warn", "AMP is only %.2fx faster than fp32 (bar %.1fx): the GPU may lack fast "
                     "fp16 Tensor Cores (compute capability < 7.0), be shared or throttled, or the workload "
                     "was shrunk to fit memory" % (speedup, SPEEDUP_BAR), values, t.elapsed, dev)
    return check("speed", "pass", "AMP (fp16) step %.2f ms vs fp32 %.2f ms: %.2fx faster"
                 % (times["fp16"], times["fp32"], speedup), values, t.elapsed, dev)


def check_memory(torch, dev, autocast, grad_scaler):
    """Peak memory fp16 vs fp32 on an activation-heavy conv net (where AMP halves activations)."""
    device = "cuda:%d" % dev
    free = _free_memory(torch, dev)
    batch, size = 128, 128
    while batch > 8 and batch * 64 * size * size * 4 * 6 > 0.5 * free:
        batch //= 2
    with Timer() as t:
        peaks = {}
        for attempt in range(3):
            try:
                for mode in ("fp32", "fp16"):
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(dev)
                    base = torch.cuda.memory_allocated(dev)
                    step = _conv_step(torch, device, batch, size, mode, autocast, grad_scaler)
                    step()
                    step()
                    torch.cuda.synchronize(dev)
                    peaks[mode] = torch.cuda.max_memory_allocated(dev) - base
                    del step
                break
            except RuntimeError as exc:
                if not _is_oom(exc) or attempt == 2:
                    if _is_oom(exc):
                        return check("memory", "warn", "out of memory at batch %d" % batch, {}, 0.0, dev)
                    raise
                batch //= 2
        torch.cuda.empty_cache()
    ratio = peaks["fp16"] / peaks["fp32"]
    values = {"workload": "conv net, %dx3x%dx%d" % (batch, size, size), "fp32_peak_mib": peaks["fp32"] >> 20,
              "amp_fp16_peak_mib": peaks["fp16"] >> 20, "ratio": round(ratio, 3)}
    status = "pass" if ratio <= MEMORY_BAR else "warn"
    return check("memory", status, "peak memory with AMP is %.2f of fp32 (%d MiB vs %d MiB)"
                 % (ratio, peaks["fp16"] >> 20, peaks["fp32"] >> 20), values, t.elapsed, dev)


def check_tflops(torch, dev):
    device = "cuda:%d" % dev
    free = _free_memory(torch, dev)
    n = 8192
    while n > 1024 and 3 * n * n * 4 > 0.3 * free:
        n //= 2
    cc = torch.cuda.get_device_capability(dev)
    results = {}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    with Timer() as t:
        try:
            for label, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                                       ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):
                if label == "bf16" and cc < (8, 0):
                    continue
                if label == "tf32" and cc < (8, 0):
                    continue
                torch.backends.cuda.matmul.allow_tf32 = tf32
                a = torch.randn(n, n, device=device, dtype=dtype)
                b = torch.randn(n, n, device=device, dtype=dtype)
                ms = _time_steps(torch, dev, lambda: torch.mm(a, b), warmup=2, reps=6 if n >= 8192 else 20)
                results[label] = round(2 * n ** 3 / (ms / 1e3) / 1e12, 1)
                del a, b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old_tf32
        torch.cuda.empty_cache()
    return check("matmul_tflops", "pass", "matmul %d^3: " % n + ", ".join("%s %.1f" % kv for kv in results.items())
                 + " TFLOP/s", {"n": n, "tflops": results}, t.elapsed, dev)


FP8_MAX_REL_ERR = 0.1  # e4m3 has a 3-bit mantissa: about 0.04 measured on an H200 (anchors-2026.md 3.3)
FP8_E4M3_MAX = 448.0  # the largest finite float8_e4m3fn (OCP FP8 spec)
FP8_REF_ROWS = 256  # rows checked against a float64 reference (cheap on GPUs with slow fp64)


def fp8_gate(cc, has_scaled_mm, torch_version):
    """Why FP8 is not tried here, or None. The capability is only the gate; running the matmul is the proof
    (an MI250 reports 9.0 and fails in _scaled_mm: anchors-2026.md 3.2)."""
    if tuple(cc) < (8, 9):
        return "compute capability %d.%d < 8.9: no FP8 tensor cores (Ada 8.9, Hopper 9.0 and newer)" % tuple(cc)
    if not has_scaled_mm:
        return "torch %s has no torch._scaled_mm (PyTorch >= 2.1)" % torch_version
    return None


def fp8_verdict(results, bf16):
    """(status, explanation) of the FP8 matmuls: information, FAIL only when non-finite or grossly wrong."""
    ran = {k: r for k, r in results.items() if "error" not in r}
    bad = [k for k, r in ran.items() if not r.get("finite")]
    if bad:
        return "fail", "FP8 %s matmul gave non-finite values" % " and ".join(bad)
    wrong = [k for k, r in ran.items() if not r.get("rel_err", 1.0) <= FP8_MAX_REL_ERR]
    if wrong:
        return "fail", "FP8 %s matmul is grossly wrong: relative error %s (bar %g)" % (
            " and ".join(wrong), ", ".join("%.3g" % ran[k].get("rel_err", float("nan")) for k in wrong), FP8_MAX_REL_ERR)
    if not ran:
        return "warn", "torch._scaled_mm raised for every recipe: %s" % "; ".join(
            "%s: %s" % (k, r["error"]) for k, r in results.items())
    parts = []
    for k, r in ran.items():
        speed = " (%.2fx bf16)" % (r["tflops"] / bf16["tflops"]) if bf16.get("tflops") else ""
        parts.append("%s %.0f TFLOP/s%s, rel. error %.2g" % (k, r["tflops"], speed, r["rel_err"]))
    failed = ["%s raised: %s" % (k, r["error"]) for k, r in results.items() if "error" in r]
    text = "FP8 e4m3 torch._scaled_mm %s; bf16 %.0f TFLOP/s, rel. error %.2g" % (
        "; ".join(parts), bf16.get("tflops") or 0, bf16.get("rel_err") or 0)
    return ("warn" if failed else "pass"), text + ("; " + "; ".join(failed) if failed else "")


def _rel_err(torch, out, ref):
    diff = out[:FP8_REF_ROWS].double() - ref
    return float(torch.linalg.norm(diff) / torch.linalg.norm(ref))


def fp8_matmuls(torch, device, n, time_ms):
    """bf16 and FP8 e4m3 (tensorwise, rowwise) n^3 GEMMs: TFLOP/s and relative error against float64.

    `time_ms(fn)` times one call (CUDA events on a GPU); a recipe this torch cannot run is recorded, not raised."""
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, generator=gen)
    b = torch.randn(n, n, device=device, generator=gen)
    ref = a[:FP8_REF_ROWS].double() @ b.double()
    flops = 2 * n ** 3
    a16, b16 = a.bfloat16(), b.bfloat16()
    ms = time_ms(lambda: a16 @ b16)
    bf16 = {"tflops": round(flops / (ms / 1e3) / 1e12, 3), "rel_err": round(_rel_err(torch, a16 @ b16, ref), 6)}
    e4m3 = torch.float8_e4m3fn
    recipes = {
        "tensorwise": (a.abs().max().reshape(()) / FP8_E4M3_MAX, b.abs().max().reshape(()) / FP8_E4M3_MAX),
        "rowwise": (a.abs().amax(dim=1, keepdim=True) / FP8_E4M3_MAX, b.abs().amax(dim=0, keepdim=True) / FP8_E4M3_MAX),
    }
    results = {}
    for name, (sa, sb) in recipes.items():
        try:
            a8 = (a / sa).to(e4m3)
            b8 = (b / sb).to(e4m3).t().contiguous().t()  # mat2 column-major (aten Blas.cpp)
            sa, sb = sa.float().contiguous(), sb.float().contiguous()

            def mm(a8=a8, b8=b8, sa=sa, sb=sb):
                got = torch._scaled_mm(a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
                return got[0] if isinstance(got, tuple) else got  # torch 2.1-2.3 also returned amax

            out = mm()
            ms = time_ms(mm)
            results[name] = {"finite": bool(torch.isfinite(out).all()), "rel_err": round(_rel_err(torch, out, ref), 6),
                             "tflops": round(flops / (ms / 1e3) / 1e12, 3)}
        except Exception as exc:  # an unsupported recipe or signature in this torch: information
            if _is_oom(exc):
                raise
            results[name] = {"error": (str(exc).strip().splitlines() or [""])[0][:200]}
    return bf16, results


def check_fp8(torch, dev):
    """tensorwise and rowwise FP8 e4m3 GEMMs (torch._scaled_mm) against bf16, checked against float64."""
    cc = torch.cuda.get_device_capability(dev)
    reason = fp8_gate(cc, hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"), torch.__version__)
    if reason:
        return check("fp8", "skip", reason, {"compute_capability": "%d.%d" % cc}, 0.0, dev)
    # 16-aligned, and M a multiple of 256 (rowwise invalid access otherwise: pytorch/pytorch#133334)
    n = 8192 if _free_memory(torch, dev) > 8 * 2 ** 30 else 4096
    with Timer() as t:
        try:
            with warnings.catch_warnings():  # a deprecation of the private _scaled_mm is ours, not the env's
                warnings.simplefilter("ignore", FutureWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
                bf16, results = fp8_matmuls(torch, "cuda:%d" % dev, n,
                                            lambda fn: _time_steps(torch, dev, fn, warmup=3, reps=20))
        except Exception as exc:  # information, not a gate: only wrong numbers FAIL (out of memory: guarded warns)
            if _is_oom(exc):
                raise
            return check("fp8", "warn", "the FP8 check could not run: %s: %s" % (
                type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:200]), {"n": n},
                         time.perf_counter() - t.start, dev)
        finally:
            torch.cuda.empty_cache()
    status, text = fp8_verdict(results, bf16)
    values = {"n": n, "bf16": bf16, "results": results, "max_rel_err": FP8_MAX_REL_ERR}
    return check("fp8", status, "%d^3: %s" % (n, text), values, t.elapsed, dev)


def check_cpu(torch):
    with Timer() as t:
        autocast, _ = amp_api(torch)
        lin = torch.nn.Linear(16, 16)
        x = torch.randn(4, 16)
        target = torch.randn(4, 16)
        with autocast("cpu", torch.bfloat16):
            y = lin(x)
            # CPU autocast's float32 list holds the losses (mse_loss), not softmax (PyTorch AMP docs,
            # "CPU Ops that can autocast to float32")
            loss = torch.nn.functional.mse_loss(y, target)
        ok = y.dtype == torch.bfloat16 and loss.dtype == torch.float32
    values = {"linear": str(y.dtype).replace("torch.", ""), "mse_loss": str(loss.dtype).replace("torch.", "")}
    if not ok:
        return check("cpu_autocast", "fail", "CPU autocast(bfloat16) chose the wrong dtypes", values, t.elapsed)
    return check("cpu_autocast", "pass", "CPU autocast(bfloat16): linear -> bfloat16, mse_loss -> float32",
                 values, t.elapsed)


# ---------------------------------------------------------------------------------------------
def _ddp_worker(rank, world, port, queue):
    import torch
    import torch.distributed as dist

    autocast, grad_scaler = amp_api(torch)
    try:
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
        t = torch.full((1024,), float(rank + 1), device="cuda:%d" % rank)
        dist.all_reduce(t)
        expected = world * (world + 1) / 2
        reduce_ok = bool(torch.all(t == expected))
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1)).cuda(rank)
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        scaler = grad_scaler()
        x = torch.randn(64, 256, device="cuda:%d" % rank) + rank
        with autocast("cuda", torch.float16):
            loss = ddp(x).float().pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        checksum = torch.stack([p.detach().float().sum() for p in model.parameters()]).sum().reshape(1)
        gathered = [torch.zeros_like(checksum) for _ in range(world)]
        dist.all_gather(gathered, checksum)
        in_sync = all(torch.allclose(g, gathered[0]) for g in gathered)
        if rank == 0:
            queue.put({"all_reduce": reduce_ok, "ddp_in_sync": in_sync, "loss": float(loss.detach()),
                       "nccl": ".".join(str(v) for v in torch.cuda.nccl.version())
                       if isinstance(torch.cuda.nccl.version(), tuple) else str(torch.cuda.nccl.version())})
        dist.destroy_process_group()
    except Exception as exc:  # reported by rank 0's parent through the queue
        queue.put({"error": "rank %d: %s" % (rank, exc)})


def check_multi_gpu(torch, count):
    import socket

    import torch.multiprocessing as mp

    with Timer() as t:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_ddp_worker, args=(r, count, port, queue)) for r in range(count)]
        for p in procs:
            p.start()
        try:
            result = queue.get(timeout=120)
        except Exception:
            result = {"error": "no answer from the workers within 120 s"}
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    if "error" in result:
        return check("multi_gpu", "fail", "NCCL/DDP across %d GPUs failed: %s" % (count, result["error"]),
                     result, t.elapsed)
    if not (result["all_reduce"] and result["ddp_in_sync"]):
        return check("multi_gpu", "fail", "NCCL all-reduce or DDP sync gave wrong results", result, t.elapsed)
    return check("multi_gpu", "pass", "NCCL %s all-reduce and one DDP + AMP step across %d GPUs agree"
                 % (result.get("nccl"), count), result, t.elapsed)


# ---------------------------------------------------------------------------------------------
def guarded(func, name, *args, device=None):
    try:
        return func(*args)
    except Exception as exc:
        if _is_oom(exc):
            return check(name, "warn", "out of memory: %s" % str(exc).splitlines()[0], {}, 0.0, device)
        tb = traceback.format_exc().strip().splitlines()
        return check(name, "fail", "%s: %s" % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip()
                                                else ""), {"traceback": tb[-6:]}, 0.0, device)


def run(options):
    started = time.perf_counter()
    info = options.get("machine") or {}
    report = {"payload_version": PAYLOAD_VERSION, "python": platform.python_version(),
              "executable": sys.executable, "options": {k: v for k, v in options.items() if k != "machine"}}
    with Timer() as t:
        try:
            import torch
        except ImportError as exc:
            check("import", "fail", "torch is not installed in this environment (%s): install it with "
                  "`%s` or `conda install -p %s pytorch`" % (exc, recreate_command(), sys.prefix), {}, 0.0)
            report.update(checks=CHECKS, total_s=round(time.perf_counter() - started, 3), torch=None)
            return report
    check("import", "pass", "import torch took %.2f s" % t.elapsed, {"torch": torch.__version__}, t.elapsed)
    report["torch"] = torch.__version__
    report["torch_cuda"] = torch.version.cuda
    autocast, grad_scaler = amp_api(torch)
    guarded(check_build, "build", torch, info)
    guarded(check_cpu, "cpu_autocast", torch)
    drv = guarded(check_driver, "driver", torch, info)
    if drv["status"] == "pass":
        count = torch.cuda.device_count()
        if options.get("all_gpus"):
            devices = list(range(count))
        else:
            devices = [int(options.get("device") or 0)]
            if devices[0] >= count:
                check("device", "fail", "--device %d but only %d GPU(s) are visible" % (devices[0], count))
                devices = []
        report["gpus"] = [{"index": d, "name": torch.cuda.get_device_name(d),
                           "compute_capability": "%d.%d" % torch.cuda.get_device_capability(d),
                           "memory_mib": torch.cuda.get_device_properties(d).total_memory >> 20} for d in devices]
        for dev in devices:
            torch.cuda.set_device(dev)
            arch = guarded(check_arch, "architecture", torch, dev, device=dev)
            if arch["status"] == "fail":
                continue
            guarded(check_autocast, "autocast", torch, dev, autocast, device=dev)
            guarded(check_scaler, "grad_scaler", torch, dev, grad_scaler, device=dev)
            guarded(check_training, "training", torch, dev, autocast, grad_scaler, device=dev)
            if not options.get("quick") and dev == devices[0]:
                guarded(check_speed, "speed", torch, dev, autocast, grad_scaler, device=dev)
                guarded(check_memory, "memory", torch, dev, autocast, grad_scaler, device=dev)
                guarded(check_tflops, "matmul_tflops", torch, dev, device=dev)
                guarded(check_fp8, "fp8", torch, dev, device=dev)
        if options.get("all_gpus") and count > 1:
            guarded(check_multi_gpu, "multi_gpu", torch, count)
    report["checks"] = CHECKS
    report["total_s"] = round(time.perf_counter() - started, 3)
    return report


def main(argv):
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run(options)
    messages = []
    for w in caught:
        text = "%s: %s" % (w.category.__name__, w.message)
        if "numpy" in text.lower() and "failed to initialize" in text.lower():
            continue  # torch without numpy: harmless for these checks
        messages.append(text)
    report["warnings"] = messages
    # "CUDA is not available. Disabling" means autocast/GradScaler silently did nothing (user-pains F7)
    disabling = [m for m in messages if "disabling" in m.lower() and "cuda" in m.lower()]
    deprecated = [m for m in messages if "Deprecat" in m or "FutureWarning" in m]
    if disabling:
        report["checks"].append({"name": "warnings", "status": "fail", "values": {"warnings": disabling},
                                 "duration_s": 0.0, "explanation": "AMP was silently disabled: " + disabling[0]})
    elif deprecated:
        report["checks"].append({"name": "warnings", "status": "warn", "values": {"warnings": deprecated},
                                 "duration_s": 0.0, "explanation": "deprecation warnings: " + deprecated[0]})
    sys.stdout.write("\n@@ENVKIT-VERIFY-JSON@@\n" + json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
