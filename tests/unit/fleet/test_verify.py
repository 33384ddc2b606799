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
