"""The env verbs: detect, render, create, verify, export, list, run, remove.

Each command unpacks its options (cli/options.py) and calls one core function; output.py renders.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envkit.cli.help import CUDA_MEANING, examples
from envkit.cli.options import (Selectors, check_timeout, complete_envs, complete_specs, from_config,
                                lock_version_option, selection_options, spec_of)
from envkit.cli.shell import forget_kernels, with_kernel
from envkit.errors import ExitCode

if TYPE_CHECKING:
    from envkit.create import CreateResult
    from envkit.lock.bundle import Bundle

@click.command(epilog=examples(
    ("this machine: driver, GPUs and the build envkit would pick, with reasons", "envkit detect"),
    ("plan for another machine (a Docker build, a GPU-less CI runner)",
     "envkit detect --driver-version 550.54.15 --compute-capability 8.0"),
    ("every torch x CUDA variant each flavor offers here, usable or why not", "envkit detect --catalogue"),
    ("the same facts for a script", "envkit detect --json")))
@selection_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (stable keys).")
@click.option("--catalogue", "show_catalogue", is_flag=True,
              help="Show what each flavor offers for this machine: torch versions x CUDA variants, usable or why not.")
@click.option("--mirror", default=None, envvar="ENVKIT_MIRROR", help="Mirror profile or URL to read catalogues through.")
def detect(*, selectors: Selectors, as_json: bool, show_catalogue: bool, mirror: str | None) -> None:
    """Driver, the CUDA it supports, GPUs, and the PyTorch build envkit would pick, with reasons."""
    from envkit.cli import output
    from envkit.detect import detect as run_detect
    from envkit.errors import SelectionError
    from envkit.models import DetectResult
    from envkit.plan import CatalogueChoice, select_for

    machine = run_detect(driver_version=selectors.driver_version, compute_capabilities=selectors.compute_capabilities,
                         cuda=selectors.cuda)
    request = selectors.request()
    choice = CatalogueChoice(selectors.catalogue_mode(), from_config(mirror, "mirror"))
    if show_catalogue:
        from envkit.plan import catalogue_table

        table = catalogue_table(machine, request, choice, flavors=(selectors.flavor,) if selectors.flavor else None)
        if as_json:
            output.plain(output.dump_json(table))
        else:
            output.print_catalogue(table)
        return
    try:
        result = DetectResult(machine, select_for(machine, request, choice))
    except SelectionError as exc:
        if not as_json:
            output.print_detect(DetectResult(machine, None))
            raise
        output.plain(output.dump_json(output.detect_json(DetectResult(machine, None, str(exc)))))
        raise SystemExit(int(ExitCode.ERROR)) from None
    if as_json:
        output.plain(output.dump_json(output.detect_json(result)))
    else:
        output.print_detect(result)


@click.command(epilog=examples(
    ("prove dl_train trains with AMP on this machine's GPU", "envkit verify dl_train"),
    ("the quick checks only, on every GPU, then NCCL + DDP across them", "envkit verify dl_train --quick --all-gpus"),
    ("is AMP safe for your own model? fp32 vs fp16 vs bf16, and a page to look at",
     "envkit verify dl_train --model train.py:make_model --html amp.html"),
    ("a report for CI (exit 0 PASS, 3 FAIL, 4 SKIPPED)", "envkit verify dl_train --report verify.json")))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="Verify the environment at this path.")
@click.option("--python", "python_exe", default=None, help="Verify this interpreter (no environment needed).")
@click.option("--quick", is_flag=True, help="Skip the speed, memory and TFLOP/s measurements.")
@click.option("--device", type=click.IntRange(min=0), default=None, help="GPU index to test (default 0).")
@click.option("--all-gpus", is_flag=True, help="Check every visible GPU, then NCCL + DDP across them.")
@click.option("--timeout", type=float, callback=check_timeout, default=300.0, show_default=True,
              help="Kill the payload (and its children) after this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="One line: the outcome and its reason (no table).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON report to this file.")
@click.option("--model", "model", default=None, metavar="FILE.py:FUNC|MODULE:FUNC",
              help="Check AMP on your own model: FUNC() returns (model, make_batch, loss_fn[, make_optimizer]); "
                   "fp32 vs fp16 + GradScaler vs bf16 from the same weights and batches.")
@click.option("--steps", type=int, default=None, help="Training steps per precision with --model (default 200; "
              "the fp32 run also stops after 10 s and the others run as many steps).")
@click.option("--max-batch", "max_batch", is_flag=True,
              help="With --model on a GPU: the largest batch per precision (bounded doubling search).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), default=None,
              help="Also write a self-contained HTML report (curves, bars, verdict, checks) to this file.")
def verify(name: str | None, prefix: str | None, python_exe: str | None, quick: bool, device: int | None,
           all_gpus: bool, timeout: float, as_json: bool, quiet: bool, report_file: str | None, model: str | None,
           steps: int | None, max_batch: bool, html_file: str | None) -> None:
    """Prove an environment trains with AMP on its GPU: PASS (0), FAIL (3) or SKIPPED (4, no GPU).

    With --model: is AMP safe for your model? FAIL (3) when no reduced precision is safe, else PASS (0) on a
    GPU or SKIPPED (4) in CPU mode.
    """

    from envkit.cli import output
    from envkit.errors import UsageError
    from envkit.verify import MODEL_STEPS, verify_env, verify_model

    report_path = Path(report_file) if report_file else None
    if model is None and (steps is not None or max_batch):
        raise UsageError("--steps and --max-batch only apply to --model", "add --model FILE.py:FUNC, or drop them")
    if model is not None:
        if all_gpus or quick:
            raise UsageError("--all-gpus and --quick do not apply to --model", "drop them (one GPU, --device N)")
        report = verify_model(model, name=name, prefix=prefix, python=python_exe, device=device,
                              steps=MODEL_STEPS if steps is None else steps, timeout=timeout,
                              report_file=report_path, max_batch=max_batch)
    else:
        report = verify_env(name=name, prefix=prefix, python=python_exe, quick=quick, device=device,
                            all_gpus=all_gpus, timeout=timeout, report_file=report_path)
    if html_file:
        from envkit.verify.html import write_html

        write_html(report, Path(html_file))
    if as_json:
        output.plain(output.dump_json(report.to_json()))
    elif quiet:
        output.plain(output.verify_line(report))
    elif model is not None:
        output.print_model_verify(report)
    else:
        output.print_verify(report)
    raise SystemExit(int(report.exit_code))


CONDA_LOCK_HELP = ("Write the form conda-lock parses: pip index lines become its top-level pip-repositories: "
                   "(conda env create ignores those; use the plain file for conda).")


@click.command(epilog=examples(
    ("the environment.yml of spec dl_train for this machine", "envkit render dl_train -o environment.yml"),
    ("a colleague's file adapted to this machine (every change is printed)",
     "envkit render --from their-environment.yml -o environment.yml"),
    ("for a CUDA 12.4 machine, through a mirror", "envkit render dl_train --cuda 12.4 --mirror tuna")))
@click.argument("spec", required=False, shell_complete=complete_specs)
@click.option("--from", "--file", "from_file", type=click.Path(dir_okay=False), default=None,
              help="Adapt an existing environment.yml (a colleague's, or conda env export output) to this machine "
                   "(--file, as create and lock call it, is the same option).")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False), default=None,
              help="Use this spec file instead of a named one.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the file here (atomically) instead of printing it (- = stdout).")
@click.option("--name", default=None, help="Environment name written into the file.")
@click.option("--mirror", default=None, envvar="ENVKIT_MIRROR",
              help="Mirror profile (tuna, ustc, bfsu, sjtu, nju, aliyun, or one from the config) or a URL.")
@click.option("--conda-lock", "conda_lock", is_flag=True, help=CONDA_LOCK_HELP)
@selection_options
def render(spec: str | None, from_file: str | None, spec_path: str | None, output: str | None, name: str | None,
           mirror: str | None, conda_lock: bool, *, selectors: Selectors) -> None:
    """Render environment.yml for a named spec (default dl_train) on this machine, or adapt one (--from)."""

    from envkit.cli import output as out
    from envkit.errors import UsageError
    from envkit.fsutil import atomic_write_text
    from envkit.secrets import redact
    from envkit.plan import render_env

    if from_file and (spec or spec_path):
        raise UsageError("give either a spec or --from FILE, not both", "envkit render dl_train  or  envkit render --from FILE")
    result = render_env(spec=spec_path or spec, from_file=Path(from_file) if from_file else None, name=name,
                        request=selectors.request(), flavor_given=selectors.flavor_given,
                        mirror=from_config(mirror, "mirror"), driver_version=selectors.driver_version,
                        compute_capabilities=selectors.compute_capabilities, catalogue_mode=selectors.catalogue_mode())
    for change in result.changes:
        out.plain(f"changed: {change}", err=True)
    if conda_lock:
        from dataclasses import replace

        from envkit.render.envfile import for_conda_lock

        envfile, notes = for_conda_lock(result.envfile)
        result = replace(result, text=envfile.render(), envfile=envfile)
        for note in notes:
            out.plain(f"note: {note}", err=True)
    if output and output != "-":  # `-o -` is stdout, as for lock and export (a file named - is ./-)
        atomic_write_text(Path(output), redact(result.text))  # a credential never reaches a file
        sel = result.selection
        out.plain(f"wrote {output}: " + ("no torch (file passed through)" if sel is None else f"torch {sel.torch} "
                  + (f"CUDA {sel.cuda}" if sel.cuda else "CPU") + f", {sel.flavor}"), err=True)
    else:
        sys.stdout.write(result.text)


@click.command(epilog=examples(
    ("spec dl_train for this machine's GPU, then the AMP smoke test", "envkit create dl_train --cuda auto"),
    ("spec minimal under another name, for a driver that supports CUDA 12.4",
     "envkit create myproj --spec minimal --cuda 12.4"),
    ("show the plan (packages, sizes, channels) and install nothing", "envkit create dl_train --dry-run"),
    ("without network, from a folder `envkit bundle` wrote on a connected machine",
     "envkit create dl_train --bundle /media/usb/dl_train"),
    notes=CUDA_MEANING))
@click.argument("name", shell_complete=complete_specs)
@click.option("--spec", "spec", default=None, help="Named spec or spec file (default: NAME if it is a spec, else dl_train).")
@click.option("--file", "env_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Create from this environment.yml (adapted to this machine unless --no-adapt).")
@click.option("--no-adapt", is_flag=True, help="Take --file literally (no CUDA replacement).")
@click.option("--lock", "lock_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Recreate this platform's packages of a lock (envkit lock, export --format lock, pixi.lock "
                   "v6/v7), no solve.")
# a plain string, checked by load_bundle: with --bundle-gate the folder may not exist yet, and a stat before it
# does would leave a negative lookup cached on an NFS client (lookupcache) that hides it for a while after
@click.option("--bundle", "bundle_dir", type=str, default=None, metavar="DIRECTORY",
              help="Install from a bundle folder (envkit bundle): no network, every checksum verified first.")
@click.option("--bundle-gate", is_flag=True, hidden=True,
              help="fleet create's node side: load everything, then wait for 'go' on stdin before reading the bundle.")
@click.option("--bundle-stage-dir", hidden=True, default=None,
              help="fleet create's node side: where a bundle staged through stdin is unpacked.")
@click.option("--mirror", default=None, envvar="ENVKIT_MIRROR", help="Mirror profile or URL for channels and PyPI.")
@click.option("--channel", "channels", multiple=True, metavar="URL",
              help="Use these channels instead of the file's (repeatable; file://, http(s)://).")
@click.option("--prefix", default=None, help="Create the environment at this path.")
@click.option("--engine", type=click.Choice(["rattler", "conda", "mamba", "micromamba"]), default=None,
              envvar="ENVKIT_ENGINE", help="Solver/installer (default: the embedded rattler).")
@click.option("--dry-run", is_flag=True, help="Solve and print the plan; install nothing.")
@click.option("--force", is_flag=True, help="Replace an env envkit made (the old one stays until the new one passes verify).")
@click.option("--not-envkit", is_flag=True, help="With --force: also replace an env envkit cannot prove it made.")
@click.option("--no-verify", is_flag=True, help="Skip the AMP smoke test after creating.")
@click.option("--require-gpu", is_flag=True, help="Fail unless a GPU build is selected and verify PASSes.")
@click.option("--quiet", "-q", is_flag=True, help="One line per result: no progress, plan, table or banner.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--no-kernel", is_flag=True,
              help="Do not register the env as a Jupyter kernel (done when it has ipykernel).")
@selection_options
def create(name: str, spec: str | None, env_file: str | None, no_adapt: bool, lock_file: str | None,
           bundle_dir: str | None, bundle_gate: bool, bundle_stage_dir: str | None, mirror: str | None,
           channels: tuple[str, ...], prefix: str | None, engine: str | None, dry_run: bool, force: bool,
           not_envkit: bool, no_verify: bool, require_gpu: bool, quiet: bool, as_json: bool, *,
           selectors: Selectors, no_kernel: bool = False) -> None:
    """Detect, select, render, solve, install atomically and verify an environment."""

    from envkit.cli import output
    from envkit.create import CreateOptions, create_env
    quiet = quiet or as_json
    bundle = _bundle_of(bundle_dir, bundle_gate, bundle_stage_dir)
    if bundle is not None:
        lock_file = str(bundle.lock_path)
    if spec is None and env_file is None and lock_file is None:
        spec = spec_of(name, "create", quiet)
    for channel in channels:
        from envkit.render.envfile import check_channel

        check_channel(channel, "--channel")
    opts = CreateOptions(
        name=name, spec=spec, file=Path(env_file) if env_file else None, no_adapt=no_adapt,
        lock=Path(lock_file) if lock_file else None,
        request=selectors.request(), flavor_given=selectors.flavor_given,
        mirror=from_config(mirror, "mirror"), channels=channels, prefix=Path(prefix) if prefix else None,
        engine=from_config(engine, "engine") or "rattler",
        dry_run=dry_run, force=force, not_envkit=not_envkit, no_verify=no_verify, require_gpu=require_gpu,
        driver_version=selectors.driver_version, compute_capabilities=selectors.compute_capabilities,
        argv=("envkit", *sys.argv[1:]) if sys.argv and sys.argv[0].endswith("envkit") else ("envkit", "create", name),
        catalogue=selectors.catalogue_mode(),
    )
    on_line = None if quiet else (lambda line: output.line("  " + line))
    with output.progress(quiet) as progress:
        if bundle is not None:
            from envkit.lock.bundle import create_from_bundle

            result = create_from_bundle(opts, bundle, progress=progress, on_line=on_line)
        else:
            result = create_env(opts, progress=progress, on_line=on_line,
                                on_plan=None if quiet else output.print_plan_header)
    result = with_kernel(result, name, skip=no_kernel or dry_run)  # issue 14: a Jupyter kernel when it has ipykernel
    if as_json:
        output.plain(output.dump_json(result.to_json()))
    elif quiet:  # -q: one line per result, no table, no banner
        output.plain(output.plan_line(result) if dry_run else output.created_line(result))
    elif dry_run:
        output.print_plan(result)
    else:
        output.print_created(result)
    _exit_for_verify(result, require_gpu, notice=as_json)


def _bundle_of(bundle_dir: str | None, bundle_gate: bool, stage_dir: str | None) -> Bundle | None:
    """--bundle DIR (with --bundle-gate: once fleet create says go), every file's sha256 checked first."""
    if bundle_gate and not bundle_dir:
        from envkit.errors import UsageError

        raise UsageError("--bundle-gate needs --bundle DIR", "it is the node side of envkit fleet create")
    if not bundle_dir:
        return None
    from envkit.lock.bundle import load_bundle

    where = Path(bundle_dir)
    if bundle_gate:
        from envkit.fleet.create import wait_for_go

        where = wait_for_go(where, stage_dir)
    return load_bundle(where)  # every file's sha256 is checked before anything is installed


