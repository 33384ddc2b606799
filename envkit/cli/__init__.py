"""The thin click layer: parse options, call one core function, print through output.py.

Owns: the group, main() and the one error boundary (here); every shared option, its validator and
the one flags -> Request (options); one module per verb family (env, lock, fleet, shell, doctor);
all rendering, human and --json (output). The only package that imports click or rich, prints or
exits. Heavy modules (rattler, NVML, jinja2, rich) load inside the commands so `envkit --help`
stays instant.
May import: everything below it; nothing imports it.
"""

from __future__ import annotations

import os
import sys

import click

from envkit import __version__
from envkit.cli.help import RootGroup, examples
from envkit.errors import EnvkitError, ExitCode

@click.group(cls=RootGroup, epilog=examples(
    ("a training environment for this machine's GPU, proved by an AMP smoke test",
     "envkit create dl_train --cuda auto"),
    ("what envkit would pick here, and why", "envkit detect"),
    ("the environments envkit made, and the specs", "envkit list"),
    ("help on one verb, or on the environment variables", "envkit help environment")),
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="envkit")
@click.option("-v", "--verbose", is_flag=True, help="Log every child process and decision.")
def cli(verbose: bool) -> None:
    """envkit: a working GPU training environment in one command, and proof that it works."""
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")


# Verbs live in one module per family; each imports only click at import time and keeps heavy
# imports inside its commands, so `envkit --help` stays instant.
from envkit.cli import doctor as _doctor  # noqa: E402
from envkit.cli import env as _env  # noqa: E402
from envkit.cli import fleet as _fleet  # noqa: E402
from envkit.cli import help as _help  # noqa: E402
from envkit.cli import lock as _lock  # noqa: E402
from envkit.cli import shell as _shell  # noqa: E402

for _command in (*_env.COMMANDS, _lock.lock_cmd, _fleet.bundle, _fleet.fleet, _shell.shell_cmd,
                 _shell.activate_cmd, _shell.deactivate_cmd, _shell.kernel_cmd, _doctor.doctor, _doctor.completion,
                 _help.help_cmd):
    cli.add_command(_command)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: the one place that turns EnvkitError into a message and an exit code."""
    code = _run(argv)
    if "rattler" in sys.modules:
        # py-rattler 0.28 can crash at interpreter exit after async work (rattler-notes.md §4):
        # flush and leave without running the finalizers that race its runtime threads.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    raise SystemExit(code)


def _run(argv: list[str] | None) -> int:
    """Every command runs behind the redaction boundary; nothing leaves as a traceback."""
    from envkit.cli import output
    from envkit.secrets import learn, learn_environment

    learn_environment()
    for arg in argv if argv is not None else sys.argv[1:]:
        learn(arg)
    try:
        with output.redacting_streams():
            return _dispatch(argv)
    finally:
        from envkit.fsutil import remove_registered

        staging = sys.modules.get("envkit.prefix.staging")  # loaded only by the verbs that stage
        if staging is not None:
            staging.settle_at_exit()  # a folder an interrupt saw being written to: one last try before os._exit
        remove_registered()


def _dispatch(argv: list[str] | None) -> int:
    try:
        cli.main(args=argv, prog_name="envkit", standalone_mode=False)
    except EnvkitError as exc:
        from envkit.cli import output

        output.error(exc.message, exc.hint, details=getattr(exc, "details", None))
        return int(exc.exit_code)
    except click.exceptions.Abort:  # click turns KeyboardInterrupt into Abort
        return _interrupted()
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        return _interrupted()
    except OSError as exc:
        return _os_failure(exc)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line and a saved report
        return _crash(exc)
    return 0


def _interrupted() -> int:
    """Ctrl-C / SIGTERM: the staging was removed on the way here; say so only if it is really gone."""
    staging = sys.modules.get("envkit.prefix.staging")  # loaded only by the verbs that stage
    # the last try comes before the message, so what it says is what is on disk
    left = staging.settle_at_exit() if staging is not None else []
    if left:
        click.echo("Interrupted; could not remove what this run had half-made: " + "; ".join(left), err=True)
    else:
        click.echo("Interrupted: nothing half-made was left behind.", err=True)
    return 130


def _os_failure(exc: OSError) -> int:
    """A file-system failure no stage anticipated: what, where, and the fix for that errno."""
    from envkit.cli import output
    from envkit.errors import os_error_hint

    where = " ".join(str(f) for f in (exc.filename, exc.filename2) if f)
    text = f"{exc.strerror or exc}" + (f": {where}" if where else "")
    hint = os_error_hint(text)
    if hint is None and where:  # ENOENT, ENOTDIR, EISDIR, ELOOP... on a path the user named or owns
        hint = f"check that path: ls -ld {exc.filename}"
    if hint is None:
        return _crash(exc)
    output.error(text, hint)
    return int(ExitCode.ERROR)


def _crash(exc: BaseException) -> int:
    from envkit.cli import output

    path = _save_crash_report(exc)
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    where = f"the details are in {path}" if path else "no report could be saved"
    output.error(f"internal error ({type(exc).__name__}{': ' + first if first else ''})",
                 f"this is a bug in envkit: {where}; please attach it to an issue (envkit {__version__})")
    return int(ExitCode.ERROR)


def _save_crash_report(exc: BaseException) -> str | None:
    """The traceback, redacted, in a private file under $ENVKIT_HOME/crash-reports (else the temp dir)."""
    import tempfile
    import traceback

    from envkit.secrets import redact

    try:
        text = redact("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        text = f"envkit {__version__}\nargv: {redact(' '.join(sys.argv))}\n\n{text}"
    except BaseException:  # noqa: BLE001 - e.g. MemoryError while formatting
        text = f"envkit {__version__}: {type(exc).__name__}\n"
    candidates: list[str] = []
    try:
        from envkit.config import envkit_home

        candidates.append(str(envkit_home() / "crash-reports"))
    except BaseException:  # noqa: BLE001 - ENVKIT_HOME itself may be what is broken
        pass
    candidates.append(tempfile.gettempdir())
    for directory in candidates:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fd, path = tempfile.mkstemp(prefix="envkit-crash-", suffix=".txt", dir=directory)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            return path
        except OSError:
            continue
    return None
