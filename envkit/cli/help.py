"""How envkit's help reads: every verb's `Examples:` epilog, the root's environment block, `envkit help`.

One place for the conventions, so a verb added later gets them by calling `examples(...)` (conda's
`cli/main_rename.py` habit: a few real command lines under the options). What the root shows once --
the environment variables, the precedence, the exit codes -- is written through click's own formatter
(`write_dl`), so it wraps at the terminal's width instead of running past 80 columns
(tests/unit/cli/test_help.py walks every command's --help at COLUMNS=80).
Imports only click at import time.
"""

from __future__ import annotations

import textwrap

import click

from envkit.config import ENV_VARS

# the widest line an example may take: click indents the epilog by 2, and 80 columns is the floor we promise
EXAMPLE_WIDTH = 76
EXIT_CODES = (("0", "ok"), ("1", "envkit error (tool or environment problem)"), ("2", "usage error"),
              ("3", "verify ran and FAILED"), ("4", "verify SKIPPED (no usable GPU)"),
              ("5", "doctor found problems"))
PRECEDENCE = "command-line flags > ENVKIT_* > config file > CONDA_OVERRIDE_CUDA > detection"


def examples(*items: tuple[str, str], notes: str = "") -> str:
    """A verb's epilog: 2-4 (what it does, the command line) pairs, then an optional paragraph.

    The explanation wraps to fit 80 columns; a command line is never wrapped (a test fails on one that is
    too wide), so it can be copied as it is shown. `notes` is a plain paragraph click re-wraps itself.
    """
    paragraphs = []
    for number, (what, command) in enumerate(items):
        lines = ["\b", *(["Examples:"] if number == 0 else [])]  # \b: click keeps the paragraph as written
        lines += textwrap.wrap(what, EXAMPLE_WIDTH - 2, initial_indent="# ", subsequent_indent="# ")
        paragraphs.append("\n".join([*lines, f"  {command}"]))
    text = "\n\n".join(paragraphs)
    return text + (f"\n\n{notes}" if notes else "")


def write_environment(formatter: click.HelpFormatter) -> None:
    """The environment variables, the precedence and the exit codes, wrapped at the formatter's width."""
    with formatter.section("Environment variables"):
        formatter.write_dl(list(ENV_VARS.items()), col_max=26)
    with formatter.section("Precedence"):
        formatter.write_text(PRECEDENCE)
    with formatter.section("Exit codes"):
        formatter.write_dl(list(EXIT_CODES))


class Group(click.Group):
    """A group whose command list wraps each verb's summary instead of cutting it at the terminal's width
    (click shortens it to fit one line, "eval "$(envkit..." at 80 columns)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class RootGroup(Group):
    """The `envkit` group: its --help ends with the environment block (and no verb repeats it)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_epilog(ctx, formatter)
        write_environment(formatter)


TOPICS = {"environment": "the environment variables envkit reads, their precedence, and the exit codes"}


@click.command("help", epilog=examples(
    ("the environment variables, their precedence and the exit codes", "envkit help environment"),
    ("the same as envkit create --help", "envkit help create"),
    ("a verb of a group", "envkit help fleet create")))
@click.argument("topic", nargs=-1)
def help_cmd(topic: tuple[str, ...]) -> None:
    """Help on a verb, or on a topic: environment (variables, precedence, exit codes)."""
    from envkit.errors import UsageError

    ctx = click.get_current_context()
    root = ctx.find_root()
    if topic[:1] == ("environment",) and len(topic) > 1:
        raise UsageError("envkit help environment takes nothing after it", "envkit help environment")
    if topic == ("environment",):
        formatter = root.make_formatter()
        write_environment(formatter)
        click.echo(formatter.getvalue().rstrip("\n"))
        return
    command: click.Command = root.command
    path = [root.info_name or "envkit"]
    chain = root
    for word in topic:
        if not isinstance(command, click.Group):
            raise UsageError(f"{' '.join(path)} has no verbs of its own ({word!r} after it)",
                             f"envkit help {' '.join(path[1:])}")
        sub = command.get_command(ctx, word)
        if sub is None:
            known = sorted([*(TOPICS if command is root.command else ()), *command.list_commands(ctx)])
            close = _close(word, known)
            raise UsageError(f"no verb or help topic {' '.join(path[1:] + [word])!r}"
                             + (f": did you mean {close}?" if close else ""),
                             "envkit help " + " ".join(path[1:] + [close]) if close else
                             f"one of: {', '.join(known)} (envkit --help lists the verbs)")
        command, path = sub, [*path, word]
        chain = click.Context(command, info_name=word, parent=chain)
    click.echo(command.get_help(chain))


def _close(word: str, known: list[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return found[0] if found else None


# what --cuda X.Y means, in create's help and the README ("Create"): the driver's level, not a CUDA line
CUDA_MEANING = ("--cuda X.Y is the highest CUDA the target driver supports (the \"CUDA Version\" nvidia-smi "
                "prints), not an exact CUDA line: envkit picks the newest build at or below it, else a newer build "
                "of the same major line that the driver runs through NVIDIA minor version compatibility (the "
                "conda-forge torch 2.13 has no build <= 12.4, so --cuda 12.4 gets cuda129), and the plan says so. "
                "For an exact line, pick a torch release that has it: envkit detect --catalogue --cuda 12.4 lists "
                "them, then --torch VERSION. Without a GPU, --cuda auto picks a CPU build; build for a GPU machine "
                "from here with --cuda X.Y or --driver-version VER.")
