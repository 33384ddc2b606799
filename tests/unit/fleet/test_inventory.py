"""Per-node detect never reaches for the network (the fleet selection happens on the login node), and what a
node prints is data: bounded, typed, a bad node one failed row."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from envkit.fleet.inventory import detect_argv, inventory, machine_from_json
from envkit.fleet.launcher import NodeRun, NodeSlot
from envkit.fleet.nodejson import NodeDataError
from envkit.models import Request


def test_node_detect_is_offline_and_carries_the_request() -> None:
    plain = detect_argv(None)
    assert plain[-3:] == ["detect", "--json", "--offline"]
    asked = detect_argv(Request(cuda="12.4", torch="2.5", python="3.11", flavor="pip"))
    assert "--offline" in asked
    assert asked[asked.index("--cuda") + 1] == "12.4" and asked[asked.index("--torch") + 1] == "2.5"
    assert asked[asked.index("--python") + 1] == "3.11" and asked[asked.index("--flavor") + 1] == "pip"


# -- what a node prints is data, bounded and typed ------------------------------------------------------------------

GOOD = {"driver": {"version": "580.65.06", "cuda": "13.0", "source": "nvml"},
        "gpus": [{"index": 0, "name": "H100", "compute_capability": "9.0", "memory_mib": 81559, "uuid": None}],
        "gpus_hidden": False, "cuda_override": None, "simulated": False, "notes": [],
        "selection": {"flavor": "conda-forge", "torch": "2.13.0", "cuda": "13.0", "python": "3.12",
                      "variant": "cuda130", "specs": ["pytorch=2.13.0"], "reasons": []}, "error": None}


class Printed:
    """A launcher whose nodes print what they are given (the seam: the bytes a node sent back)."""

    kind = "fake"

    def __init__(self, outputs: Mapping[str, str]) -> None:
        self.outputs = outputs

    def nodes(self) -> list[NodeSlot]:
        return [NodeSlot(n, "p") for n in self.outputs]

    def run(self, node: NodeSlot, argv: Sequence[str], **_kw: Any) -> NodeRun:
        return NodeRun(node.name, 0, self.outputs[node.name], "", 0.1)

    def address(self, node: str) -> str:
        return node


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


@pytest.mark.parametrize("data, field", [
    (_with(driver={"version": 535}), "driver.version is a number, not a string"),
    (_with(driver={"version": "abc"}), "driver.version is 'abc', not of the form"),
    (_with(driver={"version": "535.1", "cuda": 12.2}), "driver.cuda is a number"),
    (_with(driver="535"), "field driver is a string, not an object"),
    (_with(gpus=5), "field gpus is a number, not a list"),
    (_with(gpus=[{"name": "x", "compute_capability": "sm90"}]), "gpus[0].compute_capability is 'sm90'"),
    (_with(gpus=[{"compute_capability": "9.0", "memory_mib": "80 GB"}]), "gpus[0].memory_mib is a string"),
    (_with(notes=[{"a": 1}]), "notes[0] is an object, not a string"),
    (_with(simulated="yes"), "field simulated is a string, not true or false"),
])
def test_a_wrong_type_is_a_failed_row_naming_the_field(data: dict[str, Any], field: str) -> None:
    inv = inventory(Printed({"bad": json.dumps(data), "good": json.dumps(GOOD)}))  # type: ignore[arg-type]
    bad, good = inv.nodes
    assert not bad.ok and bad.error and field in bad.error, bad.error
    assert good.ok and good.machine and good.machine.driver and good.machine.driver.cuda == "13.0"


def test_a_wrong_selection_is_a_failed_row_too() -> None:
    for sel, field in (({"torch": 2.13}, "selection.torch is a number"), ([1], "field selection is a list"),
                       ({"torch": "2.13", "python": "3.12"}, "selection.variant is missing")):
        inv = inventory(Printed({"bad": json.dumps(_with(selection=sel))}))  # type: ignore[arg-type]
        assert inv.nodes[0].error and field in inv.nodes[0].error, inv.nodes[0].error


def test_nested_json_100000_deep_is_one_failed_row_the_others_are_reported() -> None:
    deep = '{"a":' * 100000 + "1" + "}" * 100000
    inv = inventory(Printed({"n1": deep, "n2": json.dumps(GOOD), "n3": "[" * 100000}))  # type: ignore[arg-type]
    n1, n2, n3 = inv.nodes
    assert not n1.ok and n1.error and "malformed JSON" in n1.error
    assert not n3.ok and n3.error
    assert n2.ok


def test_machine_from_json_round_trips_a_good_report() -> None:
    machine = machine_from_json(GOOD)
    assert machine.driver is not None and machine.driver.version == "580.65.06"
    assert [g.compute_capability for g in machine.gpus] == ["9.0"]
    with pytest.raises(NodeDataError):
        machine_from_json(_with(gpus=[None]))
