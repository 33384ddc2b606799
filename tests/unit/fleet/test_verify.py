"""`envkit fleet verify`: one verdict from every node's verify, and the cross-node step retried once only when no
rank reported (a startup/rendezvous failure)."""

from __future__ import annotations

from typing import Any

import pytest

from envkit.fleet import verify as fv
from envkit.fleet.verify import FAIL, PASS, SKIPPED, NcclResult, NodeVerify, aggregate


def _fake(results: list[fv.NcclResult], calls: list[int]) -> Any:
    def once(*_args: Any, **_kwargs: Any) -> fv.NcclResult:
        calls.append(1)
        return results[len(calls) - 1]
    return once


def test_a_startup_failure_is_retried_once_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(fv, "_run_nccl_once", _fake([
        fv.NcclResult(fv.FAIL, "cross-node all-reduce failed (n1: torchrun exited 1)"),
        fv.NcclResult(fv.SKIPPED, "no GPU: gloo across 2 node(s)", {"rank": 0})], calls))
    result = fv.run_nccl(None, [], None)  # type: ignore[arg-type]
    assert len(calls) == 2 and result.outcome == fv.SKIPPED
    assert "second attempt" in result.summary and "torchrun exited 1" in result.summary


def test_ranks_that_ran_and_disagreed_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(fv, "_run_nccl_once", _fake([
        fv.NcclResult(fv.FAIL, "all-reduce or DDP gave wrong results", {"rank": 0, "all_reduce_ok": False})], calls))
    result = fv.run_nccl(None, [], None)  # type: ignore[arg-type]
    assert len(calls) == 1 and result.outcome == fv.FAIL and "second attempt" not in result.summary


def test_a_failure_twice_stays_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    bad = fv.NcclResult(fv.FAIL, "cross-node all-reduce failed (n2: unreachable)", {}, {"n2": "unreachable"})
    monkeypatch.setattr(fv, "_run_nccl_once", _fake([bad, bad], calls))
    result = fv.run_nccl(None, [], None)  # type: ignore[arg-type]
    assert len(calls) == 2 and result.outcome == fv.FAIL and result.node_errors == {"n2": "unreachable"}


def test_verdict_follows_verify() -> None:
    p = NodeVerify("a", PASS, "ok", speedup=3.0)
    slow = NodeVerify("b", PASS, "ok", speedup=1.2)
    s = NodeVerify("c", SKIPPED, "no gpu")
    f = NodeVerify("d", FAIL, "broken")
    assert aggregate([p, slow, s, f], None, 1.0).outcome == FAIL
    result = aggregate([p, slow, s], None, 1.0)
    assert result.outcome == PASS and result.slowest == "b" and int(result.exit_code) == 0
    assert aggregate([s, s], None, 1.0).exit_code == 4
    assert aggregate([p], NcclResult(FAIL, "ranks disagree"), 1.0).exit_code == 3
    assert aggregate([s], NcclResult(SKIPPED, "gloo only"), 1.0).outcome == SKIPPED


# -- a node's verify report is read typed ----------------------------------------------------------------------------
def _report(**changes: Any) -> str:
    import json

    checks = [{"name": "import", "status": "pass"}, {"name": "speed", "status": "pass", "values": {"speedup": 2.5}},
              {"name": "matmul_tflops", "status": "pass", "values": {"tflops": {"fp16": 700, "bf16": 650.5}}}]
    return json.dumps({"outcome": "PASS", "summary": "ok", "checks": checks,
                       "gpus": [{"name": "H100", "compute_capability": "9.0"}], **changes})


def test_a_good_report_is_a_row() -> None:
    row = fv.node_result(fv.NodeRun("n1", 0, _report(), "", 1.0))
    assert row.outcome == PASS and row.speedup == 2.5 and row.tflops == 700.0 and row.gpus == ("H100 sm_90",)


@pytest.mark.parametrize("changes, field", [
    ({"outcome": "LOL"}, "field outcome is 'LOL', not one of PASS, FAIL, SKIPPED"),
    ({"outcome": 1}, "field outcome is a number"),
    ({"checks": "all good"}, "field checks is a string, not a list"),
    ({"checks": [5]}, "checks[0] is a number, not an object"),
    ({"checks": [{"name": "x", "status": "[link=http://evil]pass"}]}, "checks[0].status"),
    ({"checks": [{"name": "speed", "status": "pass", "values": {"speedup": "fast"}}]}, "speedup is a string"),
    ({"checks": [{"name": "matmul_tflops", "status": "pass", "values": {"tflops": {"fp16": "x"}}}]}, "tflops.fp16"),
    ({"gpus": [[1]]}, "gpus[0] is a list"),
])
def test_a_wrong_field_is_a_failed_row_naming_it(changes: dict[str, Any], field: str) -> None:
    row = fv.node_result(fv.NodeRun("n1", 0, _report(**changes), "", 1.0))
    assert row.outcome == FAIL and row.error and field in row.error, row.error
    assert aggregate([row], None, 1.0).outcome == FAIL


def test_a_deep_nccl_report_is_a_node_error_not_a_crash() -> None:
    assert fv._nccl_block("not json: a torchrun warning after the marker") is None
    with pytest.raises(fv.nj.NodeDataError):
        fv._nccl_block('{"rank": "zero"}')
    with pytest.raises(fv.nj.NodeDataError):
        fv._nccl_block('{"a":' * 100000 + "1" + "}" * 100000)
