"""envkit's AMP check of the user's own model. Runs INSIDE the target environment with its own python.

Imports only the standard library and torch. Reads one JSON argument (the factory spec, steps, what
envkit's detection knows), prints one JSON document after the marker line, exit 0 whenever it could
report. It measures; envkit judges (envkit/verify/amp_compare.py holds every rule, tested without torch).

The factory FUNC() returns (model, make_batch, loss_fn[, make_optimizer]); make_batch(step) returns
(inputs, targets) as CPU tensors. The same model is trained from the same initial weights on the same
batches in fp32, fp16 + GradScaler and bf16 (where native), following the PyTorch AMP recipe
(https://pytorch.org/docs/stable/notes/amp_examples.html: autocast around forward + loss, the scaler
around backward and step). Forward hooks (the idea of HF's DebugUnderflowOverflow) record per module
the largest finite |output|, inf/nan and the share of exact zeros, in execution order.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import json
import os
import platform
import sys
import time
import traceback
import warnings

PAYLOAD_VERSION = 1
MARKER = "@@ENVKIT-VERIFY-JSON@@"
PROBE_LIMIT = 2000  # module calls recorded per probe (a huge model's report stays bounded)
CHECKS = []


class UserCodeError(Exception):
    """The user's factory, make_batch, model or loss raised: their traceback goes back to envkit."""

    def __init__(self, phase, exc):
        super().__init__(phase)
        self.phase = phase
        self.error_type = type(exc).__name__
        self.error_message = str(exc).strip()
        self.traceback = user_traceback(exc)


def user_traceback(exc):
    """The traceback without this payload's own frames: what is left is the user's code (and torch's)."""
    here = os.path.abspath(__file__)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename) != here]
    lines = ["Traceback (most recent call last):"] + "".join(traceback.format_list(frames)).rstrip().splitlines()
    lines += "".join(traceback.format_exception_only(type(exc), exc)).rstrip().splitlines()
    return lines[:8] + ["  ..."] + lines[-50:] if len(lines) > 60 else lines


def check(name, status, explanation, values=None, duration=0.0):
    CHECKS.append({"name": name, "status": status, "explanation": explanation, "values": values or {},
                   "duration_s": round(duration, 4)})


def load_factory(spec, search_path):
    """FILE.py:FUNC (a file, imported under its own name) or MODULE:FUNC (from the env or the cwd)."""
    target, _, func = spec.rpartition(":")
    for folder in reversed(search_path):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    if target.endswith(".py"):
        name = "envkit_user_model_" + os.path.splitext(os.path.basename(target))[0].replace("-", "_")
        module_spec = importlib.util.spec_from_file_location(name, target)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    factory = getattr(module, func, None)
    if not callable(factory):
        raise AttributeError("%s has no function %r" % (target, func))
    return factory


def unpack(made):
    if not isinstance(made, (tuple, list)) or len(made) not in (3, 4):
        raise TypeError("the factory must return (model, make_batch, loss_fn) or (model, make_batch, loss_fn, "
                        "make_optimizer); it returned %s" % type(made).__name__)
    model, make_batch, loss_fn = made[:3]
    make_optimizer = made[3] if len(made) == 4 else None
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError("the factory's first item must be a torch.nn.Module, not %s" % type(model).__name__)
    for label, fn in (("make_batch", make_batch), ("loss_fn", loss_fn)):
        if not callable(fn):
            raise TypeError("the factory's %s is not callable" % label)
    return model, make_batch, loss_fn, make_optimizer


