"""The launcher's bounds: node counts and hostlists, the command lines a node runs, the timeouts, and what one
node's output may cost (the local launcher runs real processes through proc.run_bounded)."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest

from envkit.cli import fleet as cli_fleet
from envkit.errors import UsageError
from envkit.fleet import launcher as fl
from envkit.fleet.launcher import LocalLauncher, NodeRequest, SlurmLauncher, SrunOptions, hostlist_count


def test_hostlists_are_counted_without_being_expanded() -> None:
    assert hostlist_count("n[1-4]") == 4
    assert hostlist_count("n[1-4,7],gpu7") == 6
    assert hostlist_count("rack[1-2]n[01-10]") == 20
    assert hostlist_count("n[2,4]") == 2 and hostlist_count("n1") == 1 and hostlist_count("") == 0
    assert hostlist_count("n[1-99999999]") == 99999999


def test_a_huge_nodelist_is_refused_before_slurm_is_asked() -> None:
    launcher = SlurmLauncher(NodeRequest(nodelist="n[1-99999999]"), environ={"PATH": "/nonexistent"})
    with pytest.raises(UsageError, match=r"names 99,999,999 nodes; envkit fleet takes at most 16,384") as exc:
        launcher.nodes()
    assert exc.value.hint and "fewer nodes" in exc.value.hint
    excluded = SlurmLauncher(NodeRequest(exclude=("x[0-20000]",)), environ={"PATH": "/nonexistent"})
    with pytest.raises(UsageError, match="--exclude x"):
        excluded.nodes()


def test_node_counts_are_bounded() -> None:
    with pytest.raises(UsageError, match="at most 256 pseudo nodes"):
        LocalLauncher(99999999999)
    with pytest.raises(UsageError, match="at most 16,384 nodes"):
        fl.make_launcher("slurm", NodeRequest(count=99999999999), SrunOptions())
    assert cli_fleet.MAX_NODES == fl.MAX_NODES  # the click option's bound is the launcher's
    with pytest.raises(UsageError, match="leaves no node"):
        LocalLauncher(1, exclude=("local",)).nodes()


def test_unbalanced_quotes_are_usage_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="--srun-arg \"--comment='x\" is not a list of srun arguments") as exc:
        fl.make_launcher("local", NodeRequest(), SrunOptions(extra=("--comment='x",)))
    assert exc.value.hint and "balance the quotes" in exc.value.hint
    monkeypatch.setenv("ENVKIT_FLEET_ENVKIT", "python -m 'envkit")
    with pytest.raises(UsageError, match="ENVKIT_FLEET_ENVKIT=.* is not a command line: No closing quotation"):
        fl.make_launcher("local", NodeRequest(), SrunOptions())
    monkeypatch.setenv("ENVKIT_FLEET_ENVKIT", "   ")
    with pytest.raises(UsageError, match="names no command"):
        fl.envkit_argv()


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), -1.0, 0.0])
def test_a_timeout_that_cannot_be_kept_is_refused(timeout: float) -> None:
    with pytest.raises(UsageError, match="cannot be kept"):
        fl.run_all(LocalLauncher(1), LocalLauncher(1).nodes(), lambda _n: ["true"], timeout=timeout)


def test_a_flooding_node_is_one_failed_row_and_costs_at_most_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fl, "OUTPUT_CAP", 1 << 20)
    flood = 'if [ "$ENVKIT_FLEET_NODE" = local1 ]; then head -c 30000000 /dev/zero | tr "\\0" x; else echo fine; fi'
    runs = fl.run_all(LocalLauncher(2), LocalLauncher(2).nodes(), lambda _n: ["sh", "-c", flood], timeout=60)
    assert runs[0].error and "printed more than 1 MiB on stdout" in runs[0].error
    assert len(runs[0].stdout) <= 1 << 20 and runs[0].dropped >= 30000000 - (1 << 20)
    assert runs[1].ok and runs[1].stdout.strip() == "fine"


def test_a_node_that_leaves_a_detached_grandchild_answers_at_once(tmp_path: Path) -> None:
    script = f"(setsid sleep 600 &); {shlex.join([sys.executable, '-c', 'print(42)'])}"
    start = time.monotonic()
    runs = fl.run_all(LocalLauncher(1), LocalLauncher(1).nodes(), lambda _n: ["sh", "-c", script], timeout=30)
    assert runs[0].ok and runs[0].stdout.strip() == "42"
    assert time.monotonic() - start < 6
