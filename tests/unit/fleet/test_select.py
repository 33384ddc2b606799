"""Fleet selection (pure) and the local launcher: no Slurm needed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from envkit.cli import cli
from envkit.detect import detect
from envkit.fleet.inventory import NodeInfo
from envkit.fleet.launcher import LocalLauncher, NodeSlot, run_all
from envkit.fleet.select import fleet_machine, request_for_fleet, select_fleet
from envkit.models import Machine, Request
from helpers import FakeGpu, FakeNVML, run_cli


def node(name: str, driver: str | None, *ccs: str, partition: str = "gpu") -> NodeInfo:
    """A node as `envkit detect --driver-version/--compute-capability` would report it."""
    machine = detect(driver_version=driver, compute_capabilities=ccs) if driver or ccs else Machine(driver=None)
    return NodeInfo(name, partition, machine, None, None, None, 0.1)


def test_lowest_driver_binds_and_names_the_node() -> None:
    nodes = [node("n1", "580.65.06", "9.0"), node("n17", "535.104.05", "8.0"), node("n3", "570.86.10", "9.0")]
    machine, binding, reasons = fleet_machine(nodes)
    assert binding == ("n17",) and machine.driver is not None and machine.driver.cuda == "12.2"
    assert reasons[0] == ("n17's driver 535.104.05 caps the fleet at CUDA 12.2; without it: CUDA 12.8 "
                          "(--exclude n17)")
    assert machine.compute_capabilities == ("8.0", "9.0")
    fleet = select_fleet(nodes, Request(python="3.12"))
    assert fleet.selection is not None and fleet.binding == ("n17",)
    assert fleet.selection.python == "3.12" and any("one lock for the fleet" in r for r in fleet.reasons)
    # the solve that follows plans explicitly for the fleet's CUDA level, on any machine
    req = request_for_fleet(fleet, Request())
    assert req.cuda == "12.2" and req.no_driver_check and req.python == "3.12"


def test_equal_drivers_and_no_driver_node() -> None:
    same = [node("a", "580.65.06", "9.0"), node("b", "580.65.06", "9.0")]
    assert fleet_machine(same)[2] == ["every node's driver supports CUDA 13.0 (lowest driver 580.65.06)"]
    mixed = same + [node("cpu1", None)]
    machine, binding, reasons = fleet_machine(mixed)
    assert machine.driver is None and binding == ("cpu1",)
    assert reasons[0] == "cpu1 has no NVIDIA driver: only a CPU build runs on every node; without it: CUDA 13.0"
    fleet = select_fleet(mixed, Request())
    assert fleet.selection is not None and fleet.selection.cuda is None


def test_an_old_gpu_that_no_build_covers_is_named_with_the_way_out() -> None:
    # sm_35 (Kepler) is in no torch 2.x build envkit knows: without that node the fleet has a build
    nodes = [node("k80", "470.82.01", "3.5"), node("h1", "580.65.06", "9.0")]
    fleet = select_fleet(nodes, Request(torch="2.13"))
    assert fleet.selection is None and fleet.error and fleet.error.startswith("no build fits every node")
    assert fleet.hint is not None and "without k80: torch 2.13" in fleet.hint and "--exclude k80" in fleet.hint


def test_unreachable_nodes_do_not_take_part() -> None:
    down = NodeInfo("n9", "gpu", None, None, None, "no answer within 5 s", 5.0)
    fleet = select_fleet([node("n1", "580.65.06", "9.0"), down], Request())
    assert fleet.nodes == ("n1",) and fleet.selection is not None


def test_local_launcher_gives_each_node_its_gpus_and_reports_failures() -> None:
    launcher = LocalLauncher(count=2, gpus_per_node=2)
    slots = launcher.nodes()
    assert [s.name for s in slots] == ["local1", "local2"]
    runs = run_all(launcher, [*slots, NodeSlot("gone", reason="Slurm reports the node down")],
                   lambda _n: ["sh", "-c", 'echo "$ENVKIT_FLEET_NODE $CUDA_VISIBLE_DEVICES"'], timeout=10)
    assert [r.stdout.strip() for r in runs[:2]] == ["local1 0,1", "local2 2,3"]
    assert not runs[2].ok and runs[2].error == "Slurm reports the node down"
    slow = run_all(launcher, slots[:1], lambda _n: ["sleep", "30"], timeout=1)[0]
    assert not slow.ok and slow.error is not None and "no answer within 1 s" in slow.error


def test_fleet_detect_through_the_local_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_DRIVER_VERSION", "580.65.06")
    monkeypatch.setenv("ENVKIT_COMPUTE_CAPABILITY", "9.0 9.0")
    result = CliRunner().invoke(cli, ["fleet", "detect", "--launcher", "local", "--nodes", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [n["node"] for n in data["nodes"]] == ["local1", "local2"]
    assert [g["compute_capability"] for g in data["nodes"][0]["machine"]["gpus"]] == ["9.0", "9.0"]
    assert data["fleet"][0]["cuda"] == "13.0"


def test_local_launcher_refuses_more_gpus_than_the_machine_has(fake_nvml: FakeNVML, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """2 GPUs (NVML faked at its seam): 2 nodes x 2 GPUs would hand out indices 2 and 3 that do not exist."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    fake_nvml.gpus = [FakeGpu("NVIDIA H200", (9, 0)), FakeGpu("NVIDIA H200", (9, 0))]
    code, _out, err = run_cli(capsys, "fleet", "detect", "--launcher", "local", "--nodes", "2",
                              "--gpus-per-node", "2")
    assert code == 2, err
    assert "needs 4 GPUs, but this machine has 2" in err
    assert "--nodes 2 --gpus-per-node 1" in err and "--gpus-per-node 0" in err
    fake_nvml.gpus = []  # a driver but no GPU: every --gpus-per-node > 0 is refused, 0 is the fix
    code, _out, err = run_cli(capsys, "fleet", "verify", "--python", "python3", "--launcher", "local",
                              "--gpus-per-node", "1")
    assert code == 2 and "needs 1 GPUs, but this machine has 0" in err, err
    assert "use --gpus-per-node 0" in err


def test_local_launcher_accepts_what_fits(fake_nvml: FakeNVML, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("ENVKIT_DRIVER_VERSION", "580.65.06")
    monkeypatch.setenv("ENVKIT_COMPUTE_CAPABILITY", "9.0")
    fake_nvml.gpus = [FakeGpu("NVIDIA H200", (9, 0)), FakeGpu("NVIDIA H200", (9, 0))]
    result = CliRunner().invoke(cli, ["fleet", "detect", "--launcher", "local", "--nodes", "2",
                                      "--gpus-per-node", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert [n["node"] for n in json.loads(result.stdout)["nodes"]] == ["local1", "local2"]
