"""The bundled payload's FP8 rule, imported without torch (the payload imports torch only inside run()):
who is gated out and why, and when FP8 results PASS, WARN or FAIL (information, not a gate)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from envkit.verify.payload import amp_check as ac

H200_BF16 = {"tflops": 795.0, "rel_err": 2.9e-3}  # anchors-2026.md 3.3, measured on the lent H200
H200_FP8 = {"tensorwise": {"finite": True, "rel_err": 3.75e-2, "tflops": 1467.0},
            "rowwise": {"finite": True, "rel_err": 3.75e-2, "tflops": 1428.0}}


def test_importing_the_payload_does_not_import_torch() -> None:
    root = Path(__file__).resolve().parents[3]
    code = "import sys; import envkit.verify.payload.amp_check; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=root, timeout=60).returncode == 0


def test_the_fp8_matmuls_run_for_real_on_cpu_torch() -> None:
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "_scaled_mm"):
        pytest.skip("this torch has no _scaled_mm")

    def time_ms(fn):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3

    bf16, results = ac.fp8_matmuls(torch, "cpu", 256, time_ms)
    assert bf16["rel_err"] < 0.01 and bf16["tflops"] >= 0
    for recipe in ("tensorwise", "rowwise"):
        row = results[recipe]
        if "error" in row:  # a CPU build without that FP8 kernel: recorded, not raised
            continue
        assert row["finite"] and 0.01 < row["rel_err"] < ac.FP8_MAX_REL_ERR  # e4m3: about 0.04, as on the H200
    assert ac.fp8_verdict(results, bf16)[0] in ("pass", "warn")


@pytest.mark.parametrize(("cc", "has", "why"), [((8, 6), True, "compute capability 8.6 < 8.9"),
                                                ((8, 0), True, "no FP8 tensor cores"),
                                                ((9, 0), False, "has no torch._scaled_mm")])
def test_gate_says_why_fp8_is_not_tried(cc: tuple[int, int], has: bool, why: str) -> None:
    reason = ac.fp8_gate(cc, has, "2.0.1")
    assert reason is not None and why in reason


@pytest.mark.parametrize("cc", [(8, 9), (9, 0), (10, 0), (12, 0)])
def test_ada_hopper_and_newer_are_tried(cc: tuple[int, int]) -> None:
    assert ac.fp8_gate(cc, True, "2.11.0") is None


def test_the_measured_h200_figures_pass_with_the_speedup_named() -> None:
    status, text = ac.fp8_verdict(H200_FP8, H200_BF16)
    assert status == "pass"
    assert "tensorwise 1467 TFLOP/s (1.85x bf16), rel. error 0.037" in text and "rowwise 1428" in text


def test_non_finite_fails() -> None:
    results = dict(H200_FP8, rowwise={"finite": False, "rel_err": float("nan"), "tflops": 1400.0})
    assert ac.fp8_verdict(results, H200_BF16) == ("fail", "FP8 rowwise matmul gave non-finite values")


def test_grossly_wrong_fails_at_the_bar_not_below() -> None:
    at_bar = dict(H200_FP8, tensorwise={"finite": True, "rel_err": ac.FP8_MAX_REL_ERR, "tflops": 1467.0})
    assert ac.fp8_verdict(at_bar, H200_BF16)[0] == "pass"
    wrong = dict(H200_FP8, tensorwise={"finite": True, "rel_err": 0.5, "tflops": 1467.0})
    status, text = ac.fp8_verdict(wrong, H200_BF16)
    assert status == "fail" and "grossly wrong: relative error 0.5" in text


def test_a_recipe_this_torch_lacks_is_a_warning_not_a_failure() -> None:
    results = {"tensorwise": H200_FP8["tensorwise"], "rowwise": {"error": "Invalid scaling configuration"}}
    status, text = ac.fp8_verdict(results, H200_BF16)
    assert status == "warn" and "rowwise raised: Invalid scaling configuration" in text
    status, text = ac.fp8_verdict({"tensorwise": {"error": "no kernel"}, "rowwise": {"error": "no kernel"}},
                                  H200_BF16)
    assert status == "warn" and "raised for every recipe" in text


def test_slower_than_bf16_is_still_information() -> None:
    slow = {"tensorwise": {"finite": True, "rel_err": 0.04, "tflops": 100.0}}
    status, text = ac.fp8_verdict(slow, H200_BF16)
    assert status == "pass" and "(0.13x bf16)" in text


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """CPU torch with the GPU answered at its seam: compute capability, free memory, the cache."""
    torch = pytest.importorskip("torch")
    state = {"cc": (9, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: state["cc"])
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(ac, "_free_memory", lambda torch, dev: 1 << 30)
    monkeypatch.setattr(ac, "CHECKS", [])
    return torch, state


def test_check_fp8_skips_below_ada_with_the_reason(fake_gpu) -> None:  # type: ignore[no-untyped-def]
    torch, state = fake_gpu
    state["cc"] = (8, 6)
    entry = ac.check_fp8(torch, 0)
    assert entry["status"] == "skip" and "8.6 < 8.9" in entry["explanation"]


def test_check_fp8_that_cannot_run_warns_and_wrong_numbers_fail(fake_gpu, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    torch, _state = fake_gpu

    def no_kernel(*_a: object) -> None:
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

    monkeypatch.setattr(ac, "fp8_matmuls", no_kernel)
    entry = ac.check_fp8(torch, 0)
    assert entry["status"] == "warn" and "could not run: RuntimeError: CUDA error: no kernel image" in \
        entry["explanation"]
    nan = {"tensorwise": {"finite": False, "rel_err": float("nan"), "tflops": 1.0}}
    monkeypatch.setattr(ac, "fp8_matmuls", lambda *_a: (H200_BF16, nan))
    entry = ac.check_fp8(torch, 0)
    assert entry["status"] == "fail" and entry["values"]["n"] == 4096  # under 8 GiB free: 4096^3
