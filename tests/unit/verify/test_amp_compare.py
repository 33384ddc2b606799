"""verify --model's rules on recorded trajectories (CPU payload runs) and on trajectories built to sit on
either side of each threshold: agreement, non-finite losses, GradScaler skips and scale trend, the first
module that overflows or underflows, the recommendation and the outcome (exit code)."""

from __future__ import annotations

import copy
import json

import pytest

from envkit.verify import amp_compare as ac
from envkit.verify.report import build_model_report
from helpers import FIXTURES

REC = FIXTURES / "verify"


def load(name: str) -> dict:
    return json.loads((REC / f"model-{name}-cpu.json").read_text())


def run(losses: list[float | None], **extra: object) -> dict:
    return {"steps": len(losses), "losses": losses, "nonfinite_steps": [i for i, v in enumerate(losses) if v is None],
            "step_ms": 2.0, "peak_mem_mib": None, **extra}


def as_gpu(payload: dict) -> dict:
    data = copy.deepcopy(payload)
    data["device"] = "cuda"
    return data


# -- recorded runs ----------------------------------------------------------------------------------
def test_recorded_tiny_eps_norm_names_the_norm_and_recommends_bf16() -> None:
    analysis = ac.analyse(load("tiny-eps-norm"))
    assert analysis["precisions"]["fp16"]["status"] == "unsafe"
    assert "not finite" in analysis["precisions"]["fp16"]["reasons"][0]
    assert analysis["precisions"]["bf16"]["status"] == "safe"
    off = analysis["offenders"]["fp16"]
    assert (off["kind"], off["path"], off["class"]) == ("overflow", "norm", "TinyEpsRMSNorm")
    rec = analysis["recommendation"]
    assert rec["choice"] == "bf16" and 'torch.autocast("cuda", dtype=torch.bfloat16)' in rec["code"]
    assert 'torch.autocast("cuda", enabled=False)' in rec["also_code"] and "self.norm(x.float())" in rec["also_code"]
    assert analysis["outcome"] == "SKIPPED" and analysis["summary"].startswith("CPU mode")


def test_recorded_stable_mlp_is_safe_in_both() -> None:
    analysis = ac.analyse(load("stable-mlp"))
    assert {m: j["status"] for m, j in analysis["precisions"].items()} == {"fp16": "safe", "bf16": "safe"}
    assert analysis["offenders"] == {}
    assert analysis["recommendation"]["choice"] == "bf16" and "fp16 + GradScaler is safe too" in \
        analysis["recommendation"]["reason"]
    assert ac.analyse(as_gpu(load("stable-mlp")))["outcome"] == "PASS"


def test_recorded_cancellation_is_unsafe_everywhere_and_fails() -> None:
    analysis = ac.analyse(load("cancellation"))
    assert all(j["status"] == "unsafe" for j in analysis["precisions"].values())
    assert "tolerance 10%" in analysis["precisions"]["bf16"]["reasons"][0]
    assert analysis["recommendation"]["choice"] == "fp32" and analysis["recommendation"]["code"] is None
    assert analysis["outcome"] == "FAIL"
    assert ac.analyse(as_gpu(load("cancellation")))["outcome"] == "FAIL"


@pytest.mark.parametrize(("name", "device", "code"), [("stable-mlp", "cuda", 0), ("stable-mlp", "cpu", 4),
                                                      ("tiny-eps-norm", "cuda", 0), ("cancellation", "cuda", 3),
                                                      ("cancellation", "cpu", 3)])
def test_exit_codes(name: str, device: str, code: int) -> None:
    payload = dict(load(name), device=device)
    report = build_model_report(payload, None, "/opt/env/bin/python", None)
    assert int(report.exit_code) == code
    names = [c["name"] for c in report.checks]
    assert names[:2] == ["import", "device"] and "fp32" in names and "fp16" in names


