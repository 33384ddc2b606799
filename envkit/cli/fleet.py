"""Click commands of issue 13: `envkit bundle` and `envkit fleet detect|create|verify`.

Thin like cli/env.py: options -> one core function (envkit.fleet.*, envkit.lock.bundle) -> rendering here.
Only click is imported at import time; rich, rattler and the fleet modules load inside the commands.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envkit.cli.help import Group, examples
from envkit.cli.options import (Selectors, apply, cc_option, collect, collect_selectors, complete_envs,
                                complete_envs_and_specs, complete_specs, cuda_option, driver_option, spec_of,
                                flavor_option, python_option, torch_option, what_options)

if TYPE_CHECKING:
    from envkit.create import CreateOptions
    from envkit.fleet.create import FleetCreate
    from envkit.fleet.inventory import Inventory
    from envkit.fleet.launcher import Launcher, NodeRun
    from envkit.fleet.select import FleetSelection
    from envkit.fleet.verify import FleetVerify
    from envkit.lock.bundle import Bundle
    from envkit.models import Machine, Request
    from rich.live import Live
    from rich.table import Table

FLEET_NOTES = ("Nodes run envkit as ENVKIT_FLEET_ENVKIT (a command line) or, by default, this very interpreter "
               "(python -m envkit), which works where envkit sits on a filesystem the nodes share.\n\n"
               "Exit codes: 0 ok, 1 envkit error (or a node failed), 2 usage error, 3 verify FAILED on a node, "
               "4 verify SKIPPED on every node.")


@dataclass(frozen=True)
class Nodes:
    """--launcher --partition --nodes --nodelist --exclude --account --time --gpus-per-node --srun-arg
    --timeout as click validated them: which nodes, how to reach them, how long each may take."""

    launcher: str = "slurm"
    partition: str | None = None
    count: int | None = None
    nodelist: str | None = None
    exclude: tuple[str, ...] = ()
    account: str | None = None
    time_limit: str | None = None
    gpus_per_node: int | None = None
    srun_args: tuple[str, ...] = ()
    timeout: float | None = None  # None: the verb's own default

    def runner(self) -> Launcher:
        return _launcher(self.launcher, self.partition, self.count, self.nodelist, self.exclude, self.account,
                         self.time_limit, self.gpus_per_node, self.srun_args)


# the bounds of --nodes and --timeout (launcher.MAX_NODES, kept equal by a test: importing the launcher
# here would load the fleet modules for every envkit command)
MAX_NODES = 16384
MAX_TIMEOUT = 7 * 86400.0


class Seconds(click.ParamType):
    """A finite number of seconds from 1 to MAX_TIMEOUT (click's FloatRange lets nan and inf through)."""

    name = "SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        import math

        if isinstance(value, float) and math.isfinite(value):
            number = value
        else:
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a number of seconds (e.g. --timeout 120)", param, ctx)
        if not math.isfinite(number) or not 1 <= number <= MAX_TIMEOUT:
            self.fail(f"{value!r} is not a number of seconds from 1 to {MAX_TIMEOUT:g} (e.g. --timeout 120)",
                      param, ctx)
        return number


def _shown(text: object) -> str:
    """A node-, record- or child-supplied value for a rich table or line: control characters made
    visible (output.sanitize: no screen clear, OSC 52 clipboard write or hidden text reaches the
    terminal), then rich markup escaped."""
    from envkit.cli.output import esc, sanitize

    return esc(sanitize(str(text)))


_NODE_PARAMS = {name: name for name in ("launcher", "partition", "count", "nodelist", "exclude", "account",
                                        "time_limit", "gpus_per_node", "srun_args", "timeout")}


def fleet_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Which nodes, and how to reach them (srun options pass through as given), as one `nodes` argument."""
    func = collect("nodes", Nodes, _NODE_PARAMS)(func)
    options = [
        click.option("--launcher", type=click.Choice(["slurm", "local"]), default="slurm", show_default=True,
                     envvar="ENVKIT_FLEET_LAUNCHER",
                     help="slurm: one srun per node; local: processes on this machine."),
        click.option("--partition", "-p", default=None, help="Slurm partition to use."),
        click.option("--nodes", "-N", "count", type=click.IntRange(min=1, max=MAX_NODES), default=None,
                     help="How many nodes (slurm: the first N usable ones; local: N pseudo nodes)."),
        click.option("--nodelist", "-w", default=None, metavar="LIST", help="Exactly these nodes, e.g. n[1-4]."),
        click.option("--exclude", "-x", multiple=True, metavar="LIST", help="Leave these nodes out (repeatable)."),
        click.option("--account", "-A", default=None, help="srun --account."),
        click.option("--time", "-t", "time_limit", default=None, help="srun --time."),
        click.option("--gpus-per-node", type=click.IntRange(min=0), default=None,
                     help="srun --gpus-per-node (local: GPUs given to each pseudo node)."),
        click.option("--srun-arg", "srun_args", multiple=True, metavar="ARG",
                     help="Extra srun arguments, passed through (repeatable), e.g. --srun-arg=--qos=debug."),
        click.option("--timeout", type=Seconds(), default=None,
                     help="Seconds each node may take before it is reported as failed."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _launcher(launcher: str, partition: str | None, count: int | None, nodelist: str | None,
              exclude: tuple[str, ...], account: str | None, time_limit: str | None, gpus_per_node: int | None,
              srun_args: tuple[str, ...]) -> Launcher:
    from envkit.errors import UsageError
    from envkit.fleet.launcher import NodeRequest, SrunOptions, make_launcher

    if count is not None and nodelist:
        raise UsageError("give either --nodes N or --nodelist LIST, not both", "envkit fleet detect --nodelist n[1-4]")
    return make_launcher(launcher, NodeRequest(partition, count, nodelist, exclude),
                         SrunOptions(partition, account, time_limit, gpus_per_node, srun_args))


def build_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """What to build, and for which machine (the subset of create's options a solve needs); the selection
    options (with bundle's --driver-version / --compute-capability) arrive as one `selectors` argument."""
    return apply(
        collect_selectors(func),
        click.option("--spec", "spec", default=None, help="Named spec or spec file (default: NAME if it is a spec, "
                     "else dl_train)."),
        click.option("--file", "env_file", type=click.Path(exists=True, dir_okay=False), default=None,
                     help="Build from this environment.yml (adapted to the fleet unless --no-adapt)."),
        click.option("--no-adapt", is_flag=True, help="Take --file literally (no CUDA replacement)."),
        cuda_option(), torch_option(), python_option(), flavor_option(),
        click.option("--mirror", default=None, envvar="ENVKIT_MIRROR", help="Mirror profile or URL."),
        click.option("--channel", "channels", multiple=True, metavar="URL", help="Use these channels (repeatable)."),
    )


def _create_options(name: str, spec: str | None, request: Request, flavor_given: bool, mirror: str | None,
                    channels: tuple[str, ...], driver_version: str | None = None,
                    compute_capabilities: tuple[str, ...] = (), env_file: str | None = None,
                    no_adapt: bool = False, verb: str = "bundle") -> CreateOptions:
    from envkit.config import load_file_config
    from envkit.create import CreateOptions
    from envkit.render.specs import spec_for_env

    if spec is None and env_file is None:
        spec = spec_for_env(name, verb).spec  # a typo of a spec's name stops here (exit 2)
    return CreateOptions(name=name, spec=spec, file=Path(env_file) if env_file else None, no_adapt=no_adapt,
                         request=request, flavor_given=flavor_given,
                         mirror=mirror or load_file_config().get("mirror"), channels=channels, no_verify=True,
                         driver_version=driver_version, compute_capabilities=compute_capabilities,
                         argv=("envkit", "bundle", name))


@click.command(epilog=examples(
    ("on a connected machine: spec dl_train solved for the cluster's oldest driver",
     "envkit bundle dl_train -o dl_train.bundle --driver-version 535.104.05"),
    ("the exact packages of an existing environment", "envkit bundle dl_train -o dl_train.bundle"),
    ("then, on the machine without network", "envkit create dl_train --bundle dl_train.bundle"),
    notes="Exit codes: 0 ok, 1 envkit error, 2 usage error."))
@click.argument("name", required=False, shell_complete=complete_envs_and_specs)
@click.option("--lock", "lock_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Bundle exactly this lock file (envkit lock / export --format lock / pixi.lock).")
@click.option("-o", "--output", "out", type=click.Path(file_okay=False), required=True,
              help="The bundle folder to write (must not exist or be empty).")
@driver_option("Solve for a machine with this driver (e.g. the cluster's oldest).")
@cc_option("Solve for these GPUs (repeat).")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest summary as JSON.")
@build_options
def bundle(name: str | None, lock_file: str | None, out: str, as_json: bool, spec: str | None, env_file: str | None,
           no_adapt: bool, mirror: str | None, channels: tuple[str, ...], *, selectors: Selectors) -> None:
    """A self-contained folder (lock + every archive and wheel, with checksums) for machines without network.

    NAME is an existing environment (its exact packages), or a spec to solve; --file ENV.yml solves that file
    (NAME defaults to its name:); --lock FILE bundles a lock. --mirror serves the conda and pip parts.
    Install it anywhere with: envkit create NAME --bundle DIR
    """
    from envkit.cli import output
    from envkit.lock.bundle import bundle_from_env, bundle_from_lock, bundle_from_spec, env_file_name
    from envkit.errors import UsageError
    from envkit.prefix.locations import default_prefix
    from envkit.prefix.records import has_conda_meta

    target = Path(out)
    if not name and env_file and not lock_file:
        name = env_file_name(Path(env_file))
    if lock_file:
        result = bundle_from_lock(Path(lock_file), target, name=name, mirror=mirror)
    elif name and spec is None and env_file is None and has_conda_meta(default_prefix(name)):
        result = bundle_from_env(default_prefix(name), target, mirror=mirror)
    elif name:
        if spec is None and env_file is None:
            spec = spec_of(name, "bundle", as_json)
        opts = _create_options(name, spec, selectors.request(no_driver_check=selectors.cuda_given),
                               selectors.flavor_given, mirror, channels, selectors.driver_version,
                               selectors.compute_capabilities, env_file, no_adapt)
        result = bundle_from_spec(opts, target, on_step=lambda t: output.plain(f"  {t}", err=True))
    else:
        raise UsageError("give an environment NAME (or a spec name), --file ENV.yml or --lock FILE",
                         "envkit bundle dl_train -o DIR")
    data = result.to_json()
    if as_json:
        output.plain(output.dump_json({k: v for k, v in data.items() if k != "files"} | {"path": str(target)}))
    else:
        output.plain(f"wrote {target}: {data['conda_packages']} conda packages, {data['wheels']} wheels, "
                     f"{data['bytes'] / 2**20:.1f} MiB in {result.seconds:.1f} s")
        output.plain(f"install it without network: envkit create {result.name} --bundle {target}")


@click.group(cls=Group, epilog=examples(
    ("every node's driver and GPUs, and the one build they can all run", "envkit fleet detect --partition gpu"),
    ("one verified environment on every node of the partition", "envkit fleet create dl_train --partition gpu"),
    ("the AMP smoke test again, on every node", "envkit fleet verify dl_train --partition gpu"),
    notes=FLEET_NOTES))
def fleet() -> None:
    """One verified environment on every node of a cluster (Slurm, or --launcher local)."""


@fleet.command("detect", epilog=examples(
    ("every node of partition gpu, and the one build they can all run", "envkit fleet detect --partition gpu"),
    ("one build per partition, for clusters no single build fits", "envkit fleet detect --per-partition"),
    ("try it on this machine, no Slurm: two pseudo nodes", "envkit fleet detect --launcher local --nodes 2"),
    notes=FLEET_NOTES))
@fleet_options
@what_options
@click.option("--per-partition", is_flag=True, help="One build per partition instead of one for all nodes.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def detect_cmd(*, nodes: Nodes, selectors: Selectors, per_partition: bool, as_json: bool) -> None:
    """Driver, CUDA, GPUs and best build of every node, and the one build the whole fleet can run."""
    from envkit.cli import output
    from envkit.errors import ExitCode
    from envkit.fleet.inventory import DETECT_TIMEOUT, inventory, inventory_json
    from envkit.fleet.select import select_fleet, select_per_partition

    runner = nodes.runner()
    request = selectors.request()
    inv = inventory(runner, request, timeout=nodes.timeout or DETECT_TIMEOUT)
    fleets = (select_per_partition(inv.nodes, request) if per_partition else [select_fleet(inv.nodes, request)])
    if as_json:
        output.plain(output.dump_json({**inventory_json(inv), "fleet": [f.to_json() for f in fleets]}))
    else:
        print_inventory(inv)
        for fl in fleets:
            print_fleet_selection(fl)
    failed = [n for n in inv.nodes if not n.ok]
    if failed or any(f.selection is None for f in fleets):
        raise SystemExit(int(ExitCode.ERROR))


@fleet.command("verify", epilog=examples(
    ("the AMP smoke test on 4 nodes of partition gpu", "envkit fleet verify dl_train --partition gpu --nodes 4"),
    ("every GPU of each node, then NCCL + DDP", "envkit fleet verify dl_train --partition gpu --all-gpus"),
    notes=FLEET_NOTES))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="Verify the env at this path on each node ({node} = the node's name).")
@click.option("--python", "python_exe", default=None, help="Verify this interpreter on each node (no env needed).")
@click.option("--all-gpus", is_flag=True, help="Check every GPU of each node, then NCCL + DDP across them.")
@click.option("--quick", is_flag=True, help="Skip the speed, memory and TFLOP/s measurements.")
@click.option("--nccl", is_flag=True, help="Also one torchrun per node: cross-node all-reduce, DDP + AMP step, "
              "bus bandwidth.")
@click.option("--nproc-per-node", default="gpu", show_default=True,
              help="torchrun ranks per node for --nccl: gpu (one per visible GPU) or a number.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON report to this file.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (node x check table, speed-up and TFLOP/s bars).")
@fleet_options
def verify_cmd(name: str | None, prefix: str | None, python_exe: str | None, all_gpus: bool, quick: bool,
               nccl: bool, nproc_per_node: str, as_json: bool, report_file: str | None, html_file: str | None,
               *, nodes: Nodes) -> None:
    """Verify an env on every node: one table node x check, slowest and failing nodes highlighted."""
    from envkit.cli import output
    from envkit.fleet.verify import VERIFY_TIMEOUT, Target, fleet_verify
    from envkit.fsutil import atomic_write_text

    runner = nodes.runner()
    result = fleet_verify(runner, Target(name, prefix, python_exe), all_gpus=all_gpus, quick=quick, nccl=nccl,
                          nproc=nproc_per_node, timeout=nodes.timeout or VERIFY_TIMEOUT)
    if report_file:
        atomic_write_text(Path(report_file), output.dump_json(result.to_json()) + "\n")
    if html_file:
        from envkit.verify.html import write_fleet_html

        write_fleet_html(result.to_json(), Path(html_file))
    if as_json:
        output.plain(output.dump_json(result.to_json()))
    else:
        print_fleet_verify(result)
    raise SystemExit(int(result.exit_code))


@fleet.command("create", epilog=examples(
    ("one bundle, installed and verified on every node of partition gpu",
     "envkit fleet create dl_train --partition gpu"),
    ("node-local environments on scratch disks",
     "envkit fleet create dl_train --prefix /scratch/{node}/envs/dl_train"),
    ("from a bundle made earlier: the nodes need no network at all",
     "envkit fleet create dl_train --partition gpu --bundle dl_train.bundle"),
    notes=FLEET_NOTES))
@click.argument("name", shell_complete=complete_specs)
@click.option("--bundle", "bundle_dir", type=click.Path(exists=True, file_okay=False), default=None,
              help="Install this existing bundle (no detect, no solve): nodes need no network at all.")
@click.option("--bundle-dir", "bundle_out", type=click.Path(file_okay=False), default=None,
              help="Where to write the fleet's bundle (a folder every node can read; default: beside the envs).")
@click.option("--prefix", "prefix_template", default=None,
              help="Env path on each node; {node} makes it node-local (e.g. /scratch/{node}/envs/NAME). "
              "Without {node}: one shared prefix, created once and checked from every node.")
@click.option("--force", is_flag=True, help="Replace existing envs (each old one survives a failed rebuild).")
@click.option("--stage-bundle", "stage", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Copy the bundle onto nodes that do not share its folder (through srun's "
              "stdin, unpacked under --stage-dir, removed after): auto = only nodes that cannot read it.")
@click.option("--stage-dir", default=None, metavar="DIR",
              help="Node-local folder for a staged bundle ({node} allowed; default: the node's $TMPDIR, else /tmp).")
@click.option("--early-start/--no-early-start", "early", default=True, show_default=True,
              help="Start the nodes (srun, envkit loaded) while the bundle is made; they wait for it. "
              "--no-early-start holds the nodes only for the install.")
@click.option("--per-partition", is_flag=True, help="One build per partition (solve, bundle and install each "
              "partition's nodes from its own bundle) when one build cannot fit all.")
@click.option("--quiet", "-q", is_flag=True, help="No live progress table.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable summary.")
@build_options
@fleet_options
def create_cmd(name: str, bundle_dir: str | None, bundle_out: str | None, prefix_template: str | None, force: bool,
               stage: str, stage_dir: str | None, early: bool, per_partition: bool, quiet: bool, as_json: bool,
               spec: str | None, env_file: str | None, no_adapt: bool, mirror: str | None,
               channels: tuple[str, ...], *, selectors: Selectors, nodes: Nodes) -> None:
    """Select for the fleet, solve once, bundle, install on every node in parallel, check they are identical."""
    import time

    from envkit.cli import output
    from envkit.errors import ExitCode, UsageError
    from envkit.fleet.create import CREATE_TIMEOUT, fleet_create, fleet_create_per_partition
    from envkit.prefix.locations import check_name, default_prefix

    check_name(name)
    if spec is None and env_file is None and bundle_dir is None:
        spec = spec_of(name, "fleet create", quiet or as_json)  # a typo stops before any node starts
    runner = nodes.runner()
    request = selectors.request(no_driver_check=selectors.cuda_given)
    if spec is not None and env_file is None and bundle_dir is None and request.python is None:
        # the fleet is selected for the python the spec asks for (dl_train: 3.11), as create selects it, so the
        # build said before the install is the one installed (it said 3.12, the default, and installed 3.11)
        from dataclasses import replace

        from envkit.render import specs as env_specs
        from envkit.render.build import python_candidates

        spec_python = python_candidates(env_specs.load(spec).python, None)[0]
        if spec_python:
            request = replace(request, python=spec_python)
    out = Path(bundle_out) if bundle_out else (
        default_prefix(name).parent / ".envkit-bundles" / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}")
    quiet = quiet or as_json

    if per_partition and (bundle_dir or (env_file and no_adapt)):
        raise UsageError("--per-partition solves once per partition: it cannot take --bundle or --file --no-adapt",
                         f"envkit fleet create {name} --per-partition --prefix '/scratch/{{node}}/envs/{name}'")
    if per_partition and not (prefix_template and ("{node}" in prefix_template or "{partition}" in prefix_template)):
        raise UsageError("--per-partition installs a different build per partition: one shared prefix cannot "
                         "hold them", f"give --prefix with {{node}} or {{partition}}, e.g. --prefix "
                         f"'/shared/envs/{{partition}}/{name}'")
    maker = _BundleMaker(name, spec, request, selectors.flavor_given, mirror, channels, env_file, no_adapt,
                         on_step=None if quiet else lambda t: output.plain(f"  {output.sanitize(t)}", err=True))
    table = LiveNodes(quiet)
    with table:
        if per_partition:
            results = fleet_create_per_partition(runner, name, bundle_dir=out, make_bundle=maker,
                                                 request=request, prefix_template=prefix_template, force=force,
                                                 timeout=nodes.timeout or CREATE_TIMEOUT, stage=stage,
                                                 stage_dir=stage_dir, early=early,
                                                 on_step=None if quiet else table.note, on_event=table.event)
        else:
            results = [fleet_create(runner, name, bundle_dir=Path(bundle_dir) if bundle_dir else out,
                                    make_bundle=None if bundle_dir else maker, request=request,
                                    prefix_template=prefix_template, force=force,
                                    timeout=nodes.timeout or CREATE_TIMEOUT,
                                    select=not (env_file and no_adapt), stage=stage, stage_dir=stage_dir,
                                    early=early,
                                    on_step=None if quiet else table.note, on_event=table.event)]
    if as_json:
        if per_partition:
            output.plain(output.dump_json({"name": name, "ok": all(r.ok for r in results),
                                           "partitions": [r.to_json() for r in results]}))
        else:
            output.plain(output.dump_json(results[0].to_json()))
    else:
        for result in results:
            print_fleet_create(result)
    if not all(r.ok for r in results):
        raise SystemExit(int(ExitCode.ERROR))


@dataclass(frozen=True)
class _BundleMaker:
    """fleet create's make_bundle: solve once for a fleet's build (None: --file --no-adapt, taken literally)
    and bundle it into `out`."""

    name: str
    spec: str | None
    request: Request
    flavor_given: bool
    mirror: str | None
    channels: tuple[str, ...]
    env_file: str | None
    no_adapt: bool
    on_step: Callable[[str], None] | None

    def __call__(self, fleet: FleetSelection | None, out: Path) -> Bundle:
        from envkit.fleet.select import request_for_fleet
        from envkit.lock.bundle import bundle_from_spec

        if fleet is None:  # --file --no-adapt: taken literally, for whatever machine
            opts = _create_options(self.name, self.spec, self.request, self.flavor_given, self.mirror, self.channels,
                                   env_file=self.env_file, no_adapt=self.no_adapt)
        else:
            opts = _create_options(self.name, self.spec, request_for_fleet(fleet, self.request), self.flavor_given,
                                   self.mirror, self.channels, fleet.driver_version, fleet.compute_capabilities,
                                   self.env_file, self.no_adapt)
        return bundle_from_spec(opts, out, on_step=self.on_step)


class LiveNodes:
    """A live per-node table on stderr (rich), fed by the launcher's events; silent when quiet."""

    def __init__(self, quiet: bool) -> None:
        import threading

        self.quiet = quiet
        self.rows: dict[str, tuple[str, float, float | None, str]] = {}
        self.lock = threading.Lock()
        self.live: Live | None = None

    def __enter__(self) -> LiveNodes:
        if not self.quiet:
            from rich.live import Live

            from envkit.cli.output import console

            self.live = Live(get_renderable=self.render, console=console(stderr=True), refresh_per_second=4,
                             transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def note(self, text: str) -> None:
        if self.live is not None:
            from envkit.cli.output import sanitize

            self.live.console.print(f"  {sanitize(text)}", highlight=False, markup=False)

    def event(self, node: str, what: str, run: NodeRun | None) -> None:
        import time

        with self.lock:
            if what in ("running", "waiting"):  # waiting: started early, loaded, until the bundle is complete
                self.rows[node] = (what, time.monotonic(), None, "")
            elif what == "stopped":  # told to leave before doing anything (fleet create failed first)
                started = self.rows.get(node, ("", time.monotonic(), None, ""))[1]
                self.rows[node] = ("stopped", started, run.seconds if run else 0.0, "")
            else:
                started = self.rows.get(node, ("", time.monotonic(), None, ""))[1]
                ok = run is not None and run.ok
                error = "" if ok or run is None else (run.error or run.stderr_tail(1))
                self.rows[node] = ("done" if ok else "FAILED", started, run.seconds if run else 0.0, error)

    def render(self) -> Table:
        import time

        from rich.table import Table

        from envkit.cli.output import esc

        table = Table(show_edge=False, title=None)
        for col in ("node", "state", "s", "error"):
            table.add_column(col, overflow="fold")
        with self.lock:
            for node, (state, started, seconds, error) in sorted(self.rows.items()):
                style = {"done": "green", "FAILED": "bold red", "stopped": "dim"}.get(state, "yellow")
                took = seconds if seconds is not None else time.monotonic() - started
                table.add_row(_shown(node), f"[{style}]{state}[/]", f"{took:.1f}", _shown(error[:120]))
        return table


# -- rendering ------------------------------------------------------------------------------------
def _gpus(machine: Machine | None) -> str:
    if machine is None:
        return ""
    if not machine.gpus:
        return "hidden" if machine.gpus_hidden else "none"
    counts: dict[str, int] = {}
    for g in machine.gpus:
        key = f"{g.name} sm_{g.compute_capability.replace('.', '')}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n}x {k}" if n > 1 else k for k, n in counts.items())


def _own_build(sel: dict[str, Any] | None, error: str | None) -> str:
    if sel is None:
        return f"none: {error}" if error else "none"
    cuda = f"CUDA {sel['cuda']} ({sel['variant']})" if sel.get("cuda") else "CPU"
    return f"torch {sel['torch']} {cuda} py{sel['python']}"


def print_inventory(inv: Inventory) -> None:
    from rich.table import Table

    from envkit.cli.output import console, esc

    con = console()
    table = Table(show_edge=False)
    for col in ("node", "partition", "driver", "CUDA", "GPUs", "own best build", "s"):
        table.add_column(col, overflow="fold")
    for n in inv.nodes:
        if n.machine is None:
            table.add_row(f"[bold red]{_shown(n.node)}[/]", _shown(n.partition or ""), "", "", "",
                          f"[red]FAILED: {_shown(n.error or '?')}[/]", f"{n.seconds:.1f}")
            continue
        drv = n.machine.driver
        table.add_row(_shown(n.node), _shown(n.partition or ""), _shown(drv.version if drv else "none"),
                      _shown(drv.cuda or "?") if drv else "", _shown(_gpus(n.machine)),
                      _shown(_own_build(n.selection, n.selection_error)), f"{n.seconds:.1f}")
    con.print(table)
    ok = len(inv.reachable)
    con.print(f"{ok} of {len(inv.nodes)} node(s) answered in {inv.seconds:.2f} s ({inv.launcher})")


def print_fleet_selection(fl: FleetSelection) -> None:
    from envkit.cli.output import console, esc

    con = console()
    where = f" (partition {fl.partition})" if fl.partition else ""
    if fl.selection is None:
        con.print(f"[bold red]No fleet build{where}:[/] {_shown(fl.error or '?')}")
        if fl.hint:
            con.print(f"[bold]fix:[/] {_shown(fl.hint)}")
        for reason in fl.reasons:
            con.print(f"  - {_shown(reason)}")
        return
    sel = fl.selection
    build = f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "[yellow]CPU only[/]"
    con.print(f"[bold green]Fleet build{where}:[/] torch {sel.torch} · {build} · python {sel.python} · "
              f"flavor {sel.flavor} · {len(fl.nodes)} node(s)")
    con.print("[bold]Why:[/]")
    for reason in fl.reasons:
        con.print(f"  - {_shown(reason)}")


_CHECK_COLUMNS = (("import", "import"), ("driver", "driver"), ("architecture", "arch"), ("autocast", "autocast"),
                  ("grad_scaler", "scaler"), ("training", "train"), ("speed", "speed"), ("memory", "memory"),
                  ("matmul_tflops", "tflops"), ("multi_gpu", "multi-GPU"))
_STYLE = {"PASS": "green", "FAIL": "bold red", "SKIPPED": "dim", "WARN": "yellow"}


def print_fleet_verify(result: FleetVerify) -> None:
    from rich.table import Table

    from envkit.cli.output import console, esc

    con = console()
    present = [c for c in _CHECK_COLUMNS if any(c[0] in n.checks for n in result.nodes)]
    table = Table(show_edge=False)
    table.add_column("node")
    table.add_column("verdict")
    for _key, label in present:
        table.add_column(label)
    for label in ("AMP x", "mem", "TFLOP/s", "s"):
        table.add_column(label, justify="right")
    for n in result.nodes:
        slow = n.node == result.slowest
        name = f"[bold red]{_shown(n.node)}[/]" if n.outcome == "FAIL" else (
            f"[yellow]{_shown(n.node)} (slowest)[/]" if slow else _shown(n.node))
        cells = [f"[{_STYLE.get(n.checks.get(k, ''), '')}]{n.checks.get(k, '-')}[/]" if k in n.checks else "-"
                 for k, _label in present]
        table.add_row(name, f"[{_STYLE.get(n.outcome, '')}]{n.outcome}[/]", *cells,
                      f"{n.speedup:.2f}" if n.speedup is not None else "-",
                      f"{n.memory_ratio:.2f}" if n.memory_ratio is not None else "-",
                      f"{n.tflops:.0f}" if n.tflops is not None else "-", f"{n.seconds:.1f}")
    con.print(table)
    for n in result.nodes:
        if n.outcome != "PASS":
            con.print(f"[{_STYLE.get(n.outcome, '')}]{_shown(n.node)}[/]: {_shown(n.summary)}")
    if result.nccl is not None:
        con.print(f"[bold]NCCL across nodes:[/] [{_STYLE.get(result.nccl.outcome, '')}]{result.nccl.outcome}[/] "
                  f"{_shown(result.nccl.summary)}")
        for node, err in result.nccl.node_errors.items():
            con.print(f"  [red]{_shown(node)}[/]: {_shown(err)}")
    con.print(f"[{_STYLE.get(result.outcome, '')}]{result.outcome}[/]: {_shown(result.summary)} "
              f"({result.seconds:.1f} s)")


def print_fleet_create(result: FleetCreate) -> None:
    from rich.table import Table

    from envkit.cli.output import console, esc

    con = console()
    table = Table(show_edge=False)
    for col in ("node", "result", "prefix", "packages", "s", "error"):
        table.add_column(col, overflow="fold")
    digests = sorted({n.digest for n in result.nodes if n.ok and n.digest})
    for n in result.nodes:
        status = "[green]ok[/]" if n.ok else f"[bold red]FAILED ({n.phase})[/]"
        table.add_row(_shown(n.node), status, _shown(n.prefix or ""), str(n.packages or ""), f"{n.seconds:.1f}",
                      _shown(n.error or ""))
    con.print(table)
    ok = [n for n in result.nodes if n.ok]
    where = "one shared prefix" if result.shared else "node-local prefixes"
    same = "identical on every node" if result.identical else f"[bold red]NOT identical ({len(digests)} variants)[/]"
    part = f"partition {_shown(result.partition)}: " if result.partition else ""
    staged = [n.node for n in result.nodes if n.staged]
    if staged:
        where += f"; bundle staged onto {_shown(', '.join(staged))}"
    if result.partition and result.fleet is not None and result.fleet.selection is None:
        con.print(f"[bold red]partition {_shown(result.partition)}: no build[/] "
                  f"{_shown(result.fleet.error or '')}")
        if result.fleet.hint:
            con.print(f"[bold]fix:[/] {_shown(result.fleet.hint)}")
        return
    con.print(f"{part}{len(ok)} of {len(result.nodes)} node(s) ok ({where}); records {same}; "
              f"bundle {_shown(result.bundle)}; "
              f"{result.seconds:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in result.phases.items()) + ")")
    for n in result.failed:
        con.print(f"[red]{_shown(n.node)}[/]: {_shown(n.error or '?')} (nothing half-made is left there)")
