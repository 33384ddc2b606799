"""Per-node detect never reaches for the network: the fleet selection happens on the login node."""

from __future__ import annotations

from envkit.fleet.inventory import detect_argv
from envkit.models import Request


def test_node_detect_is_offline_and_carries_the_request() -> None:
    plain = detect_argv(None)
    assert plain[-3:] == ["detect", "--json", "--offline"]
    asked = detect_argv(Request(cuda="12.4", torch="2.5", python="3.11", flavor="pip"))
    assert "--offline" in asked
    assert asked[asked.index("--cuda") + 1] == "12.4" and asked[asked.index("--torch") + 1] == "2.5"
    assert asked[asked.index("--python") + 1] == "3.11" and asked[asked.index("--flavor") + 1] == "pip"