# -- agreement ---------------------------------------------------------------------------------------
def test_smooth_is_a_trailing_mean() -> None:
    assert ac.smooth([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]


def test_agreement_sits_on_the_ten_percent_line() -> None:
    base = [2.0 - 0.01 * i for i in range(40)]
    inside = [v * 1.09 for v in base]
    outside = [v * 1.11 for v in base]
    assert ac.agreement(base, inside)["agree"] and not ac.agreement(base, outside)["agree"]
    assert ac.agreement(base, outside)["final_gap"] == pytest.approx(0.11, abs=1e-6)


def test_only_the_last_quarter_decides_but_max_gap_is_kept() -> None:
    base = [1.0] * 40
    early_spike = [3.0] * 10 + [1.0] * 30
    result = ac.agreement(base, early_spike)
    assert result["agree"] and result["max_gap"] > 1.0


def test_a_loss_near_zero_is_compared_against_a_floor() -> None:
    base = [1.0] + [1e-6] * 39
    other = [1.0] + [2e-6] * 39  # a relative gap of 100%, but 1e-6 of the starting loss
    assert ac.agreement(base, other)["agree"]


def test_non_finite_losses_never_agree() -> None:
    assert not ac.agreement([1.0, 1.0], [1.0, None])["agree"]


# -- judging one precision --------------------------------------------------------------------------
def test_a_non_finite_loss_is_unsafe_even_if_the_rest_agrees() -> None:
    fp32 = run([1.0] * 20)
    judged = ac.judge("bf16", run([1.0] * 10 + [None] + [1.0] * 9), fp32)
    assert judged["status"] == "unsafe" and "at 1 of 20 steps (first: step 10)" in judged["reasons"][0]


def test_a_few_early_skips_are_normal_more_are_unsafe() -> None:
    fp32 = run([1.0] * 100)
    scales = [65536.0 / 2 ** min(i + 1, 3) for i in range(100)]
    few = ac.judge("fp16", run([1.0] * 100, scales=scales, skipped_steps=[0, 1, 2], scale_initial=65536.0), fp32)
    assert few["status"] == "safe" and few["skipped_steps"] == 3 and few["scale"]["trend"] == "settled lower"
    many = list(range(0, 12))
    shrinking = [65536.0 / 2 ** min(i + 1, 12) for i in range(100)]
    judged = ac.judge("fp16", run([1.0] * 100, scales=shrinking, skipped_steps=many, scale_initial=65536.0), fp32)
    assert judged["status"] == "unsafe" and "skipped 12 of 100 steps (allowed 5)" in judged["reasons"][0]


def test_a_scale_still_falling_late_is_a_note() -> None:
    scales = [65536.0] * 10 + [32768.0] * 5 + [16384.0] * 5
    trend = ac.scale_trend(scales, 65536.0)
    assert trend["trend"] == "falling" and trend["halvings"] == 2.0 and trend["late_falls"] == 1
    assert ac.scale_trend([65536.0, 131072.0], 65536.0)["trend"] == "growing"


def test_an_error_only_the_reduced_precision_raised_is_unsafe() -> None:
    err = {"phase": "backward", "step": 0, "type": "RuntimeError", "message": "no fp16 kernel"}
    judged = ac.judge("fp16", dict(run([]), error=err), run([1.0] * 10))
    assert judged["status"] == "unsafe" and "backward raised RuntimeError at step 0" in judged["reasons"][0]


def test_a_broken_fp32_baseline_fails_before_any_comparison() -> None:
    payload = {"device": "cuda", "precisions": {"fp32": run([1.0, None]), "fp16": run([1.0, 1.0])}}
    analysis = ac.analyse(payload)
    assert analysis["outcome"] == "FAIL" and "fp32 baseline's loss is not finite" in analysis["summary"]


# -- the module that overflows / underflows ---------------------------------------------------------
def rec(path: str, cls: str, amax: float = 1.0, inf: int = 0, nan: int = 0, zero: float = 0.0) -> dict:
    return {"path": path, "class": cls, "amax": amax, "inf": inf, "nan": nan, "zero_frac": zero, "numel": 100}


def test_the_first_module_in_execution_order_is_named_not_its_victims() -> None:
    fp32 = [rec("embed", "Embedding"), rec("blocks.0.norm", "MyNorm"), rec("blocks.0.ff", "Linear"),
            rec("(model)", "Net")]
    fp16 = [rec("embed", "Embedding"), rec("blocks.0.norm", "MyNorm", inf=3), rec("blocks.0.ff", "Linear", nan=100),
            rec("(model)", "Net", nan=100)]
    off = ac.first_offender(fp32, fp16)
    assert off is not None and (off["kind"], off["path"], off["class"], off["inf"]) == \
        ("overflow", "blocks.0.norm", "MyNorm", 3)
    assert ac.module_call("blocks.0.norm") == "self.norm" and ac.module_call("layers.3") == "self[3]"


def test_an_output_that_vanishes_to_zero_is_an_underflow() -> None:
    fp32 = [rec("scale", "Scale", amax=1e-6, zero=0.0)]
    assert ac.first_offender(fp32, [rec("scale", "Scale", amax=0.0, zero=0.6)])["kind"] == "underflow"
    assert ac.first_offender(fp32, [rec("scale", "Scale", amax=1e-6, zero=0.4)]) is None


def test_inf_already_in_fp32_is_not_blamed_on_fp16() -> None:
    assert ac.first_offender([rec("a", "A", inf=1)], [rec("a", "A", inf=1)]) is None


def test_the_probe_at_the_first_bad_step_is_used_when_the_start_was_clean() -> None:
    clean = [rec("norm", "Norm")]
    payload = {"probe": {"fp32": clean, "fp16": clean},
               "precisions": {"fp16": {"probe_at_failure": {"step": 7, "fp32": clean,
                                                            "fp16": [rec("norm", "Norm", inf=1)]}}}}
    off = ac.offender_for(payload, "fp16")
    assert off is not None and off["path"] == "norm" and "step 7" in off["when"]


def test_with_nothing_safe_but_a_named_module_the_fix_is_code_to_paste() -> None:
    judged = {"fp16": {"status": "unsafe", "reasons": ["overflow"]}, "bf16": {"status": "skipped", "reasons": ["cc"]}}
    offender = {"kind": "overflow", "path": "enc.attn", "class": "MyAttention"}
    result = ac.recommend(judged, {"fp16": offender})
    assert result["choice"] == "fp32" and "`enc.attn` (MyAttention)" in result["reason"]
    assert "with torch.autocast(\"cuda\", enabled=False):\n    x = self.attn(x.float())" in result["code"]


def test_fp16_is_recommended_with_its_scaler_when_bf16_is_not_native() -> None:
    judged = {"fp16": {"status": "safe"}, "bf16": {"status": "skipped", "reasons": ["compute capability 7.5"]}}
    result = ac.recommend(judged, {})
    assert result["choice"] == "fp16" and 'scaler = torch.amp.GradScaler("cuda")' in result["code"]


def test_no_speed_up_is_claimed_for_an_unsafe_precision() -> None:
    analysis = ac.analyse(as_gpu(load("tiny-eps-norm")))
    assert analysis["precisions"]["fp16"]["speedup"] is None  # every step skipped: not the same work
    assert analysis["precisions"]["bf16"]["speedup"] is not None


def test_when_autocast_ran_nothing_in_reduced_precision_nothing_is_claimed() -> None:
    payload = {"device": "cpu", "precisions": {"fp32": run([1.0] * 8),
                                               "fp16": {"skipped": "autocast(cpu, fp16) changed no module's output"},
                                               "bf16": {"skipped": "autocast(cpu, bf16) changed no module's output"}}}
    analysis = ac.analyse(payload)
    assert analysis["outcome"] == "FAIL" and "no reduced precision could be run here" in analysis["summary"]
    assert "fp16: autocast(cpu, fp16) changed no module's output" in analysis["summary"]
