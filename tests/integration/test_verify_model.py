"""`envkit verify --model` end to end on the CPU: the env's own python (the test venv's torch) runs the three
examples, a stable model, a model no reduced precision can train and a factory with a bug of its own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import FIXTURES, run_cli

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
MODELS = FIXTURES / "models"


def verify_model(capsys: pytest.CaptureFixture[str], spec: str, steps: int, *extra: str) -> tuple[int, dict, str]:
    code, out, err = run_cli(capsys, "verify", "--python", sys.executable, "--model", spec, "--steps", str(steps),
                             "--json", *extra)
    return code, (json.loads(out) if out.strip() else {}), err


def statuses(report: dict) -> dict[str, str]:
    return {m: j["status"] for m, j in report["analysis"]["precisions"].items()}


def test_tiny_eps_norm_names_the_module_whose_fp16_output_overflows(capsys: pytest.CaptureFixture[str],
                                                                   tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    code, out, _ = run_cli(capsys, "verify", "--python", sys.executable, "--model",
                           str(ROOT / "examples/tiny_eps_norm.py:small"), "--steps", "12", "--report", str(saved))
    assert code == 4  # CPU mode: never a PASS
    assert "SKIPPED: CPU mode" in out and "SKIPPED is not PASS" in out
    assert 'with torch.autocast("cuda", dtype=torch.bfloat16):' in out
    assert 'with torch.autocast("cuda", enabled=False):' in out and "self.norm(x.float())" in out
    report = json.loads(saved.read_text())
    assert report["outcome"] == "SKIPPED" and report["exit_code"] == 4
    assert statuses(report) == {"fp16": "unsafe", "bf16": "safe"}
    offender = report["analysis"]["offenders"]["fp16"]
    assert (offender["path"], offender["class"], offender["kind"]) == ("norm", "TinyEpsRMSNorm", "overflow")
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["fp16"]["status"] == "fail" and checks["device"]["status"] == "skip"
    assert "norm (TinyEpsRMSNorm) is the first module whose fp16 output overflows" in \
        checks["fp16_first_module"]["explanation"]
    fp16 = report["precisions"]["fp16"]
    assert len(fp16["skipped_steps"]) == 12 and fp16["scales"][-1] < fp16["scale_initial"]
    assert report["analysis"]["recommendation"]["choice"] == "bf16"
    assert report["precisions"]["fp32"]["peak_mem_mib"] is None  # no allocator statistics on the CPU


def test_transformer_encoder_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = verify_model(capsys, str(ROOT / "examples/transformer_encoder.py:small"), 10)
    assert code == 4 and statuses(report) == {"fp16": "safe", "bf16": "safe"}
    probe = report["probe"]["fp16"]
    assert any(r["class"] == "TransformerEncoderLayer" for r in probe)  # every module was hooked
    assert report["precisions"]["fp32"]["steps"] == 10


def test_lstm_lm_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = verify_model(capsys, str(ROOT / "examples/lstm_lm.py:small"), 12)
    assert code == 4 and report["analysis"]["precisions"]["bf16"]["status"] == "safe"
    fp16 = report["analysis"]["precisions"]["fp16"]
    # oneDNN on some CPUs has no fp16 LSTM backward: then fp16 is unsafe *with that reason*, not a crash
    assert fp16["status"] == "safe" or "raised RuntimeError" in fp16["reasons"][0]


def test_a_stable_model_from_a_module_on_the_cwd_is_safe(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(MODELS)
    code, report, _ = verify_model(capsys, "stable_mlp:make", 16, "--max-batch")
    assert code == 4 and statuses(report) == {"fp16": "safe", "bf16": "safe"}
    max_batch = next(c for c in report["checks"] if c["name"] == "max_batch")
    assert max_batch["status"] == "skip" and "GPU only" in max_batch["explanation"]
    assert report["analysis"]["offenders"] == {}
    for mode in ("fp16", "bf16"):
        assert report["analysis"]["precisions"][mode]["agreement"]["final_gap"] < 0.1


def test_no_safe_reduced_precision_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, report, _ = verify_model(capsys, str(MODELS / "cancellation.py:make"), 24)
    assert code == 3 and report["outcome"] == "FAIL"
    assert statuses(report) == {"fp16": "unsafe", "bf16": "unsafe"}
    assert report["analysis"]["recommendation"]["choice"] == "fp32"
    assert "no reduced precision is safe" in report["summary"]


def test_the_users_traceback_is_shown_under_one_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "verify", "--python", sys.executable, "--model",
                             str(MODELS / "broken_factory.py:make"), "--steps", "4")
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == "error: your model code failed: calling the factory make() raised NameError: name 'widht' " \
                       "is not defined"
    assert "Traceback (most recent call last):" in err and "broken_factory.py\", line 9, in build_head" in err
    assert "return nn.Linear(width, widht)" in err
    assert "model_check.py" not in err  # envkit's own frames are not the user's problem
    assert "fix: fix the error in your code" in err


@pytest.mark.parametrize(("spec", "why"), [("examples/lstm_lm.py", "is not FILE.py:FUNC or MODULE:FUNC"),
                                           ("examples/lstm_lm.py:small()", "is not FILE.py:FUNC or MODULE:FUNC"),
                                           ("nowhere.py:make", "is not a file"),
                                           ("examples.py:make", "is not a file"),
                                           ("$(touch PWNED).py:make", "is not a file"),
                                           ("a b:make", "neither a .py file nor a dotted module name"),
                                           ("os;id:make", "neither a .py file nor a dotted module name")])
def test_bad_model_specs_are_usage_errors(capsys: pytest.CaptureFixture[str], spec: str, why: str,
                                          tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples.py").mkdir()  # a folder named like a file
    code, _out, err = run_cli(capsys, "verify", "--python", sys.executable, "--model", spec)
    assert code == 2 and why in err and "fix: pass e.g. --model" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["examples.py"]  # nothing ran, nothing was written


def test_steps_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", "--python", sys.executable, "--model",
                              str(MODELS / "stable_mlp.py:make"), "--steps", "0")
    assert code == 2 and "--steps 0 is not between 4 and 100000" in err


def test_a_batch_that_breaks_the_contract_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", "--python", sys.executable, "--model",
                              str(MODELS / "bad_batch.py:make"), "--steps", "4")
    assert code == 1
    assert "make_batch(0) raised TypeError: make_batch(step) must return (inputs, targets), not Tensor" in err


def test_a_missing_function_is_the_users_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", "--python", sys.executable, "--model",
                              str(MODELS / "stable_mlp.py:nope"), "--steps", "4")
    assert code == 1 and "has no function 'nope'" in err


def test_steps_without_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "verify", "--python", sys.executable, "--steps", "5")
    assert code == 2 and "--steps and --max-batch only apply to --model" in err