def _ref(prefix: Path) -> str:
    """How verify and remove find this env: its name when that finds it, else its path (quoted)."""
    import shlex

    from envkit.errors import EnvkitError
    from envkit.prefix.locations import find_prefix

    try:
        if find_prefix(prefix.name, None) == prefix:
            return prefix.name
    except EnvkitError:
        pass
    return shlex.quote(str(prefix))


def _exit_for_verify(result: CreateResult, require_gpu: bool, notice: bool = False) -> None:
    """verify FAILED: exit 3; SKIPPED (no usable GPU): exit 4 with --require-gpu, else exit 0 (the outcome line
    already said SKIPPED once; with --json, whose stdout is for a program, a notice on stderr says it).

    --require-gpu keeps the environment it built when verify is SKIPPED: it is the GPU build that was asked for,
    complete, only unproven on this machine (a build for a GPU node, made on a login node, is the usual case),
    and removing it would throw the download away. The message says so and gives the command that removes it."""
    from envkit.cli import output

    if result.verify is None:
        return
    outcome = result.verify.outcome
    if outcome == "FAIL":
        if result.restored_old:
            output.plain(f"verify FAILED on the rebuild: the old environment is back at {result.prefix}", err=True)
        raise SystemExit(int(ExitCode.VERIFY_FAILED))
    if outcome == "SKIPPED":
        if require_gpu:
            ref = _ref(result.prefix)
            why = output.verify_why(result.verify)
            output.error(f"verify was SKIPPED and --require-gpu was given: {why}; the environment was kept at "
                         f"{result.prefix} (the GPU build asked for, unproven here)",
                         f"run `envkit verify {ref}` where a GPU is visible, or remove it: envkit remove {ref} --yes")
            raise SystemExit(int(ExitCode.VERIFY_SKIPPED))
        if notice:
            output.plain("NOTICE: verify was SKIPPED (no usable GPU): the env exists, but nothing proved it "
                         "trains on a GPU.", err=True)


