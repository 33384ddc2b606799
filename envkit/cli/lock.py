"""The `envkit lock` verb (issue 12): thin click layer over envkit.lock.solve."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from envkit.cli.help import examples
from envkit.cli.options import Selectors, complete_specs, from_config, lock_version_option, selection_options

if TYPE_CHECKING:
    from envkit.lock.solve import LockResult


def print_lock(result: LockResult, output: str, version: int) -> None:
    from envkit.cli import output as out

    for row in result.results:
        cuda = next((v.split("=")[1] for v in row.virtual_packages if v.startswith("__cuda")), None)
        out.plain(f"{row.platform}: {row.packages} packages"
                  + (f", pytorch {row.torch}" if row.torch else "")
                  + (f", {row.pypi} wheel{'s' if row.pypi != 1 else ''}" if row.pypi else "")
                  + (f" (solved with __cuda={cuda})" if cuda else " (no __cuda)"), err=True)
    for note in result.notes:
        out.plain(f"note: {note}", err=True)
    out.plain(f"wrote {output} (rattler-lock v{version}; install with: envkit create NAME --lock {output})",
              err=True)


def write_result(result: LockResult, output: str | None, version: int) -> None:
    from pathlib import Path

    from envkit.fsutil import atomic_write_text
    from envkit.lock.file import LOCK_NAME, render_lock

    target = output or LOCK_NAME
    if target == "-":
        sys.stdout.write(render_lock(result.lock, version))
        return
    from envkit.secrets import redact

    atomic_write_text(Path(target), redact(render_lock(result.lock, version)))  # a credential never reaches a file
    print_lock(result, target, version)


@click.command("lock", epilog=examples(
    ("one lock file for Linux and Apple silicon", "envkit lock dl_train --platform linux-64 --platform osx-arm64"),
    ("a colleague's environment.yml, for a CUDA 12.4 cluster",
     "envkit lock --file environment.yml --cuda 12.4 --platform linux-64"),
    ("install this machine's platform from it, no solve", "envkit create dl_train --lock envkit.lock")))
@click.argument("name", required=False, shell_complete=complete_specs)
@click.option("--spec", "spec", default=None, help="Named spec or spec file (default: NAME).")
@click.option("--file", "env_file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Lock this environment.yml (adapted to the selection unless --no-adapt).")
@click.option("--no-adapt", is_flag=True, help="Take --file literally (its *cuda* selectors kept).")
@click.option("--platform", "platforms", multiple=True, metavar="SUBDIR", required=True,
              help="Solve for this conda platform (repeatable): linux-64, linux-aarch64, osx-arm64, osx-64, "
                   "win-64.")
@click.option("-o", "--output", default=None, metavar="FILE", help="Where to write (default envkit.lock; - = stdout).")
@lock_version_option()
@click.option("--mirror", default=None, envvar="ENVKIT_MIRROR", help="Mirror profile or URL for channels.")
@click.option("--channel", "channels", multiple=True, metavar="URL", help="Use these channels instead.")
@click.option("--strict", is_flag=True, help="Fail when a pip line cannot be locked for a platform (sdist only, "
              "no wheel for it, -e, a local path) instead of keeping a note.")
@selection_options
def lock_cmd(name: str | None, spec: str | None, env_file: str | None, no_adapt: bool, platforms: tuple[str, ...],
             output: str | None, lock_version: str, mirror: str | None, channels: tuple[str, ...], strict: bool, *,
             selectors: Selectors) -> None:
    """Solve an env for several platforms (no install) into one lock file the team shares.

    Linux and Windows are solved with __cuda at the selection's CUDA level; macOS without CUDA
    (its CUDA selectors are dropped and the CPU/MPS build is locked, and the output says so).
    The pip section is resolved by pip for each platform's Python and wheel tags (nothing is
    installed) into PyPI entries with URL and sha256; a line without a wheel for a platform is
    named in a note (--strict: an error).
    `envkit create NAME --lock envkit.lock` installs this machine's platform from it.
    """
    from pathlib import Path

    from envkit.errors import UsageError
    from envkit.lock.solve import lock_env

    catalogue = selectors.catalogue_mode()  # --offline with --refresh: a usage error before anything else
    if name is None and env_file is None and spec is None:
        raise UsageError("nothing to lock", "envkit lock dl_train --platform linux-64 (or --file environment.yml)")
    if spec is None and env_file is None:
        spec = name
    result = lock_env(platforms=platforms, spec=spec, file=Path(env_file) if env_file else None, no_adapt=no_adapt,
                      name=name or "envkit", request=selectors.request(), flavor_given=selectors.flavor_given,
                      mirror=from_config(mirror, "mirror"), channels=channels,
                      driver_version=selectors.driver_version, compute_capabilities=selectors.compute_capabilities,
                      catalogue=catalogue, strict=strict)
    write_result(result, output, int(lock_version))
