"""The --model payload's pure parts, imported without torch: the bounded doubling search behind --max-batch
and how batches are measured; and envkit's summary of what the search found."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envkit.verify.amp_compare import analyse, checks_of, max_batch_summary
from envkit.verify.payload import model_check as mc


def fits_below(limit: int, calls: list[int]):  # type: ignore[no-untyped-def]
    def fits(k: int) -> tuple[bool, str | None]:
        calls.append(k)
        return (True, None) if k <= limit else (False, "out of memory")
    return fits


def test_importing_the_model_payload_does_not_import_torch() -> None:
    root = Path(__file__).resolve().parents[3]
    code = "import sys; import envkit.verify.payload.model_check; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=root, timeout=60).returncode == 0


def test_doubling_stops_at_the_first_failure() -> None:
    calls: list[int] = []
    found = mc.doubling_search(fits_below(5, calls), limit=64)
    assert found["factor"] == 4 and calls == [1, 2, 4, 8] and found["stopped"] == "x8: out of memory"


def test_doubling_is_bounded() -> None:
    calls: list[int] = []
    found = mc.doubling_search(fits_below(10_000, calls), limit=16)
    assert found["factor"] == 16 and calls == [1, 2, 4, 8, 16] and found["stopped"] == "reached the x16 bound"


def test_doubling_respects_its_time_budget_after_the_first_try() -> None:
    ticks = iter([0.0, 0.0, 20.0, 40.0])
    calls: list[int] = []
    found = mc.doubling_search(fits_below(64, calls), limit=64, budget_s=15.0, clock=lambda: next(ticks))
    assert calls == [1, 2] and found["factor"] == 2 and "time budget" in found["stopped"]


def test_even_the_factory_batch_may_not_fit() -> None:
    found = mc.doubling_search(lambda k: (False, "out of memory"), limit=64)
    assert found["factor"] == 0 and len(found["tried"]) == 1


def test_leading_size_of_nested_inputs() -> None:
    class T:
        shape = (48, 3)

        def dim(self) -> int:
            return 2

    assert mc.leading_size(T()) == 48 and mc.leading_size((T(), T())) == 48 and mc.leading_size({"x": T()}) == 48
    assert mc.leading_size(3) is None


def test_summary_gives_the_ratio_to_fp32() -> None:
    found = {"fp32": {"factor": 8, "batch": 512, "stopped": "x16: out of memory"},
             "bf16": {"factor": 16, "batch": 1024, "stopped": "x32: out of memory"}}
    summary = max_batch_summary(found)
    assert summary is not None and summary["bf16"]["vs_fp32"] == 2.0 and summary["fp32"]["batch"] == 512
    assert max_batch_summary({"skipped": "GPU only"}) == {"skipped": "GPU only"}


def test_the_max_batch_row_in_the_checks() -> None:
    losses = [1.0] * 8
    record = {"steps": 8, "losses": losses, "nonfinite_steps": [], "step_ms": 1.0, "peak_mem_mib": 100.0}
    payload = {"device": "cuda", "precisions": {"fp32": record, "bf16": dict(record)},
               "max_batch": {"fp32": {"factor": 4, "batch": 256, "stopped": "x8: out of memory"},
                             "bf16": {"factor": 8, "batch": 512, "stopped": "x16: out of memory"}}}
    analysis = analyse(payload)
    row = next(r for r in checks_of(analysis, record) if r["name"] == "max_batch")
    assert row["status"] == "pass" and "bf16 512 (2x fp32)" in row["explanation"] and "fp32 256" in row["explanation"]


def test_the_search_trains_at_each_factor_on_cpu_torch() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    init = {k: v.clone() for k, v in model.state_dict().items()}
    seen: list[int] = []

    def loss_fn(out, target):  # type: ignore[no-untyped-def]
        seen.append(out.shape[0])
        return torch.nn.functional.mse_loss(out.float(), target)

    batch = (torch.randn(6, 4), torch.randn(6, 1))
    for mode in ("fp32", "fp16", "bf16"):
        seen.clear()
        found = mc.max_batch(torch, model, init, batch, loss_fn, None, mode, device_type="cpu", limit=4)
        assert found["factor"] == 4 and found["batch"] == 24 and seen == [6, 12, 24], (mode, found)
    assert all(torch.equal(v, init[k]) for k, v in model.state_dict().items())  # the weights are put back


def test_autocast_counts_as_applied_only_when_a_module_produced_the_dtype() -> None:
    class Dtype:
        def __init__(self, name: str) -> None:
            self.name = name

        def __str__(self) -> str:
            return f"torch.{self.name}"

    fp32_only = [{"path": "lin", "dtype": "float32"}, {"path": "(model)", "dtype": "float32"}]
    assert not mc.autocast_applied(fp32_only, Dtype("float16"))
    assert mc.autocast_applied(fp32_only + [{"path": "proj", "dtype": "float16"}], Dtype("float16"))
    assert mc.autocast_applied([], Dtype("bfloat16"))  # the probe raised: the training run records why