@click.command(epilog=examples(
    ("a portable environment.yml of dl_train for the team", "envkit export dl_train -o environment.yml"),
    ("only what was asked for, pinned to what is installed", "envkit export dl_train --from-history"),
    ("every package's URL and sha256", "envkit export dl_train --format explicit -o explicit.txt"),
    ("a lock file of its requested packages, solved for Apple silicon",
     "envkit export dl_train --format lock --platform osx-arm64")))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="Export the environment at this path.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write here (atomically) instead of stdout.")
@click.option("--format", "fmt", type=click.Choice(["yaml", "explicit", "lock", "pylock"]), default="yaml",
              show_default=True, help="yaml: portable environment.yml; explicit: @EXPLICIT URLs with sha256; lock: "
              "rattler lock file; pylock: PEP 751 pylock.toml of the pip packages (uv pip install -r pylock.toml).")
@click.option("--from-history", is_flag=True, help="Only what was asked for, pinned to the installed versions.")
@click.option("--no-pip", is_flag=True, help="Leave out the pip section.")
@click.option("--name", "env_name", default=None, help="Name written into the file.")
@click.option("--strict", is_flag=True, help="Fail on what the file cannot recreate (editable/local installs; "
              "pip and variables of an explicit file without -o).")
@click.option("--hash", "hash_kind", type=click.Choice(["sha256", "md5"]), default="sha256", show_default=True,
              help="explicit: URL#<sha256> (conda >= 23) or URL#<md5> (any conda, conda-lock).")
