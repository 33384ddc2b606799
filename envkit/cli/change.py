"""The day-two verbs: install, uninstall, update (envkit/change): unpack, call change_env, render."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envkit.cli.help import examples
from envkit.cli.options import complete_envs

if TYPE_CHECKING:
    from envkit.change.diff import ChangePlan

INSTALL_EXAMPLES = examples(
    ("add a package; torch stays as it is (the diff and the download size come first)",
     "envkit install dl_train scikit-learn"),
    ("change torch on purpose: the diff shows it and asks", "envkit install dl_train pytorch=2.5.1"),
    ("through the env's pip; a package that wants another torch is refused", "envkit install dl_train --pip einops"),
    ("link damaged files again (doctor's files fix), in an env made with --prefix",
     "envkit install --prefix ./env --force-reinstall pip --yes"))
UNINSTALL_EXAMPLES = examples(
    ("remove a package (the diff comes first)", "envkit uninstall dl_train matplotlib"),
    ("only show what would change, as JSON", "envkit uninstall dl_train tqdm --dry-run --json"),
    ("an env made with --prefix, no questions", "envkit uninstall --prefix ./env pandas --yes"))
UPDATE_EXAMPLES = examples(
    ("everything, within the env's pins; torch stays", "envkit update dl_train"),
    ("one package, only the diff", "envkit update dl_train pandas --dry-run"),
    ("an env made with --prefix, no questions", "envkit update --prefix ./env numpy --yes"))


def _options(func: Callable[..., None]) -> Callable[..., None]:
    """The options install, uninstall and update share."""
    for option in reversed((
        click.option("--prefix", default=None, help="The environment at this path (instead of NAME)."),
        click.option("--dry-run", is_flag=True, help="Solve and show the diff; download and change nothing."),
        click.option("--yes", "-y", is_flag=True, help="Apply without asking (a torch change included)."),
        click.option("--mirror", default=None, envvar="ENVKIT_MIRROR",
                     help="Mirror profile or URL (default: the one the env was made with)."),
        click.option("--channel", "channels", multiple=True, metavar="URL",
                     help="Channel to solve from, once per channel (default: the env's own)."),
        click.option("--no-verify", is_flag=True, help="Skip verify --quick after a torch-stack change."),
        click.option("--pip", "use_pip", is_flag=True,
                     help="Use the env's pip (torch and CUDA wheels held by a constraints file), not conda."),
        click.option("--index-url", default=None, metavar="URL",
                     help="With --pip: the package index (default: the env's mirror's PyPI, else pip's config)."),
        click.option("--json", "as_json", is_flag=True, help="Print the plan and the outcome as JSON."),
    )):
        func = option(func)
    return func


def _split(name: str | None, packages: tuple[str, ...], prefix: str | None) -> tuple[str | None, tuple[str, ...]]:
    """With --prefix, NAME is optional: the first word is then a package."""
    if prefix and name is not None:
        return None, (name, *packages)
    return name, packages


def _run_change(action: str, name: str | None, packages: tuple[str, ...], prefix: str | None, dry_run: bool,
                yes: bool, mirror: str | None, channels: tuple[str, ...], no_verify: bool, as_json: bool,
                use_pip: bool, index_url: str | None, force_reinstall: bool = False) -> None:
    from envkit.change.apply import ChangeOptions, change_env
    from envkit.cli import output
    from envkit.errors import UsageError

    name, packages = _split(name, packages, prefix)
    if name is None and not prefix:
        raise UsageError("name an environment or pass --prefix PATH", "envkit list shows the environments")
    if action != "update" and not packages:
        raise UsageError(f"name the packages to {action}", f"envkit {action} {name or '--prefix ' + str(prefix)} PKG...")
    opts = ChangeOptions(action=action, name=name, specs=packages, prefix=Path(prefix) if prefix else None,
                         mirror=mirror, channels=channels, dry_run=dry_run,
                         no_verify=no_verify, pip=use_pip, index_url=index_url, force_reinstall=force_reinstall,
                         argv=("envkit", *sys.argv[1:]) if sys.argv and sys.argv[0].endswith("envkit") else
                         ("envkit", action, *([name] if name else ["--prefix", str(prefix)]), *packages))

    bars = output.progress(as_json)

    def confirm(plan: ChangePlan) -> bool:
        """Shown before any download (stderr under --json); a torch change is asked for unless --yes."""
        with output.paused(bars):
            output.print_change_plan(plan, err=as_json)
            if dry_run or plan.diff.empty or yes or not plan.asks:
                return True
            if not sys.stdin.isatty():
                raise UsageError("this change replaces the env's torch (named in the command); not applied without "
                                 "confirmation", "run it again with --yes to accept the change shown above")
            return click.confirm("Change torch as shown?", default=False)

    with bars as progress:
        result = change_env(opts, confirm=confirm, progress=progress,
                            on_line=None if as_json else (lambda line: output.plain("  " + line, err=True)))
    if as_json:
        output.plain(output.dump_json(result.to_json()))
    else:
        output.print_change_result(result)
    if result.verify is not None and result.verify.outcome == "FAIL":
        from envkit.errors import ExitCode

        raise SystemExit(int(ExitCode.VERIFY_FAILED))


@click.command(epilog=INSTALL_EXAMPLES)
@click.argument("name", required=False, shell_complete=complete_envs)
@click.argument("specs", nargs=-1)
@_options
@click.option("--force-reinstall", is_flag=True,
              help="Link the named packages again from a checked cache (files doctor found damaged).")
def install(name: str | None, specs: tuple[str, ...], prefix: str | None, dry_run: bool, yes: bool,
            mirror: str | None, channels: tuple[str, ...], no_verify: bool, as_json: bool, use_pip: bool,
            index_url: str | None, force_reinstall: bool) -> None:
    """Add conda packages to an env: re-solve, show the diff, apply atomically; torch is kept unless named."""
    _run_change("install", name, specs, prefix, dry_run, yes, mirror, channels, no_verify, as_json, use_pip,
                index_url, force_reinstall)


@click.command(epilog=UNINSTALL_EXAMPLES)
@click.argument("name", required=False, shell_complete=complete_envs)
@click.argument("packages", nargs=-1)
@_options
def uninstall(name: str | None, packages: tuple[str, ...], prefix: str | None, dry_run: bool, yes: bool,
              mirror: str | None, channels: tuple[str, ...], no_verify: bool, as_json: bool, use_pip: bool,
              index_url: str | None) -> None:
    """Remove conda packages from an env through the same plan, diff and atomic swap as install."""
    _run_change("uninstall", name, packages, prefix, dry_run, yes, mirror, channels, no_verify, as_json, use_pip,
                index_url)


@click.command(epilog=UPDATE_EXAMPLES)
@click.argument("name", required=False, shell_complete=complete_envs)
@click.argument("packages", nargs=-1)
@_options
def update(name: str | None, packages: tuple[str, ...], prefix: str | None, dry_run: bool, yes: bool,
           mirror: str | None, channels: tuple[str, ...], no_verify: bool, as_json: bool, use_pip: bool,
           index_url: str | None) -> None:
    """Update packages (all when none is named) within the env's pins; torch is kept unless named."""
    _run_change("update", name, packages, prefix, dry_run, yes, mirror, channels, no_verify, as_json, use_pip,
                index_url)


CLEAN_EXAMPLES = examples(
    ("what would go, and how much space that frees", "envkit clean --dry-run"),
    ("the package and repodata caches and leftover staging (never what a running install holds)",
     "envkit clean"),
    ("the same, as JSON", "envkit clean --json"))


@click.command(epilog=CLEAN_EXAMPLES)
@click.option("--dry-run", is_flag=True, help="List what would be removed, with sizes; remove nothing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def clean(dry_run: bool, as_json: bool) -> None:
    """Empty the package cache and remove leftover staging, never what a running install holds."""
    from envkit.change.clean import clean as run_clean
    from envkit.cli import output

    result = run_clean(dry_run=dry_run)
    if as_json:
        output.plain(output.dump_json(result.to_json()))
    else:
        output.print_clean(result)


COMMANDS = (install, uninstall, update, clean)
