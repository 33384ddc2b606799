"""`envkit config show | get KEY | set KEY VALUE | path`: the effective settings and where each came from."""

from __future__ import annotations

from typing import Any

import click

from envkit.cli.help import examples

CONFIG_EXAMPLES = examples(
    ("every setting, its value and where it came from (flag, environment, file, default)", "envkit config show"),
    ("one value, for scripts", "envkit config get mirror"),
    ("write it into the config file (checked first)", "envkit config set mirror tuna"),
    ("where the config file is (ENVKIT_CONFIG)", "envkit config path"))


@click.group("config", epilog=CONFIG_EXAMPLES)
def config_cmd() -> None:
    """The effective settings (flag > ENVKIT_* > config file > default) and the config file."""


def _flags(cuda: str | None, torch: str | None, flavor: str | None, mirror: str | None,
           engine: str | None) -> dict[str, Any]:
    """What came from the command line only: a value click took from ENVKIT_* is reported with the environment
    as its origin, so it is not passed on as a flag."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = {"cuda": cuda, "torch": torch, "flavor": flavor, "mirror": mirror, "engine": engine}
    param = {"torch": "torch_spec"}
    return {k: (v if ctx.get_parameter_source(param.get(k, k)) == ParameterSource.COMMANDLINE else None)
            for k, v in given.items()}


def _flag_options(func: Any) -> Any:
    """show and get take the flags a command would, checked as that command checks them and read from the same
    ENVKIT_* variables (one meaning per option name across verbs); _flags keeps the command line's alone."""
    from envkit.cli.options import check_cuda, check_torch

    checks: dict[str, dict[str, Any]] = {
        "cuda": {"callback": check_cuda, "envvar": "ENVKIT_CUDA"},
        "torch": {"callback": check_torch, "metavar": "SPEC"},
        "flavor": {"type": click.Choice(["conda-forge", "pytorch", "pip"]), "envvar": "ENVKIT_FLAVOR"},
        "engine": {"type": click.Choice(["rattler", "conda", "mamba", "micromamba"]), "envvar": "ENVKIT_ENGINE"},
        "mirror": {"envvar": "ENVKIT_MIRROR"}}
    for name in ("engine", "mirror", "flavor", "torch", "cuda"):
        decls = ["--torch", "torch_spec"] if name == "torch" else [f"--{name}"]
        func = click.option(*decls, default=None, help=f"As a command given --{name} would see it.",
                            **checks[name])(func)
    return func


@config_cmd.command("show", epilog=CONFIG_EXAMPLES)
@_flag_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def show(cuda: str | None, torch_spec: str | None, flavor: str | None, mirror: str | None, engine: str | None,
         as_json: bool) -> None:
    """Every setting with its value and where it came from."""
    from envkit.cli import output
    from envkit.config import effective_settings

    settings = effective_settings(_flags(cuda, torch_spec, flavor, mirror, engine))
    if as_json:
        output.plain(output.dump_json([s.to_json() for s in settings]))
    else:
        output.print_settings(settings)


@config_cmd.command("get", epilog=CONFIG_EXAMPLES)
@click.argument("key")
@_flag_options
def get(key: str, cuda: str | None, torch_spec: str | None, flavor: str | None, mirror: str | None,
        engine: str | None) -> None:
    """Print one setting's effective value (empty when unset)."""
    from envkit.cli import output
    from envkit.config import get_setting

    value = get_setting(key, _flags(cuda, torch_spec, flavor, mirror, engine)).value
    output.plain("" if value is None else " ".join(value) if isinstance(value, list) else
                 str(value).lower() if isinstance(value, bool) else str(value))


@config_cmd.command("set", epilog=CONFIG_EXAMPLES, short_help="Write KEY: VALUE into the config file.")
@click.argument("key")
@click.argument("value")
def set_cmd(key: str, value: str) -> None:
    """Write KEY: VALUE into the config file (the file is checked before it is replaced)."""
    from envkit.cli import output
    from envkit.config import set_setting

    path = set_setting(key, value)
    output.plain(f"{key}: {value} written to {path}")


@config_cmd.command("path", epilog=CONFIG_EXAMPLES)
def path_cmd() -> None:
    """Print where the config file is (it may not exist yet)."""
    from envkit.cli import output
    from envkit.config import config_path

    output.plain(str(config_path()))