@lock_version_option("lock: ")
@click.option("--platform", "platforms", multiple=True, metavar="SUBDIR",
              help="lock: solve the env's requested specs for these platforms (repeatable; see `envkit lock`).")
@click.option("--mirror", default=None, envvar="ENVKIT_MIRROR",
              help="With --platform: mirror for the solve (default: the one the env was created with). With "
                   "--format explicit on the command line: the URLs through this mirror, for plain conda behind it "
                   "(conda downloads explicit URLs as written).")
@click.option("--conda-lock", "conda_lock", is_flag=True, help="yaml: " + CONDA_LOCK_HELP)
def export(name: str | None, prefix: str | None, output: str | None, fmt: str, from_history: bool, no_pip: bool,
           env_name: str | None, strict: bool, hash_kind: str, lock_version: str, platforms: tuple[str, ...],
           mirror: str | None, conda_lock: bool) -> None:
    """A portable environment.yml (no prefix, no builds, pip kept), explicit list or lock file."""

    from envkit.cli import output as out
    from envkit.errors import UsageError
    from envkit.export import SIDECAR_SUFFIX, export_env
    from envkit.fsutil import atomic_write_text
    from envkit.prefix.locations import find_prefix
    from envkit.secrets import redact

    if fmt != "yaml" and (from_history or env_name or conda_lock):
        raise UsageError("--from-history, --name and --conda-lock apply to --format yaml only",
                         f"envkit export {name or ''} --format {fmt}")
    if platforms and fmt != "lock":
        raise UsageError("--platform applies to --format lock", f"envkit export {name or ''} --format lock "
                         + " ".join(f"--platform {p}" for p in platforms))
    path = find_prefix(name, prefix)
    if platforms:
        from envkit.cli.lock import write_result
        from envkit.lock.solve import lock_from_prefix

        write_result(lock_from_prefix(path, platforms, mirror=from_config(mirror, "mirror")), output,
                     int(lock_version))
        return
    sidecar_name = Path(output).name + SIDECAR_SUFFIX if output and fmt == "explicit" else None
    kwargs: dict[str, object] = {"strict": strict, "no_pip": no_pip}
    if fmt == "yaml":
        kwargs.update(name=env_name, from_history=from_history, conda_lock=conda_lock)
    elif fmt == "explicit":
        kwargs.update(sidecar_name=sidecar_name, hash_kind=hash_kind)
        from click.core import ParameterSource

        if mirror and click.get_current_context().get_parameter_source("mirror") == ParameterSource.COMMANDLINE:
            # only a --mirror typed here: ENVKIT_MIRROR set for this machine's creates must not turn the file a
            # team shares into one that only works behind this machine's mirror
            from envkit.render.mirrors import resolve

            from envkit.config import load_file_config

            kwargs.update(mirror=resolve(mirror, load_file_config().data))
    elif fmt == "pylock":
        from envkit.export import PYLOCK_NAME

        if output and not PYLOCK_NAME.match(Path(output).name):
            raise UsageError(f"{Path(output).name!r} is not a pylock file name: PEP 751 names it pylock.toml or "
                             "pylock.NAME.toml (uv and pip recognise it by that name)",
                             f"envkit export {name or ''} --format pylock -o "
                             f"{Path(output).parent / 'pylock.toml'}")
    else:
        kwargs.update(version=int(lock_version))
    result = export_env(path, fmt=fmt, **kwargs)
    for warning in result.warnings:
        out.plain(f"warning: {warning}", err=True)
    if output:
        if result.sidecar is not None and sidecar_name:
            side = Path(output).parent / sidecar_name
            atomic_write_text(side, redact(result.sidecar))
            out.plain(f"wrote {side} (pip packages and variables the explicit format cannot hold)", err=True)
        atomic_write_text(Path(output), redact(result.text))  # a credential never reaches a file
        out.plain(f"wrote {output}", err=True)
    else:
        sys.stdout.write(result.text)


