"""Every option more than one verb takes, its validator, and the ONE flags -> Request builder.

Precedence in one place: command-line flag > ENVKIT_* (click's envvar) > config file > default.
A bad value is a usage error (exit 2) raised by click before any work, on every verb alike
(tests/unit/cli/test_options.py walks every verb x bad value). The selection options reach a command as
ONE keyword argument, `selectors` (a Selectors), whose methods build the Request and the catalogue mode.
Imports only click at import time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click


if TYPE_CHECKING:
    from envkit.models import Request

_CUDA_RE = re.compile(r"^\d{1,2}\.\d{1,2}\Z", re.ASCII)
_DRIVER_RE = re.compile(r"^\d{3,4}(\.\d{1,3}){1,2}\Z", re.ASCII)
_CC_RE = re.compile(r"^\d{1,2}\.\d\Z", re.ASCII)
_PY_RE = re.compile(r"^3\.\d{1,2}t?\Z", re.ASCII)

def check_cuda(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or value in ("auto", "cpu") or _CUDA_RE.match(value):
        return value
    raise click.BadParameter(f"{value!r}: use auto, cpu or a CUDA version like 12.4 or 13.0")


def check_driver(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or _DRIVER_RE.match(value):
        return value
    raise click.BadParameter(f"{value!r}: use an NVIDIA driver version like 550.54.15 or 580.65.06")


def check_cc(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    for item in value:
        if not _CC_RE.match(item) or not (3 <= int(item.split(".")[0]) <= 15):
            raise click.BadParameter(f"{item!r}: use a compute capability like 8.6, 9.0 or 12.0 (one per GPU)")
    return value


# a torch version or range (PEP 440 specifiers, conda's * wildcard): ASCII, and something besides blanks
_TORCH_RE = re.compile(r"^[0-9A-Za-z.*+!=<>~, ]{1,100}\Z", re.ASCII)


def check_torch(_ctx: click.Context | None, _param: click.Parameter | None, value: str | None) -> str | None:
    if value is None:
        return None
    text = value.strip(" ")  # blanks around it are harmless; a newline or a control character is not
    if text and _TORCH_RE.match(text) and any(c.isalnum() for c in text):
        return text
    raise click.BadParameter(f"{value[:60]!r}: use a torch version like 2.5 or a range like '>=2.4,<2.7'")


def check_python(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or _PY_RE.match(value):
        return value
    raise click.BadParameter(f"{value!r}: use a Python version like 3.11 or 3.12")


def spec_of(name: str, verb: str, quiet: bool = False) -> str:
    """The spec a NAME given without --spec/--file builds (render/specs.spec_for_env): an impossible name or
    a typo of a spec's name stops here (exit 2), before any work; a new name says which spec it gets."""
    from envkit.prefix.locations import check_name
    from envkit.render.specs import spec_for_env

    check_name(name)  # an impossible name is refused as such, before it is compared with the specs
    choice = spec_for_env(name, verb)
    if not choice.named and not quiet:
        click.echo(f"spec: {choice.spec} (no spec is named {name}; --spec NAME picks another, envkit list "
                   "shows them)", err=True)
    return choice.spec


def complete_envs(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of an environment NAME: the environments envkit and conda know about."""
    from click.shell_completion import CompletionItem

    from envkit.prefix.locations import list_envs

    names = sorted({p.name for p in list_envs()})
    return [CompletionItem(n, help="environment") for n in names if n.startswith(incomplete)]


def complete_specs(_ctx: click.Context, _param: click.Parameter, incomplete: str) -> list[Any]:
    """Shell completion of a spec name (envs/, the user's spec folder, $ENVKIT_SPEC_PATH)."""
    from click.shell_completion import CompletionItem

    from envkit.render.specs import available

    return [CompletionItem(n, help="spec") for n in sorted(available()) if n.startswith(incomplete)]


def complete_envs_and_specs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """`envkit bundle NAME`: an existing environment, or a spec to solve."""
    return [*complete_envs(ctx, param, incomplete), *complete_specs(ctx, param, incomplete)]


def check_timeout(_ctx: click.Context, _param: click.Parameter, value: float) -> float:
    import math

    if not math.isfinite(value) or not 1 <= value <= 7 * 24 * 3600:
        raise click.BadParameter(f"{value!r}: use a number of seconds between 1 and 604800 (a week)")
    return value


CUDA_HELP = ("auto (detect), cpu, or X.Y: the highest CUDA the target driver supports, not an exact CUDA "
             "line (default auto).")
FLAVORS = ("conda-forge", "pytorch", "pip")


def cuda_option(help: str = CUDA_HELP) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--cuda", callback=check_cuda, default=None, envvar="ENVKIT_CUDA", help=help)


def torch_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--torch", "torch_spec", default=None, metavar="SPEC", callback=check_torch,
                        help="torch version or range, e.g. 2.5 or '>=2.4,<2.7' (default: newest known).")


def python_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--python", "python", callback=check_python, default=None, metavar="X.Y",
                        help="Python version of the environment.")


def flavor_option() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--flavor", type=click.Choice(FLAVORS), default=None, envvar="ENVKIT_FLAVOR",
                        help="Where torch comes from (default conda-forge).")


# Which reader wants which rattler-lock version (conda-lockfiles 0.2 conda_lockfiles/rattler_lock/v6.py
# validates version == 6; pixi >= 0.68 (May 2026) writes and expects 7; py-rattler 0.28 reads both).
LOCK_VERSION_HELP = ("rattler-lock version: 6 for conda + conda-lockfiles 0.2 (reads 6 only) and pixi < 0.68; "
                     "7 for pixi >= 0.68 and py-rattler. envkit create --lock reads both.")


