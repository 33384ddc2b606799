"""Every verb that takes a selection option gets it from envkit/cli/options.py: the same bad value is
the same usage error (exit 2) on every verb, raised while click parses, before any work starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from envkit.cli import cli

BAD = {
    "--cuda": ["12", "12.x", "cuda12", "13.0.1"],
    "--python": ["3", "python3.11", "3.x"],
    "--driver-version": ["abc", "550", "550.54.15;id"],
    "--compute-capability": ["9", "9.0.1", "sm_90", "99.0"],
}
# the verbs each option must reach (a verb that loses the option fails here, not silently)
EXPECTED = {
    "--cuda": {"detect", "render", "create", "lock", "bundle", "fleet detect", "fleet create"},
    "--python": {"detect", "render", "create", "lock", "bundle", "fleet detect", "fleet create"},
    "--driver-version": {"detect", "render", "create", "lock", "bundle", "doctor"},
    "--compute-capability": {"detect", "render", "create", "lock", "bundle", "doctor"},
}


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from walk(sub, (*path, name))
    else:
        yield path, command


def takes(command: click.Command, flag: str) -> bool:
    # `verify --python` and `fleet verify --python` name an interpreter, not a version
    return any(isinstance(p, click.Option) and flag in p.opts and p.name != "python_exe" for p in command.params)


def required_args(command: click.Command, tmp_path: Path) -> list[str]:
    """Valid values for what the verb requires, so that only the bad option can fail."""
    args: list[str] = []
    for param in command.params:
        if not param.required:
            continue
        value = "dl_train"
        if isinstance(param.type, click.Choice):
            value = str(param.type.choices[0])
        elif isinstance(param, click.Option) and isinstance(param.type, click.Path):
            value = str(tmp_path / "out")
        args += [param.opts[0], value] if isinstance(param, click.Option) else [value]
    return args


CASES = [(" ".join(path), flag, bad) for path, command in walk(cli) for flag in BAD if takes(command, flag)
         for bad in BAD[flag]]


def test_every_expected_verb_takes_its_options() -> None:
    found: dict[str, set[str]] = {flag: set() for flag in BAD}
    for verb, flag, _bad in CASES:
        found[flag].add(verb)
    for flag, verbs in EXPECTED.items():
        assert verbs <= found[flag], f"{flag} is missing from {sorted(verbs - found[flag])}"


@pytest.mark.parametrize(("verb", "flag", "bad"), CASES)
def test_a_bad_value_is_a_usage_error_before_any_work(verb: str, flag: str, bad: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from envkit.cli import _run

    commands = dict((" ".join(path), command) for path, command in walk(cli))
    command = commands[verb]
    started: list[str] = []
    monkeypatch.setattr(command, "callback", lambda **_kw: started.append(verb))
    capsys.readouterr()
    code = _run([*verb.split(), *required_args(command, tmp_path), flag, bad])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"Invalid value for '{flag}'" in err and repr(bad) in err
    assert not started, f"{verb} started work with {flag} {bad!r}"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("verb", sorted({v for v, f, _ in CASES if f == "--cuda"}))
def test_a_good_value_reaches_the_command(verb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The check above is not vacuous: with a valid --cuda the same argv gets past parsing."""
    from envkit.cli import _run

    command = dict((" ".join(path), command) for path, command in walk(cli))[verb]
    started: list[str] = []
    monkeypatch.setattr(command, "callback", lambda **_kw: started.append(verb))
    code = _run([*verb.split(), *required_args(command, tmp_path), "--cuda", "12.4"])
    assert code == 0 and started == [verb], capsys.readouterr().err


@pytest.mark.parametrize("verb", ["lock", "export"])
def test_lock_version_help_says_which_reader_wants_which(verb: str) -> None:
    """conda-lockfiles 0.2 validates version 6 only; pixi >= 0.68 writes and expects 7: the help says so."""
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [verb, "--help"], terminal_width=400)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "6 for conda + conda-lockfiles 0.2 (reads 6 only) and pixi < 0.68; 7 for pixi >= 0.68" in text
    assert "envkit create --lock reads both" in text


def test_an_option_name_means_the_same_on_every_verb_it_appears_on() -> None:
    """Option parity over the live tree: the same --long name is a flag (or takes a value), repeats, has the
    same short alias and the same ENVKIT_* default on every verb, and a short alias stands for one --long
    name everywhere (-q is --quiet, -o --output); a verb added later is held to the verbs already there."""
    seen: dict[str, dict[tuple[object, ...], list[str]]] = {}
    shorts: dict[str, set[str]] = {}
    for path, command in walk(cli):
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            short = tuple(sorted(o for o in (*param.opts, *param.secondary_opts) if not o.startswith("--")))
            for name in (o for o in param.opts if o.startswith("--")):
                shape = (param.is_flag, param.multiple, short, param.envvar)
                seen.setdefault(name, {}).setdefault(shape, []).append(" ".join(path))
                for alias in short:
                    shorts.setdefault(alias, set()).add(name)
    differing = {name: shapes for name, shapes in seen.items() if len(shapes) > 1}
    assert not differing, differing
    assert {alias: names for alias, names in shorts.items() if len(names) > 1} == {}
    assert seen["--json"] and seen["--quiet"] and seen["--prefix"]  # the walk saw the shared options
    # one name for "an environment.yml to start from": render's --from is also --file, as on create and lock
    assert {"render", "create", "lock", "bundle", "fleet create"} <= {v for verbs in seen["--file"].values()
                                                                      for v in verbs}
