"""The cross-node step is retried once only when no rank reported (a startup/rendezvous failure)."""

from __future__ import annotations

from typing import Any

import pytest

from envkit.fleet import verify as fv


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
