"""cli/options.py: the selection options reach a command as one Selectors, validated by click first."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from envkit.cli.options import Selectors, catalogue_mode_of, build_request, collect, selection_options, what_options
from envkit.models import Request


def _capture(decorator: object) -> tuple[click.Command, list[dict[str, object]]]:
    seen: list[dict[str, object]] = []

    @click.command()
    @click.option("--json", "as_json", is_flag=True)
    @decorator  # type: ignore[misc]
    def cmd(**kwargs: object) -> None:
        seen.append(kwargs)

    return cmd, seen


def test_selection_options_arrive_as_one_selectors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ENVKIT_CUDA", raising=False)
    cmd, seen = _capture(selection_options)
    result = CliRunner().invoke(cmd, ["--cuda", "12.4", "--torch", "2.7", "--python", "3.12", "--flavor", "pip",
                                      "--driver-version", "580.65.06", "--compute-capability", "9.0",
                                      "--compute-capability", "8.6", "--no-driver-check", "--offline", "--json"])
    assert result.exit_code == 0, result.output
    assert seen == [{"as_json": True, "selectors": Selectors(
        cuda="12.4", torch="2.7", python="3.12", flavor="pip", driver_version="580.65.06",
        compute_capabilities=("9.0", "8.6"), no_driver_check=True, offline=True, refresh=False)}]


def test_what_options_leave_the_machine_options_at_their_defaults() -> None:
    cmd, seen = _capture(what_options)
    assert CliRunner().invoke(cmd, ["--cuda", "cpu"], env={"ENVKIT_CUDA": None}).exit_code == 0
    assert seen[0]["selectors"] == Selectors(cuda="cpu")


@pytest.mark.parametrize("args", [["--cuda", "12"], ["--python", "3"], ["--driver-version", "5"],
                                  ["--compute-capability", "2.0"], ["--flavor", "nope"]])
def test_a_bad_value_is_a_usage_error_before_the_command_runs(args: list[str]) -> None:
    cmd, seen = _capture(selection_options)
    assert CliRunner().invoke(cmd, args).exit_code == 2
    assert seen == []


def test_request_goes_through_the_one_flags_to_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_CONFIG", "/nonexistent/envkit-config.yaml")
    sel = Selectors(cuda="12.8", torch="2.7", python="3.11", flavor="pytorch", no_driver_check=True)
    assert sel.request() == build_request("12.8", "2.7", "3.11", "pytorch", True)
    assert sel.request(no_driver_check=False).no_driver_check is False
    assert isinstance(sel.request(), Request) and sel.flavor_given and sel.cuda_given
    assert not Selectors(cuda="auto").cuda_given and not Selectors().flavor_given


def test_catalogue_mode_goes_through_the_one_catalogue_mode() -> None:
    from envkit.errors import UsageError

    for offline, refresh in ((False, False), (True, False), (False, True)):
        assert Selectors(offline=offline, refresh=refresh).catalogue_mode() == catalogue_mode_of(offline, refresh)
    assert Selectors(offline=True).catalogue_mode() == "offline"
    with pytest.raises(UsageError):
        Selectors(offline=True, refresh=True).catalogue_mode()


def test_collect_stacks_with_another_group() -> None:
    seen: list[dict[str, object]] = []

    @click.command()
    @collect("pair", lambda **kw: tuple(sorted(kw.items())), {"left": "l"})
    @click.option("--left", default="L")
    @what_options
    def cmd(**kwargs: object) -> None:
        seen.append(kwargs)

    assert CliRunner().invoke(cmd, ["--left", "x", "--torch", "2.5"], env={"ENVKIT_CUDA": None}).exit_code == 0
    assert seen == [{"pair": (("l", "x"),), "selectors": Selectors(torch="2.5")}]