@click.command("list", epilog=examples(
    ("the environments (torch, build, last verify, path) and the specs", "envkit list"),
    ("the same for a script", "envkit list --json")))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(as_json: bool) -> None:
    """Environments made by envkit (with their last verify result) and the specs available."""
    from envkit.cli import output
    from envkit.prefix.inventory import list_envs_rows
    from envkit.render.specs import list_rows

    data = {"environments": list_envs_rows(), "specs": list_rows()}
    if as_json:
        output.plain(output.dump_json(data))
    else:
        output.print_list(data)


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
               epilog=examples(("train inside dl_train without activating it", "envkit run dl_train -- python train.py"),
                               ("the CUDA its torch was built for", "envkit run dl_train -- python -c 'import torch; print(torch.version.cuda)'"),
                               ("an environment made with --prefix", "envkit run --prefix /scratch/envs/dl -- python train.py")))
@click.option("--prefix", default=None, help="Run in the environment at this path (instead of NAME).")
@click.argument("name", required=False, shell_complete=complete_envs)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run(prefix: str | None, name: str | None, command: tuple[str, ...]) -> None:
    """Run COMMAND with the environment activated: envkit run NAME -- python train.py"""
    from envkit.shell.run import run_in_env

    if prefix and name is not None:  # with --prefix, the first word is the command
        command, name = (name, *command), None
    raise SystemExit(run_in_env(name, list(command), prefix))


