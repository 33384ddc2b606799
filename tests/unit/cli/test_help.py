"""Help that teaches, walked over the live click tree (a verb added later is covered without a change here):
every verb has 2-4 examples that parse, nothing is wider than 80 columns or cut mid-word, the environment
block is only in `envkit --help` and `envkit help environment`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from helpers import run_cli


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every visible command of the tree, the root included, with its path of verbs."""
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            if not sub.hidden:
                yield from walk(sub, (*path, name))


def tree() -> list[tuple[tuple[str, ...], click.Command]]:
    from envkit.cli import cli

    return list(walk(cli))


PATHS = [path for path, _ in tree()]
VERBS = [path for path in PATHS if path]


def helps(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...],
          columns: int = 80) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run_cli(capsys, *path, "--help")
    assert code == 0 and not err, err
    return out


def test_the_walk_sees_every_verb_and_the_fleet_subcommands() -> None:
    assert {("create",), ("bundle",), ("help",), ("fleet",), ("fleet", "create"), ("fleet", "verify")} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "envkit")
def test_help_fits_80_columns_and_never_cuts_a_word(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]) -> None:
    narrow = helps(capsys, monkeypatch, path, 80)
    wide = helps(capsys, monkeypatch, path, 250)
    too_wide = [line for line in narrow.splitlines() if len(line) > 80]
    assert not too_wide, too_wide

    def words(text: str) -> list[str]:  # a wrap at a hyphen (conda-|forge) is a wrap, not a cut
        return re.sub(r"(?<=\w)-\n\s+", "-", text).split()

    assert words(narrow) == words(wide)


def examples_of(text: str) -> list[str]:
    """The command lines under `Examples:` (indented by 4, after their `# what` line)."""
    block = text.split("Examples:\n", 1)[1] if "Examples:\n" in text else ""
    block = re.split(r"\n(?=\S)", block, maxsplit=1)[0]  # up to the next section (`Environment variables:`)
    return [line.strip() for line in block.splitlines() if line.startswith("    ") and "envkit" in line]


def argv_of(line: str) -> list[str]:
    """The envkit argv of an example line: `eval "$(envkit ...)"`, `... | source` and `> file` unwrapped."""
    inner = re.fullmatch(r'eval "\$\((.*)\)"', line)
    words = shlex.split(inner.group(1) if inner else line)
    for stop in ("|", ">"):
        if stop in words:
            words = words[:words.index(stop)]
    assert words[0] == "envkit", line
    return words[1:]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "envkit")
def test_every_command_teaches_with_2_to_4_examples_that_parse(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               path: tuple[str, ...]) -> None:
    from envkit.cli import cli

    lines = examples_of(helps(capsys, monkeypatch, path))
    assert 2 <= len(lines) <= 4, lines
    # the files the examples name exist, so that click.Path(exists=True) checks what is typed, not the disk
    monkeypatch.chdir(tmp_path)
    (tmp_path / "environment.yml").write_text("dependencies: []\n")
    (tmp_path / "envkit.lock").write_text("version: 6\n")
    (tmp_path / "dl_train.bundle").mkdir()
    for line in lines:
        argv = argv_of(line)
        ctx = click.Context(cli, info_name="envkit")
        command: click.Command = cli
        while isinstance(command, click.Group):
            sub = command.get_command(ctx, argv[0]) if argv else None
            assert sub is not None, f"{line}: no verb {argv[:1]}"
            command, ctx = sub, click.Context(sub, info_name=argv[0], parent=ctx)
            argv = argv[1:]
        command.make_context(ctx.info_name, argv, parent=ctx.parent)  # an unknown option or a bad value fails


def test_the_environment_block_is_only_in_envkit_help_and_help_environment(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from envkit.config import ENV_VARS

    root = helps(capsys, monkeypatch, ())
    assert "Environment variables:" in root and all(name in root for name in ENV_VARS)
    code, topic, _ = run_cli(capsys, "help", "environment")
    assert code == 0 and all(name in topic for name in ENV_VARS) and "Exit codes:" in topic
    assert topic.strip() in root  # the same block, word for word
    for path in VERBS:
        text = helps(capsys, monkeypatch, path)
        assert "Environment variables:" not in text and "ENVKIT_CACHE_DIR" not in text, path


def test_bundle_help_has_its_own_exit_codes_not_fleets(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    text = helps(capsys, monkeypatch, ("bundle",))
    assert "on a node" not in text and "every node" not in text and "ENVKIT_FLEET_ENVKIT" not in text
    assert "envkit create dl_train --bundle" in text  # the offline route's second half
    assert "verify FAILED on a node" in " ".join(helps(capsys, monkeypatch, ("fleet", "create")).split())


@pytest.mark.parametrize("path", VERBS, ids=" ".join)
def test_help_verb_prints_the_same_as_dash_dash_help(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, path: tuple[str, ...]) -> None:
    code, out, _ = run_cli(capsys, "help", *path)
    assert code == 0 and out == helps(capsys, monkeypatch, path)


def test_help_with_an_unknown_topic_suggests_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "help", "environmnt")
    assert code == 2 and "did you mean environment?" in err and "fix: envkit help environment" in err
    code, _out, err = run_cli(capsys, "help", "fleet", "creat")
    assert code == 2 and "did you mean create?" in err and "fix: envkit help fleet create" in err
    code, _out, err = run_cli(capsys, "help", "environment", "extra")
    assert code == 2 and "envkit help environment takes nothing after it" in err
    code, _out, err = run_cli(capsys, "help", "list", "x")
    assert code == 2 and "envkit list has no verbs of its own ('x' after it)" in err and "fix: envkit help list" in err
    code, _out, err = run_cli(capsys, "help", "fleet", "environment")  # a topic of the root, not of fleet
    assert code == 2 and "fix: one of: create, detect, verify" in err


def test_create_help_says_what_cuda_x_y_means(capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    text = " ".join(helps(capsys, monkeypatch, ("create",)).split())
    assert "the highest CUDA the target driver supports" in text and "not an exact CUDA line" in text
    assert "envkit detect --catalogue --cuda 12.4" in text and "--driver-version VER" in text