def to_device(value, device):
    if hasattr(value, "to") and hasattr(value, "dtype"):
        return value.to(device)
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def call_model(model, inputs):
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def tensors_in(value, out):
    if hasattr(value, "is_floating_point") and hasattr(value, "detach"):
        if value.is_floating_point():
            out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            tensors_in(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            tensors_in(v, out)
    return out


def tensor_stats(torch, tensors):
    """Largest finite |x|, inf/nan present, share of exact zeros, over every float tensor of an output."""
    amax, numel, zeros, n_inf, n_nan, dtype = 0.0, 0, 0, 0, 0, None
    for t in tensors:
        x = t.detach()
        dtype = str(x.dtype).replace("torch.", "")
        x = x.float()
        finite = torch.isfinite(x)
        n_inf += int(torch.isinf(x).sum())
        n_nan += int(torch.isnan(x).sum())
        if bool(finite.any()):
            amax = max(amax, float(x[finite].abs().max()))
        zeros += int((x == 0).sum())
        numel += x.numel()
    return {"dtype": dtype, "amax": amax, "inf": n_inf, "nan": n_nan,
            "zero_frac": round(zeros / numel, 6) if numel else 0.0, "numel": numel}


def probe(torch, model, inputs, device_type, dtype):
    """One forward pass without grad; per module call (execution order) the stats of its output."""
    records = []
    handles = []

    def hook_for(path, module):
        def hook(_mod, _inp, output):
            if len(records) < PROBE_LIMIT:
                entry = {"path": path or "(model)", "class": type(module).__name__}
                entry.update(tensor_stats(torch, tensors_in(output, [])))
                records.append(entry)
        return hook

    for path, module in model.named_modules():
        handles.append(module.register_forward_hook(hook_for(path, module)))
    try:
        with torch.no_grad(), autocast_or_not(torch, device_type, dtype):
            call_model(model, inputs)
    finally:
        for h in handles:
            h.remove()
    return records


def autocast_or_not(torch, device_type, dtype):
    """autocast for a reduced precision; fp32 runs with no autocast context at all."""
    return torch.autocast(device_type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


def make_scaler(torch, device_type):
    """torch.amp.GradScaler(device) (torch >= 2.3), torch.cuda.amp.GradScaler before; None: none for this device."""
    amp = getattr(torch, "amp", None)
    if amp is not None and hasattr(amp, "GradScaler"):
        return amp.GradScaler(device_type)
    if device_type == "cuda":
        return torch.cuda.amp.GradScaler()
    return None


def autocast_applied(records, dtype):
    """Some module produced the reduced dtype (an empty probe means it raised: the run will say so)."""
    want = str(dtype).replace("torch.", "")
    return not records or any(r.get("dtype") == want for r in records)


def finite(value):
    return value == value and value not in (float("inf"), float("-inf"))


def sync(torch, device_type):
    if device_type == "cuda":
        torch.cuda.synchronize()


def train(torch, model, init_state, batches, loss_fn, make_optimizer, device_type, mode, steps, seed,
          time_budget=None):
    """One precision's run; returns its trajectory, the scale per step, timing and peak memory."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode)
    model.load_state_dict(init_state)
    model.train()
    torch.manual_seed(seed)
    try:
        opt = make_optimizer(model.parameters()) if make_optimizer else torch.optim.AdamW(model.parameters(), lr=1e-3)
    except Exception as exc:
        raise UserCodeError("make_optimizer", exc)
    scaler = make_scaler(torch, device_type) if mode == "fp16" else None
    if device_type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    losses, nonfinite, scales, skipped, times = [], [], [], [], []
    scale_initial = scaler.get_scale() if scaler is not None else None
    failure = None
    failure_error = None
    started = time.perf_counter()
    for step in range(steps):
        inputs, targets = batches(step)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        try:
            with autocast_or_not(torch, device_type, dtype):
                loss = loss_fn(call_model(model, inputs), targets)
            value = float(loss.detach().float())
        except Exception as exc:
            if dtype is None:
                raise UserCodeError("the forward pass or loss_fn (%s, step %d)" % (mode, step), exc)
            failure_error = precision_error("forward", step, exc)
            break
        if not finite(value):
            nonfinite.append(step)
            if failure is None and dtype is not None:
                failure = {"step": step, "fp32": probe(torch, model, inputs, device_type, None),
                           mode: probe(torch, model, inputs, device_type, dtype)}
        try:
            if scaler is not None:
                before = scaler.get_scale()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                after = scaler.get_scale()
                scales.append(after)
                if after < before:
                    skipped.append(step)
            else:
                loss.backward()
                opt.step()
        except Exception as exc:
            if dtype is None:
                raise UserCodeError("backward or the optimizer step (%s, step %d)" % (mode, step), exc)
            failure_error = precision_error("backward", step, exc)
            break
        sync(torch, device_type)
        times.append((time.perf_counter() - t0) * 1e3)
        losses.append(value if finite(value) else None)
        if time_budget is not None and time.perf_counter() - started > time_budget and step >= 9:
            break
    timed = sorted(times[3:] or times)
    record = {"dtype": str(dtype or torch.float32).replace("torch.", ""), "steps": len(losses),
              "losses": losses, "nonfinite_steps": nonfinite,
              "step_ms": round(timed[len(timed) // 2], 4) if timed else None,
              "peak_mem_mib": round(torch.cuda.max_memory_allocated() / 2 ** 20, 1) if device_type == "cuda" else None}
    if scaler is not None:
        record.update(scales=scales, skipped_steps=skipped, scale_initial=scale_initial)
    if failure is not None:
        record["probe_at_failure"] = failure
    if failure_error is not None:
        record["error"] = failure_error
    return record


def precision_error(phase, step, exc):
    """A reduced precision that raises where fp32 ran (an op without an fp16 kernel here): unsafe, not a bug."""
    return {"phase": phase, "step": step, "type": type(exc).__name__,
            "message": (str(exc).strip().splitlines() or [""])[0][:300],
            "traceback": traceback.format_exc().rstrip().splitlines()[-8:]}


MAX_BATCH_FACTOR = 256  # the search stops at 256x the factory's batch
MAX_BATCH_BUDGET_S = 15.0  # per precision


def doubling_search(fits, limit=MAX_BATCH_FACTOR, budget_s=MAX_BATCH_BUDGET_S, clock=time.perf_counter):
    """The largest factor k in 1, 2, 4, ... <= limit for which fits(k) is True (Lightning's BatchSizeFinder
    "power" mode, bounded): stops at the first failure, at the limit or when the time budget is spent."""
    start = clock()
    best, tried, k = 0, [], 1
    stopped = "reached the x%d bound" % limit
    while k <= limit:
        if tried and clock() - start > budget_s:
            stopped = "time budget of %.0f s spent" % budget_s
            break
        ok, why = fits(k)
        tried.append({"factor": k, "fits": ok, "why": why})
        if not ok:
            stopped = "x%d: %s" % (k, why)
            break
        best = k
        k *= 2
    return {"factor": best, "tried": tried, "stopped": stopped}


def repeat_batch(torch, value, k):
    if hasattr(value, "dim") and hasattr(value, "dtype"):
        return torch.cat([value] * k, 0) if value.dim() > 0 and k > 1 else value
    if isinstance(value, (tuple, list)):
        return type(value)(repeat_batch(torch, v, k) for v in value)
    if isinstance(value, dict):
        return {key: repeat_batch(torch, v, k) for key, v in value.items()}
    return value


def leading_size(value):
    if hasattr(value, "dim") and hasattr(value, "shape"):
        return int(value.shape[0]) if value.dim() > 0 else None
    if isinstance(value, (tuple, list)) and value:
        return leading_size(value[0])
    if isinstance(value, dict) and value:
        return leading_size(next(iter(value.values())))
    return None


def _is_oom(exc):
    text = str(exc)
    return "out of memory" in text.lower() or "CUBLAS_STATUS_ALLOC_FAILED" in text


def max_batch(torch, model, init_state, batch, loss_fn, make_optimizer, mode, device_type="cuda",
              limit=MAX_BATCH_FACTOR):
    """One training step at k times the factory's batch (the batch repeated), k doubling until out of memory."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode)
    inputs, targets = batch

    def step(k):  # its tensors and optimizer state are freed when it returns or its exception is handled
        model.load_state_dict(init_state)
        opt = make_optimizer(model.parameters()) if make_optimizer else torch.optim.AdamW(model.parameters(), lr=1e-3)
        scaler = make_scaler(torch, device_type) if mode == "fp16" else None
        x, y = repeat_batch(torch, inputs, k), repeat_batch(torch, targets, k)
        with autocast_or_not(torch, device_type, dtype):
            loss = loss_fn(call_model(model, x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        sync(torch, device_type)

    def fits(k):
        why = None
        try:
            step(k)
        except Exception as exc:
            why = "out of memory" if _is_oom(exc) else "%s: %s" % (
                type(exc).__name__, (str(exc).strip().splitlines() or [""])[0][:200])
        model.zero_grad(set_to_none=True)
        gc.collect()
        if device_type == "cuda":
            torch.cuda.empty_cache()
        return why is None, why

    found = doubling_search(fits, limit)
    base = leading_size(inputs)
    found["base_batch"] = base
    found["batch"] = base * found["factor"] if base else None
    model.load_state_dict(init_state)
    return found


def bf16_native(torch, device_type):
    """bf16 is native on compute capability >= 8.0 (Ampere); CPU autocast runs bf16 everywhere."""
    if device_type == "cpu":
        return None
    cc = torch.cuda.get_device_capability()
    if cc < (8, 0):
        return "compute capability %d.%d < 8.0: no native bf16" % cc
    return None


def run(options):
    started = time.perf_counter()
    report = {"payload_version": PAYLOAD_VERSION, "kind": "model", "python": platform.python_version(),
              "executable": sys.executable, "model": options.get("model"),
              "options": {k: v for k, v in options.items() if k != "machine"}}
    try:
        import torch
    except ImportError as exc:
        check("import", "fail", "torch is not installed in this environment (%s)" % exc)
        report.update(checks=CHECKS, torch=None)
        return report
    check("import", "pass", "import torch %s" % torch.__version__, {"torch": torch.__version__})
    report["torch"] = torch.__version__
    report["torch_cuda"] = torch.version.cuda
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    if device_type == "cuda":
        dev = int(options.get("device") or 0)
        torch.cuda.set_device(dev)
        report["gpus"] = [{"index": dev, "name": torch.cuda.get_device_name(dev),
                           "compute_capability": "%d.%d" % torch.cuda.get_device_capability(dev),
                           "memory_mib": torch.cuda.get_device_properties(dev).total_memory >> 20}]
        check("device", "pass", "training on %s" % report["gpus"][0]["name"], report["gpus"][0])
    else:
        check("device", "skip", "no usable GPU (torch.cuda.is_available() is False): CPU mode, CPU autocast "
              "fp16 and bf16", {"cuda_available": False, "torch_cuda": torch.version.cuda})
    report["device"] = device_type
    seed = int(options.get("seed", 0))
    steps = int(options.get("steps", 200))
    try:
        torch.manual_seed(seed)
        try:
            factory = load_factory(options["model"], options.get("path") or [])
        except Exception as exc:
            raise UserCodeError("importing %s" % options["model"].rpartition(":")[0], exc)
        try:
            model, make_batch, loss_fn, make_optimizer = unpack(factory())
        except Exception as exc:
            raise UserCodeError("calling the factory %s()" % options["model"].rpartition(":")[2], exc)
        model = model.to(device_type)
        init_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        cache = {}

        def batches(step):
            # the same batch for every precision, kept on the CPU and copied to the device at each use: every
            # precision pays the same copy and no run's peak memory holds the other runs' batches
            if step not in cache:
                try:
                    made = make_batch(step)
                    if not isinstance(made, (tuple, list)) or len(made) != 2:
                        raise TypeError("make_batch(step) must return (inputs, targets), not %s"
                                        % type(made).__name__)
                    cache[step] = made
                except Exception as exc:
                    raise UserCodeError("make_batch(%d)" % step, exc)
            inputs, targets = cache[step]
            return to_device(inputs, device_type), to_device(targets, device_type)

        report["model_class"] = type(model).__name__
        report["parameters"] = sum(p.numel() for p in model.parameters())
        check("factory", "pass", "%s: %s with %d parameters" % (options["model"], type(model).__name__,
                                                                report["parameters"]))
        bf16_reason = bf16_native(torch, device_type)
        modes = ["fp16"] + (["bf16"] if bf16_reason is None else [])
        inputs0 = batches(0)[0]
        try:
            report["probe"] = {"fp32": probe(torch, model, inputs0, device_type, None)}
        except Exception as exc:
            raise UserCodeError("the forward pass (fp32, step 0)", exc)
        not_applied = {}
        for mode in modes:
            dtype = torch.float16 if mode == "fp16" else torch.bfloat16
            try:
                report["probe"][mode] = probe(torch, model, inputs0, device_type, dtype)
            except Exception:  # the training run below meets it again and records it as this dtype's
                report["probe"][mode] = []
                continue
            if not autocast_applied(report["probe"][mode], dtype):
                # an old torch without e.g. CPU fp16 autocast warns and runs fp32: that would be judged "safe"
                not_applied[mode] = ("autocast(%s, %s) changed no module's output dtype: this torch does not "
                                     "run %s autocast here, so there is nothing to compare" % (
                                         device_type, mode, mode))
        if "fp16" in modes and make_scaler(torch, device_type) is None:
            not_applied["fp16"] = "torch %s has no GradScaler for %s (torch.amp.GradScaler: 2.3+)" % (
                torch.__version__, device_type)
        modes = [m for m in modes if m not in not_applied]
        precisions = {}
        with_budget = options.get("time_budget_s")
        precisions["fp32"] = train(torch, model, init_state, batches, loss_fn, make_optimizer, device_type,
                                   "fp32", steps, seed, with_budget)
        steps = precisions["fp32"]["steps"]
        for mode in modes:
            precisions[mode] = train(torch, model, init_state, batches, loss_fn, make_optimizer, device_type,
                                     mode, steps, seed)
        for mode, why in not_applied.items():
            precisions[mode] = {"skipped": why}
        if bf16_reason is not None:
            precisions["bf16"] = {"skipped": bf16_reason}
        if options.get("max_batch"):
            if device_type != "cuda":
                report["max_batch"] = {"skipped": "GPU only: on the CPU, memory is not what bounds the batch"}
            else:
                report["max_batch"] = {m: max_batch(torch, model, init_state, batches(0), loss_fn, make_optimizer, m)
                                       for m in precisions if "losses" in precisions[m]}
        report["precisions"] = precisions
        report["steps"] = steps
        check("training", "pass", "%d steps in %s" % (steps, ", ".join(precisions)), {"steps": steps})
    except UserCodeError as exc:
        report["user_error"] = {"phase": exc.phase, "type": exc.error_type, "message": exc.error_message,
                                "traceback": exc.traceback}
        check("user_code", "fail", "%s raised %s: %s" % (exc.phase, exc.error_type, exc.error_message[:300]))
    report["checks"] = CHECKS
    report["total_s"] = round(time.perf_counter() - started, 3)
    return report


def main(argv):
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run(options)
    report["warnings"] = sorted({"%s: %s" % (w.category.__name__, str(w.message)[:300]) for w in caught
                                 if "numpy" not in str(w.message).lower()})[:20]
    sys.stdout.write("\n" + MARKER + "\n" + json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
