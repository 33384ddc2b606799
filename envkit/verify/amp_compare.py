"""Is AMP safe for the user's model? The rules, as pure functions of the recorded trajectories.

The payload (payload/model_check.py) only measures; everything judged here is tested on recorded data
without torch. The rules, stated once (README "Is AMP safe for my model?"):

- agreement: both loss curves are smoothed by a trailing mean over w = max(1, steps // 10) steps; the gap
  at a step is |amp - fp32| / max(|fp32|, 5% of fp32's first smoothed loss); a precision AGREES when the
  largest gap over the last quarter of the steps is <= AGREE_TOLERANCE (10%).
- unsafe: any non-finite loss (an overflow in the forward pass, which GradScaler cannot repair), an error
  that fp32 did not raise, more skipped GradScaler steps than max(3, 5% of the steps) (the scale keeps
  falling: HF/PyTorch AMP guides), or no agreement.
- the first module whose reduced-precision output has inf/nan where fp32's is finite (overflow), or whose
  output is exactly zero for at least half more of its elements than in fp32 (underflow), in the order
  the modules ran (forward hooks), from the probe at the initial weights or at the first non-finite step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

AGREE_TOLERANCE = 0.10
NEAR_TOLERANCE = 0.05  # agreement, but worth a note
FLOOR_SHARE = 0.05
SKIP_ALLOWANCE = (3, 0.05)  # skipped GradScaler steps tolerated: max(3, 5% of the steps)
UNDERFLOW_SHARE = 0.5
FP16_MAX = 65504.0
REDUCED = ("fp16", "bf16")


def smooth(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over `window` values (the first ones over what there is)."""
    out: list[float] = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def window_for(steps: int) -> int:
    return max(1, steps // 10)


def agreement(fp32: Sequence[float | None], other: Sequence[float | None]) -> dict[str, Any]:
    """The relative gap of the smoothed curves; `agree` by the rule in this module's docstring."""
    n = min(len(fp32), len(other))
    if n == 0 or any(v is None for v in fp32[:n]) or any(v is None for v in other[:n]):
        return {"agree": False, "final_gap": None, "max_gap": None, "window": None,
                "why": "a loss was not finite, so the curves cannot be compared"}
    w = window_for(n)
    a = smooth([float(v) for v in fp32[:n] if v is not None], w)
    b = smooth([float(v) for v in other[:n] if v is not None], w)
    floor = max(FLOOR_SHARE * abs(a[0]), 1e-12)
    gaps = [abs(y - x) / max(abs(x), floor) for x, y in zip(a, b)]
    tail = gaps[n - max(1, n // 4):]
    final = max(tail)
    return {"agree": final <= AGREE_TOLERANCE, "final_gap": round(final, 6), "max_gap": round(max(gaps), 6),
            "window": w, "gaps": [round(g, 6) for g in gaps]}


def scale_trend(scales: Sequence[float], initial: float | None) -> dict[str, Any]:
    """GradScaler's scale: where it went and whether it was still falling in the second half."""
    if not scales:
        return {"trend": "none"}
    start = initial if initial else scales[0]
    half = scales[len(scales) // 2:]
    falls_late = sum(1 for x, y in zip(half, half[1:]) if y < x)
    final = scales[-1]
    trend = "falling" if final < start and falls_late else ("growing" if final > start else
                                                            ("stable" if final == start else "settled lower"))
    return {"trend": trend, "initial": start, "final": final, "min": min(scales),
            "halvings": round(math.log2(start / final), 2) if final > 0 else None, "late_falls": falls_late}


def skip_allowance(steps: int) -> int:
    return max(SKIP_ALLOWANCE[0], int(SKIP_ALLOWANCE[1] * steps))


def judge(mode: str, record: dict[str, Any], fp32: dict[str, Any]) -> dict[str, Any]:
    """One reduced precision against fp32: safe / unsafe / skipped, with every reason."""
    if "skipped" in record:
        return {"precision": mode, "status": "skipped", "reasons": [record["skipped"]]}
    steps = int(record.get("steps") or 0)
    reasons: list[str] = []
    notes: list[str] = []
    out: dict[str, Any] = {"precision": mode, "steps": steps}
    if record.get("error"):
        err = record["error"]
        reasons.append(f"{err.get('phase', 'a step')} raised {err.get('type')} at step {err.get('step')} "
                       f"under {mode} autocast (fp32 ran): {err.get('message', '')}")
    nonfinite = list(record.get("nonfinite_steps") or [])
    if nonfinite:
        reasons.append(f"the loss was not finite at {len(nonfinite)} of {steps} steps (first: step {nonfinite[0]}): "
                       f"the forward pass overflows, which GradScaler cannot repair")
    if "scales" in record:
        skipped = list(record.get("skipped_steps") or [])
        out["skipped_steps"] = len(skipped)
        out["scale"] = scale_trend(record["scales"], record.get("scale_initial"))
        if len(skipped) > skip_allowance(steps) and not nonfinite:
            reasons.append(f"GradScaler skipped {len(skipped)} of {steps} steps (allowed {skip_allowance(steps)}); "
                           f"the scale fell to {out['scale'].get('final'):g}")
        elif out["scale"]["trend"] == "falling" and not nonfinite:
            notes.append("the GradScaler scale was still falling in the second half of the run")
    agree = agreement(fp32.get("losses") or [], record.get("losses") or [])
    out["agreement"] = {k: v for k, v in agree.items() if k != "gaps"}
    out["gaps"] = agree.get("gaps")
    if not nonfinite and not record.get("error") and not agree["agree"]:
        reasons.append(f"its smoothed loss is {agree['final_gap']:.1%} away from fp32's over the last quarter "
                       f"of the run (tolerance {AGREE_TOLERANCE:.0%})")
    elif agree["agree"] and agree["final_gap"] is not None and agree["final_gap"] > NEAR_TOLERANCE:
        notes.append(f"loss within {agree['final_gap']:.1%} of fp32, close to the {AGREE_TOLERANCE:.0%} tolerance")
    out.update(speed_memory(record, fp32))
    if reasons:  # skipped or broken steps are not the same work: no speed-up is claimed for them
        out["speedup"] = None
    out["status"] = "unsafe" if reasons else "safe"
    out["reasons"] = reasons
    out["notes"] = notes
    return out


def speed_memory(record: dict[str, Any], fp32: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"step_ms": record.get("step_ms"), "peak_mem_mib": record.get("peak_mem_mib")}
    if record.get("step_ms") and fp32.get("step_ms"):
        out["speedup"] = round(fp32["step_ms"] / record["step_ms"], 3)
    if record.get("peak_mem_mib") and fp32.get("peak_mem_mib"):
        out["memory_ratio"] = round(record["peak_mem_mib"] / fp32["peak_mem_mib"], 3)
    return out


def first_offender(fp32: Sequence[dict[str, Any]], reduced: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The first module call (execution order) whose reduced output overflows or underflows against fp32."""
    for ref, got in zip(fp32, reduced):
        if ref.get("path") != got.get("path"):
            break  # the call orders differ: what follows cannot be paired
        ref_finite = not ref.get("inf") and not ref.get("nan")
        if ref_finite and (got.get("inf") or got.get("nan")):
            return {"kind": "overflow", "path": got["path"], "class": got.get("class"),
                    "inf": got.get("inf"), "nan": got.get("nan"), "numel": got.get("numel"),
                    "fp32_amax": ref.get("amax"), "dtype": got.get("dtype")}
        if ref_finite and (ref.get("amax") or 0) > 0 and \
                (got.get("zero_frac") or 0) - (ref.get("zero_frac") or 0) >= UNDERFLOW_SHARE:
            return {"kind": "underflow", "path": got["path"], "class": got.get("class"),
                    "zero_frac": got.get("zero_frac"), "fp32_zero_frac": ref.get("zero_frac"),
                    "fp32_amax": ref.get("amax"), "dtype": got.get("dtype")}
    return None


def offender_for(payload: dict[str, Any], mode: str) -> dict[str, Any] | None:
    """Look at the initial weights first, then at the first step whose loss was not finite."""
    probes = payload.get("probe") or {}
    found = first_offender(probes.get("fp32") or [], probes.get(mode) or [])
    if found:
        return dict(found, when="at the initial weights")
    later = ((payload.get("precisions") or {}).get(mode) or {}).get("probe_at_failure")
    if later:
        found = first_offender(later.get("fp32") or [], later.get(mode) or [])
        if found:
            return dict(found, when=f"at step {later.get('step')}, the first with a non-finite loss")
    return None


def fp32_problem(fp32: dict[str, Any]) -> str | None:
    """The baseline itself must train: finite, and a number of steps to compare."""
    if not fp32.get("losses"):
        return "the fp32 baseline ran no step"
    if fp32.get("nonfinite_steps"):
        return (f"the fp32 baseline's loss is not finite at {len(fp32['nonfinite_steps'])} step(s) (first: step "
                f"{fp32['nonfinite_steps'][0]}): the model is broken before any reduced precision")
    return None


BF16_CODE = """\
with torch.autocast("{dev}", dtype=torch.bfloat16):
    loss = loss_fn(model(inputs), targets)
loss.backward()
optimizer.step()"""

FP16_CODE = """\
scaler = torch.amp.GradScaler("{dev}")
...
with torch.autocast("{dev}", dtype=torch.float16):
    loss = loss_fn(model(inputs), targets)
scaler.scale(loss).backward()
scaler.step(optimizer)
scaler.update()"""

KEEP_FP32_CODE = """\
# in the forward() that calls `{call}` ({cls}): run it outside autocast, in float32
with torch.autocast("{dev}", enabled=False):
    x = {call}(x.float())"""


def module_call(path: str) -> str:
    """How the parent's forward() spells the offending module: self.<last attribute> (or self[i])."""
    leaf = path.rsplit(".", 1)[-1]
    return f"self[{leaf}]" if leaf.isdigit() else f"self.{leaf}" if path != "(model)" else "model"


def recommend(judged: dict[str, dict[str, Any]], offenders: dict[str, dict[str, Any] | None]) -> dict[str, Any]:
    """bf16 when safe (no scaler, fp32's range); else fp16 + GradScaler; else fp32, with the module to fix."""
    dev = "cuda"  # the code is for the GPU the user trains on, also when this run was on the CPU
    safe = [m for m in ("bf16", "fp16") if judged.get(m, {}).get("status") == "safe"]
    fix: dict[str, Any] = offenders.get("fp16") or offenders.get("bf16") or {}
    fix_code = KEEP_FP32_CODE.format(call=module_call(fix["path"]), cls=fix.get("class"), dev=dev) if fix else None
    if safe:
        choice = safe[0]
        code = (BF16_CODE if choice == "bf16" else FP16_CODE).format(dev=dev)
        reason = {"bf16": "bf16 agrees with fp32 and keeps fp32's exponent range, so it needs no GradScaler",
                  "fp16": "fp16 with GradScaler agrees with fp32"}[choice]
        others = [m for m in REDUCED if m != choice and judged.get(m, {}).get("status") == "unsafe"]
        if choice == "bf16" and "fp16" in safe:
            reason += "; fp16 + GradScaler is safe too (for GPUs without bf16: compute capability < 8.0)"
        result = {"choice": choice, "code": code, "reason": reason}
        if others and fix_code:
            result["also"] = (f"{others[0]} is not safe: keep `{fix['path']}` ({fix.get('class')}) in fp32 "
                              f"if you need {others[0]}")
            result["also_code"] = fix_code
        return result
    why = "; ".join(f"{m}: {r}" for m in REDUCED for r in judged.get(m, {}).get("reasons", [])[:1]
                    if judged.get(m, {}).get("status") == "unsafe")
    if fix_code:
        return {"choice": "fp32", "reason": f"no reduced precision is safe as is ({why}); the first module "
                f"that {fix['kind']}s is `{fix['path']}` ({fix.get('class')}): keep it in fp32 and run "
                "verify --model again", "code": fix_code}
    return {"choice": "fp32", "reason": f"stay in fp32: no reduced precision is safe ({why})", "code": None}


def analyse(payload: dict[str, Any]) -> dict[str, Any]:
    """The whole judgement of one `verify --model` run: per precision, offenders, recommendation, outcome."""
    precisions = payload.get("precisions") or {}
    fp32 = precisions.get("fp32") or {}
    cpu = payload.get("device") != "cuda"
    problem = fp32_problem(fp32)
    if problem:
        return {"outcome": "FAIL", "cpu_mode": cpu, "precisions": {}, "offenders": {},
                "recommendation": {"choice": None, "reason": problem, "code": None}, "summary": problem}
    judged = {m: judge(m, precisions[m], fp32) for m in REDUCED if m in precisions}
    offenders = {m: offender_for(payload, m) for m in judged if judged[m]["status"] == "unsafe"}
    rec = recommend(judged, offenders)
    safe = [m for m, j in judged.items() if j["status"] == "safe"]
    unsafe = [m for m, j in judged.items() if j["status"] == "unsafe"]
    parts = [f"{', '.join(safe)} safe" if safe else "", f"{', '.join(unsafe)} unsafe" if unsafe else ""]
    for m in unsafe:
        off = offenders.get(m)
        if off:
            parts.append(f"first {m} {off['kind']}: {off['path']} ({off['class']})")
    text = "; ".join(p for p in parts if p)
    where = "CPU mode (no GPU; CPU autocast): " if cpu else ""
    if not safe and not unsafe:
        outcome = "FAIL"
        why = "; ".join(f"{m}: {j['reasons'][0]}" for m, j in judged.items() if j.get("reasons"))
        summary = f"{where}no reduced precision could be run here ({why or 'none was measured'})"
    elif not safe:
        outcome = "FAIL"
        summary = f"{where}no reduced precision is safe for this model: {text}. Recommended: {rec['reason']}"
    elif cpu:
        outcome = "SKIPPED"
        summary = (f"{where}{text}; recommended {rec['choice']}. Not proven on a GPU: run it there "
                   "for the GPU verdict, speed and memory")
    else:
        outcome = "PASS"
        summary = f"{text}; recommended {rec['choice']}: {rec['reason']}"
    return {"outcome": outcome, "cpu_mode": cpu, "precisions": judged, "offenders": offenders,
            "recommendation": rec, "summary": summary, "max_batch": max_batch_summary(payload.get("max_batch"))}


def max_batch_summary(found: dict[str, Any] | None) -> dict[str, Any] | None:
    """--max-batch: the largest batch per precision and its ratio to fp32's (GPU only)."""
    if not found:
        return None
    if "skipped" in found:
        return {"skipped": found["skipped"]}
    base = (found.get("fp32") or {}).get("factor") or 0
    out: dict[str, Any] = {}
    for mode, row in found.items():
        if isinstance(row, dict) and "factor" in row:
            out[mode] = {"batch": row.get("batch"), "factor": row["factor"], "stopped": row.get("stopped"),
                         "vs_fp32": round(row["factor"] / base, 2) if base else None}
    return out


def checks_of(analysis: dict[str, Any], fp32: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per precision and one for the recommendation, in the checks table's shape."""
    rows = [{"name": "fp32", "status": "pass", "duration_s": 0.0, "values": speed_memory(fp32, fp32),
             "explanation": f"baseline: {fp32.get('steps')} steps, loss {_first_last(fp32)}"}]
    status_of = {"safe": "pass", "unsafe": "fail", "skipped": "skip"}
    for mode, j in analysis["precisions"].items():
        if j["status"] == "skipped":
            text = f"not run: {j['reasons'][0]}"
        elif j["status"] == "safe":
            gap = j["agreement"]["final_gap"]
            text = f"safe: within {gap:.1%} of fp32 (tolerance {AGREE_TOLERANCE:.0%})"
            if j.get("skipped_steps") is not None:
                text += f", {j['skipped_steps']} skipped step(s), scale {j['scale'].get('trend')}"
            text += "".join(f"; {n}" for n in j.get("notes", []))
        else:
            text = "unsafe: " + "; ".join(j["reasons"])
        rows.append({"name": mode, "status": status_of[j["status"]], "duration_s": 0.0, "explanation": text,
                     "values": {k: v for k, v in j.items() if k not in ("gaps", "reasons", "notes")}})
    found = analysis.get("max_batch")
    if found and "skipped" in found:
        rows.append({"name": "max_batch", "status": "skip", "duration_s": 0.0, "values": found,
                     "explanation": f"not searched: {found['skipped']}"})
    elif found:
        parts = [f"{m} {r['batch'] if r['batch'] is not None else 'x' + str(r['factor'])}"
                 + (f" ({r['vs_fp32']:.2g}x fp32)" if m != "fp32" and r.get("vs_fp32") else "")
                 + f" [{r['stopped']}]" for m, r in found.items()]
        rows.append({"name": "max_batch", "status": "pass", "duration_s": 0.0, "values": found,
                     "explanation": "largest batch by doubling (one training step each): " + "; ".join(parts)})
    for mode, off in analysis["offenders"].items():
        if off:
            where = f"{off['inf']} inf, {off['nan']} nan" if off["kind"] == "overflow" else \
                f"{off['zero_frac']:.0%} zeros vs {off['fp32_zero_frac']:.0%} in fp32"
            rows.append({"name": f"{mode}_first_module", "status": "fail", "duration_s": 0.0, "values": off,
                         "explanation": f"{off['path']} ({off['class']}) is the first module whose {mode} output "
                                        f"{off['kind']}s ({where}; fp32 max |x| {off['fp32_amax']:.3g}), "
                                        f"{off['when']}"})
    return rows


def _first_last(record: dict[str, Any]) -> str:
    losses = [v for v in record.get("losses") or [] if v is not None]
    return f"{losses[0]:.4g} -> {losses[-1]:.4g}" if losses else "none"
