"""Fleet commands on a real local Slurm cluster (4 slurmd + slurmctld + munge in a temp dir).

Nodes differ through ENVKIT_DRIVER_VERSION / ENVKIT_COMPUTE_CAPABILITY, set per node by the
cluster's TaskProlog (the --driver-version / --compute-capability plumbing). Where Slurm cannot run
here, every test of this module skips with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from envkit.cli import cli
from testbed.slurm import SlurmCluster, missing_reason

REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no local Slurm cluster: {REASON}")

# n1: an old driver and V100s; n2: H100s on a CUDA 13 driver; n3: A100 on a CUDA 12.8 driver; n4: like n2
HETERO = {
    "n1": {"ENVKIT_DRIVER_VERSION": "535.104.05", "ENVKIT_COMPUTE_CAPABILITY": "7.0 7.0"},
    "n2": {"ENVKIT_DRIVER_VERSION": "580.65.06", "ENVKIT_COMPUTE_CAPABILITY": "9.0 9.0"},
    "n3": {"ENVKIT_DRIVER_VERSION": "570.86.10", "ENVKIT_COMPUTE_CAPABILITY": "8.0"},
    "n4": {"ENVKIT_DRIVER_VERSION": "580.65.06", "ENVKIT_COMPUTE_CAPABILITY": "9.0 9.0"},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    root = tmp_path_factory.mktemp("slurm")
    with SlurmCluster(root, node_env=HETERO, partitions={"old": ("n1",), "new": ("n2", "n3", "n4")}) as c:
        yield c


@pytest.fixture
def slurm(cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    cluster.write_node_env(HETERO)
    for node in cluster.nodes:
        cluster.set_delay(node, None)
    return cluster


def fleet_json(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(cli, ["fleet", *args, "--json"])
    assert result.output.strip().startswith("{"), result.output
    return result.exit_code, json.loads(result.output)


def test_inventory_of_four_heterogeneous_nodes(slurm: SlurmCluster) -> None:
    start = time.perf_counter()
    code, data = fleet_json("detect")
    elapsed = time.perf_counter() - start
    assert code == 0, data
    rows = {n["node"]: n for n in data["nodes"]}
    assert sorted(rows) == ["n1", "n2", "n3", "n4"]
    assert rows["n1"]["machine"]["driver"]["version"] == "535.104.05"
    assert rows["n1"]["machine"]["driver"]["cuda"] == "12.2"
    assert [g["compute_capability"] for g in rows["n2"]["machine"]["gpus"]] == ["9.0", "9.0"]
    assert rows["n3"]["machine"]["driver"]["cuda"] == "12.8"
    assert rows["n2"]["selection"]["cuda"] == "13.0"  # each node's own best build
    assert rows["n1"]["partition"] == "all"
    assert elapsed < 10, f"fleet detect of 4 nodes took {elapsed:.1f} s"


def test_fleet_selection_binds_on_the_weakest_node(slurm: SlurmCluster) -> None:
    _code, data = fleet_json("detect")
    fleet = data["fleet"][0]
    assert fleet["binding"] == ["n1"]
    assert fleet["cuda"] == "12.2"
    assert fleet["compute_capabilities"] == ["7.0", "8.0", "9.0"]
    first = fleet["reasons"][0]
    assert first.startswith("n1's driver 535.104.05 caps the fleet at CUDA 12.2; without it: CUDA 12.8"), first
    assert fleet["selection"]["cuda"] is not None
    # the build must cover the V100s of n1: its CUDA level stays within what n1's driver allows
    assert any("sm_70" in r for r in fleet["reasons"]), fleet["reasons"]


def test_exclude_lifts_the_cap(slurm: SlurmCluster) -> None:
    _code, data = fleet_json("detect", "--exclude", "n1")
    assert sorted(n["node"] for n in data["nodes"]) == ["n2", "n3", "n4"]
    fleet = data["fleet"][0]
    assert fleet["binding"] == ["n3"]
    assert fleet["cuda"] == "12.8"
    assert fleet["reasons"][0].startswith("n3's driver 570.86.10 caps the fleet at CUDA 12.8; without it: CUDA 13.0")


def test_per_partition_and_nodelist(slurm: SlurmCluster) -> None:
    _code, data = fleet_json("detect", "--partition", "new", "--per-partition")
    assert sorted(n["node"] for n in data["nodes"]) == ["n2", "n3", "n4"]
    assert [f["partition"] for f in data["fleet"]] == ["new"]
    _code, data = fleet_json("detect", "--nodelist", "n[2,4]")
    assert [n["node"] for n in data["nodes"]] == ["n2", "n4"]
    assert data["fleet"][0]["cuda"] == "13.0"


def test_slow_node_is_a_row_not_a_hang(slurm: SlurmCluster) -> None:
    slurm.set_delay("n3", 30)
    start = time.perf_counter()
    code, data = fleet_json("detect", "--timeout", "4")
    elapsed = time.perf_counter() - start
    assert code == 1
    rows = {n["node"]: n for n in data["nodes"]}
    assert not rows["n3"]["ok"] and "no answer within 4 s" in rows["n3"]["error"]
    assert all(rows[n]["ok"] for n in ("n1", "n2", "n4"))
    assert elapsed < 12, elapsed
    assert data["fleet"][0]["nodes"] == ["n1", "n2", "n4"]


def test_local_launcher_same_code_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_DRIVER_VERSION", "580.65.06")
    monkeypatch.setenv("ENVKIT_COMPUTE_CAPABILITY", "9.0")
    code, data = fleet_json("detect", "--launcher", "local", "--nodes", "2")
    assert code == 0
    assert [n["node"] for n in data["nodes"]] == ["local1", "local2"]
    assert data["fleet"][0]["cuda"] == "13.0"
