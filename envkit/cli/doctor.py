"""`envkit doctor` and `envkit completion`: click commands registered by envkit/cli/__init__.py.

Only click is imported at import time (keeps `envkit --help` instant); the checks live in
envkit/doctor/__init__.py and never print.
"""

from __future__ import annotations

from typing import Any

import click

from envkit.cli.help import examples
from envkit.cli.options import cc_option, complete_envs, driver_option

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_ENVKIT_COMPLETE"  # click's convention: _<PROG>_COMPLETE=<shell>_source


_MARK = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "problem": "[bold red]PROBLEM[/]", "skip": "[dim]skip[/]"}


def _print(reports: list[Any]) -> None:
    """Every value here comes from the env (its name, records, kept files): sanitized, then markup-escaped, so
    an escape sequence planted in a record shows as text (\\x1b...) instead of driving the terminal."""
    from envkit.cli import output

    def shown(text: object) -> str:
        return output.esc(output.sanitize(str(text)))

    con = output.console()
    for report in reports:
        verdict = "[bold green]healthy[/]" if report.healthy else f"[bold red]{len(report.problems)} problem(s)[/]"
        con.print(f"[bold]{shown(report.name)}[/] {shown(report.prefix)}: {verdict}  "
                  f"[dim]({report.seconds:.2f} s; {shown(report.machine)})[/]")
        for f in report.findings:
            con.print(f"  {_MARK.get(f.status, shown(f.status)):<7} [bold]{shown(f.check)}[/]: {shown(f.found)}")
            if f.fix and f.status in ("problem", "warn"):
                con.print(f"          [bold]fix:[/] {shown(f.fix)}")


@click.command(epilog=examples(
    ("check dl_train: each problem with the command that fixes it", "envkit doctor dl_train"),
    ("every environment envkit and conda know about", "envkit doctor --all"),
    ("as if on the cluster's driver", "envkit doctor dl_train --driver-version 535.104.05")))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="Check the environment at this path.")
@click.option("--all", "all_envs", is_flag=True, help="Check every environment envkit and conda know about.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (stable keys).")
@driver_option()
@cc_option()
def doctor(name: str | None, prefix: str | None, all_envs: bool, as_json: bool, driver_version: str | None,
           compute_capability: tuple[str, ...]) -> None:
    """Static health checks of an environment (default: the active one): 0 healthy, 5 problems found."""
    from envkit.cli import output
    from envkit.doctor import doctor as run_doctor
    from envkit.errors import ExitCode

    reports = run_doctor(name=name, prefix=prefix, all_envs=all_envs, driver_version=driver_version,
                         compute_capabilities=compute_capability)
    if as_json:
        data: Any = [r.to_json() for r in reports] if all_envs else reports[0].to_json()
        output.plain(output.dump_json(data))
    else:
        _print(reports)
    if any(not r.healthy for r in reports):
        raise SystemExit(int(ExitCode.PROBLEMS_FOUND))


@click.command(epilog=examples(
    ("in ~/.bashrc", 'eval "$(envkit completion bash)"'), ("in ~/.zshrc", 'eval "$(envkit completion zsh)"'),
    ("fish", "envkit completion fish > ~/.config/fish/completions/envkit.fish")))
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the shell completion script: eval "$(envkit completion bash)" (zsh, fish alike)."""
    from click.shell_completion import get_completion_class

    cli = click.get_current_context().find_root().command  # the `envkit` group (no import of envkit.cli)

    cls = get_completion_class(shell)
    assert cls is not None  # SHELLS are the ones click ships
    click.echo(cls(cli, {}, "envkit", COMPLETE_VAR).source(), nl=False)  # byte for byte what click prints