def lock_version_option(prefix: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--lock-version", type=click.Choice(["6", "7"]), default="6", show_default=True,
                        help=prefix + LOCK_VERSION_HELP)


def driver_option(help: str = "Simulate a driver (replaces the hardware query).",
                  ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--driver-version", callback=check_driver, default=None, metavar="VER",
                        envvar="ENVKIT_DRIVER_VERSION", help=help)


def cc_option(help: str = "Simulate a GPU (repeat once per GPU).") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option("--compute-capability", "compute_capability", multiple=True, callback=check_cc,
                        metavar="X.Y", envvar="ENVKIT_COMPUTE_CAPABILITY", help=help)


def apply(func: Callable[..., Any], *options: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[..., Any]:
    """Decorate with the options in the order they appear in --help."""
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True)
class Selectors:
    """What to select, and for which machine, as click validated it: --cuda --torch --python --flavor
    --driver-version --compute-capability --no-driver-check --offline --refresh (None, () or False: not
    given; a verb without one of these options gets its default here)."""

    cuda: str | None = None
    torch: str | None = None
    python: str | None = None
    flavor: str | None = None
    driver_version: str | None = None
    compute_capabilities: tuple[str, ...] = ()
    no_driver_check: bool = False
    offline: bool = False
    refresh: bool = False

    @property
    def flavor_given(self) -> bool:
        """--flavor (or ENVKIT_FLAVOR) was given: a spec's or file's own flavor does not override it."""
        return self.flavor is not None

    @property
    def cuda_given(self) -> bool:
        """--cuda X.Y or cpu (not auto): bundle and fleet plan for it even above this machine's driver."""
        return self.cuda not in (None, "auto")

    def request(self, *, no_driver_check: bool | None = None, spec_python: str | None = None) -> Request:
        """The Request (the one flags -> Request, `build_request`); `no_driver_check` overrides the flag's value."""
        return build_request(self.cuda, self.torch, self.python, self.flavor,
                        self.no_driver_check if no_driver_check is None else no_driver_check, spec_python)

    def catalogue_mode(self) -> str:
        """auto | offline | refresh, from --offline / --refresh (both: a usage error)."""
        return catalogue_mode_of(self.offline, self.refresh)


# click parameter name -> Selectors field
_SELECTOR_PARAMS = {"cuda": "cuda", "torch_spec": "torch", "python": "python", "flavor": "flavor",
                    "driver_version": "driver_version", "compute_capability": "compute_capabilities",
                    "no_driver_check": "no_driver_check", "offline": "offline", "refresh": "refresh"}


def collect(keyword: str, into: Callable[..., Any], params: Mapping[str, str],
            ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command gets the options named in `params` (click name -> field) that it declares as ONE keyword
    argument, `keyword`=into(**fields). Apply it once per group, before (under) its options: click calls
    the function the decorators return with every option, so the options may sit anywhere in the stack."""
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)  # keeps the options already declared below (click's __click_params__)
        def command(*args: Any, **kwargs: Any) -> Any:
            given = {field: kwargs.pop(param) for param, field in params.items() if param in kwargs}
            return func(*args, **{keyword: into(**given)}, **kwargs)

        return command

    return decorate


collect_selectors = collect("selectors", Selectors, _SELECTOR_PARAMS)


def what_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """What to build: --cuda, --torch, --python, --flavor (every verb that selects a build), as `selectors`."""
    return apply(collect_selectors(func), cuda_option(), torch_option(), python_option(), flavor_option())


def selection_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The options shared by detect, render, create and lock (what to select, and for which machine), as
    `selectors`."""
    return apply(collect_selectors(func), cuda_option(), torch_option(), python_option(), flavor_option(),
                 driver_option(), cc_option(),
                 click.option("--no-driver-check", is_flag=True, help="Allow --cuda above what the driver reports."),
                 click.option("--offline", is_flag=True,
                              help="Select from the cached channel catalogue (else the static data); no network."),
                 click.option("--refresh", is_flag=True,
                              help="Re-read what the channels publish even if the cache is fresh."))


def from_config(value: Any, key: str) -> Any:
    """Flag and ENVKIT_* variable were already applied by click; the config file comes next."""
    if value is not None:
        return value
    from envkit.config import load_file_config

    return load_file_config().get(key)


def build_request(cuda: str | None, torch_spec: str | None, python: str | None, flavor: str | None,
             no_driver_check: bool = False, spec_python: str | None = None) -> Request:
    """The ONE flags -> Request: flag > ENVKIT_* (already applied by click) > config file > default."""
    from envkit.models import Request

    cuda = from_config(cuda, "cuda")
    torch_given = torch_spec is not None
    torch_spec = from_config(torch_spec, "torch")
    for key, value, check in (("cuda", cuda, check_cuda), ("torch", None if torch_given else torch_spec, check_torch)):
        if value is None:
            continue
        from envkit.config import config_path
        from envkit.errors import UsageError

        try:
            checked = check(None, None, str(value))  # type: ignore[arg-type]
        except click.BadParameter as exc:
            raise UsageError(f"config file {config_path()}: {key}: {exc.message}", f"fix '{key}:' in {config_path()}")
        if key == "torch":
            torch_spec = checked  # stripped, as the flag's is
    return Request(cuda=str(cuda) if cuda is not None else "auto", torch=torch_spec,
                   python=python or spec_python, flavor=from_config(flavor, "flavor") or "conda-forge",
                   no_driver_check=no_driver_check)


def catalogue_mode_of(offline: bool, refresh: bool) -> str:
    from envkit.errors import UsageError

    if offline and refresh:
        raise UsageError("--offline and --refresh contradict each other", "pass one of them")
    from envkit.engines.repodata import mode_from

    return mode_from(offline, refresh)
