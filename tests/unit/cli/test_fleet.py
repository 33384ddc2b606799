"""`envkit fleet`: bad option values are usage errors naming the limit (exit 2, no traceback), and every
node-supplied value reaches the terminal with its control characters made visible."""

from __future__ import annotations

import pytest

from envkit.cli.fleet import print_fleet_verify, print_inventory
from envkit.fleet.inventory import Inventory, NodeInfo
from envkit.fleet.verify import FAIL, FleetVerify, NodeVerify
from envkit.models import Driver, Gpu, Machine
from helpers import run_cli

EVIL = "\x1b]52;c;aGVsbG8=\x07\x1b[2J\x1b[8mhidden\u202e\x9b31m"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-5", "0", "1e309", "ten"])
def test_a_timeout_that_is_not_a_finite_number_of_seconds_is_a_usage_error(
        capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, _out, err = run_cli(capsys, "fleet", "detect", "--launcher", "local", "--timeout", value)
    assert code == 2 and "--timeout" in err and ("from 1 to 604800" in err or "not a number" in err), err
    assert "Traceback" not in err


@pytest.mark.parametrize("args, expected", [
    (("--nodes", "99999999999"), "1<=x<=16384"),
    (("--launcher", "local", "--nodes", "300"), "at most 256 pseudo nodes"),
    (("--nodelist", "n[1-99999999]"), "names 99,999,999 nodes; envkit fleet takes at most 16,384"),
    (("--srun-arg", "--comment='unbalanced"), "No closing quotation"),
])
def test_node_bounds_and_quotes_are_usage_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                                                 expected: str) -> None:
    code, _out, err = run_cli(capsys, "fleet", "detect", *args)
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_an_unbalanced_quote_in_envkit_fleet_envkit_says_the_fix(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_FLEET_ENVKIT", "/opt/envkit/bin/envkit --flag 'oops")
    for verb in (("detect",), ("verify", "--python", "/usr/bin/python3")):
        code, _out, err = run_cli(capsys, "fleet", *verb, "--launcher", "local")
        assert code == 2 and "ENVKIT_FLEET_ENVKIT" in err and "No closing quotation" in err, err
        assert "fix:" in err and "Traceback" not in err


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f or c == "\u202e"]


def test_node_values_are_shown_with_controls_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    machine = Machine(driver=Driver("580.65.06", "13.0", "nvml"), gpus=(Gpu(0, f"H100{EVIL}", "9.0"),))
    inv = Inventory((NodeInfo(f"n1{EVIL}", f"p{EVIL}", machine, None, f"err{EVIL}", None, 1.0),
                     NodeInfo("n2", "p", None, None, None, f"crashed: {EVIL}", 2.0)), "slurm", 3.0)
    print_inventory(inv)
    verify = FleetVerify((NodeVerify(f"n3{EVIL}", FAIL, f"broken {EVIL}", error=EVIL),), None, FAIL,
                         f"FAIL on n3{EVIL}", None, 1.0)
    print_fleet_verify(verify)
    out = capsys.readouterr().out
    assert not _controls(out), _controls(out)
    assert "\\x1b]52;c;aGVsbG8=\\x07" in out and "\\x1b[2J" in out and "\\u202e" in out and "\\x9b" in out