@click.command(epilog=examples(("remove dl_train after a confirmation", "envkit remove dl_train"),
                               ("the same in a script", "envkit remove dl_train --yes"),
                               ("an environment made with --prefix", "envkit remove --prefix /scratch/envs/dl --yes")))
@click.argument("name", required=False, shell_complete=complete_envs)
@click.option("--prefix", default=None, help="Remove the environment at this path (instead of NAME).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--not-envkit", is_flag=True,
              help="Also remove an env envkit cannot prove it made (conda-made, copied, other ENVKIT_HOME).")
def remove(name: str | None, prefix: str | None, yes: bool, not_envkit: bool) -> None:
    """Remove an environment envkit made (README: what remove will and will not touch)."""
    from envkit.cli import output
    from envkit.errors import UsageError
    from envkit.prefix.locations import find_prefix
    from envkit.prefix.ownership import check_deletable
    from envkit.prefix.inventory import remove_env

    if name and prefix:
        raise UsageError("give NAME or --prefix PATH, not both", f"envkit remove --prefix {prefix}")
    where = name or f"--prefix {prefix}"
    path = find_prefix(name, prefix)
    check_deletable(path, allow_foreign=not_envkit)  # refuse before asking
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to remove {path} without confirmation", f"envkit remove {where} --yes")
        click.confirm(f"Remove {path}?", abort=True)
    remove_env(path, not_envkit=not_envkit)
    output.plain(f"removed {path}")
    forget_kernels(path)  # its Jupyter kernel goes with it (issue 14)


COMMANDS = (detect, verify, render, create, export, list_cmd, run, remove)
