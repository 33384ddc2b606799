"""A Jupyter kernelspec for an environment, so the user's Jupyter (any Python) lists and starts it.

The spec goes where `jupyter kernelspec list` looks for user kernels (jupyter_core
`paths.jupyter_data_dir()` on Linux: `$JUPYTER_DATA_DIR`, else `$XDG_DATA_HOME/jupyter`, else
`~/.local/share/jupyter`; then `kernels/<name>/kernel.json`, the layout of
jupyter_client `kernelspec.py`). `argv` runs the env's own python with `-m ipykernel_launcher -f
{connection_file}` (what `ipykernel install` writes); `env` carries what activation sets, with `PATH`
as `<prefix>/bin:${PATH}` (jupyter_client's provisioner substitutes `${VAR}` in `env` values,
`provisioner_base.py` `_update_env`, with `string.Template`, so a literal `$` is written `$$`).

A spec envkit wrote carries `metadata.envkit.prefix`; envkit only ever removes such specs.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.compat.builds import CUDA_PINS, UNKNOWN, cuda_of_build, cuda_of_pins, cuda_of_wheel
from envkit.errors import EnvkitError, InputError
from envkit.fsutil import PathError, atomic_write_text, confined, copy_regular
from envkit.prefix.records import CREATE_FILE, conda_records, has_record, read_meta
from envkit.safeio import load_json
from envkit.shell.activate import default_env, read_env

MARK = "envkit"


@dataclass(frozen=True)
class Kernel:
    name: str
    path: Path  # the kernelspec folder
    display_name: str
    prefix: Path
    skipped: tuple[str, ...] = ()  # what register did not copy, and why


def kernels_dir() -> Path:
    data = os.environ.get("JUPYTER_DATA_DIR")
    if data:
        return Path(data).expanduser() / "kernels"
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg).expanduser() / "jupyter" / "kernels"


def kernel_name(env_name: str) -> str:
    """Kernel names are folder names jupyter accepts: [a-z0-9._-] (jupyter_client `_is_valid_kernel_name`)."""
    return "envkit-" + (re.sub(r"[^a-z0-9._-]", "-", env_name.lower()) or "env")


def has_ipykernel(prefix: Path) -> bool:
    """ipykernel installed by conda (a conda-meta record) or by pip (its package folder in site-packages)."""
    if has_record(prefix, "ipykernel"):
        return True
    return any(prefix.glob("lib/python3*/site-packages/ipykernel/__init__.py"))


def _label(cuda: str | None) -> str | None:
    return "CPU" if cuda is None else None if cuda == UNKNOWN else f"CUDA {cuda}"


def torch_of(prefix: Path) -> tuple[str | None, str | None]:
    """(torch version, 'CUDA X.Y', 'CPU' or None when the build does not say): envkit's own record first,
    then conda-meta, then pip's dist-info; build strings read by compat/builds.py, as doctor reads them."""
    try:
        sel = read_meta(prefix, CREATE_FILE).get("selection") or {}
        if sel.get("torch"):
            return str(sel["torch"]), (f"CUDA {sel['cuda']}" if sel.get("cuda") else "CPU")
    except (InputError, AttributeError):
        pass
    for _record, data in conda_records(prefix, "pytorch-[0-9]*.json"):
        cuda = cuda_of_build(str(data.get("build", "")))
        if cuda == UNKNOWN:  # a build string that names no variant: the env's cuda-version / pytorch-cuda say it
            pins = {str(d.get("name")): str(d.get("version")) for name in CUDA_PINS
                    for _p, d in conda_records(prefix, f"{name}-[0-9]*.json")}
            cuda = cuda_of_pins(pins) or UNKNOWN
        return str(data.get("version")), _label(cuda)
    for dist in sorted(prefix.glob("lib/python3*/site-packages/torch-*.dist-info")):
        version = dist.name[len("torch-"):-len(".dist-info")]
        return version.split("+")[0], _label(cuda_of_wheel(version))
    return None, None


def display_name(env_name: str, prefix: Path) -> str:
    torch, cuda = torch_of(prefix)
    if torch is None:
        return f"Python (envkit: {env_name})"
    return f"Python (envkit: {env_name}, torch {torch}" + (f", {cuda})" if cuda else ")")


def kernel_spec(prefix: Path, env_name: str) -> dict[str, Any]:
    """kernel.json for the env (pure apart from reading the env's own files)."""
    info = read_env(prefix)
    env = {k: v.replace("$", "$$") for k, v in info.settable_vars().items()}
    env.update(PATH=f"{prefix}/bin:${{PATH}}", CONDA_PREFIX=str(prefix),
               CONDA_DEFAULT_ENV=default_env(str(prefix)))
    return {
        "argv": [str(prefix / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name(env_name, prefix),
        "language": "python",
        "interrupt_mode": "signal",
        "env": env,
        "metadata": {"debugger": True, MARK: {"prefix": str(prefix), "name": env_name}},
    }


def _owner(folder: Path) -> str | None:
    """The prefix an envkit-made spec belongs to; None for a spec envkit did not write."""
    try:
        data = load_json(folder / "kernel.json", "kernel spec", limit=1 << 20)
        return str(data["metadata"][MARK]["prefix"])
    except (InputError, KeyError, TypeError):
        return None


LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")  # ipykernel's resources (kernelspec.py RESOURCES)
_MADE = ("kernel.json", *LOGOS)  # the only files envkit writes into a kernelspec, so the only ones it removes
LOGO_LIMIT = 1 << 20  # ipykernel's logos are a few KiB


def _clash(root: Path, name: str, prefix: Path, env_name: str) -> None:
    """Refuse a name another spec holds. Jupyter treats kernel names without regard to case
    (jupyter_client kernelspec.py lower-cases them in find_kernel_specs and get_kernel_spec), so
    `envkit-Foo` made by anyone, or envkit's own spec of another env whose name maps to the same
    kernel name (Foo and foo, a b and a-b), is a clash: an error naming the other env, never a takeover."""
    if not root.is_dir():
        return
    for folder in sorted(root.iterdir()):
        if folder.name.lower() != name:
            continue
        if folder.is_symlink() or (folder / "kernel.json").is_symlink():
            raise EnvkitError(f"a Jupyter kernel named {folder.name!r} at {folder} is a symlink envkit did not make; "
                              "it was left alone", f"remove the link yourself (rm {folder}) if it is stale, then "
                              f"run envkit kernel {env_name}")
        owner = _owner(folder) if folder.is_dir() else None
        if owner is None:
            raise EnvkitError(f"a Jupyter kernel named {folder.name!r} already exists at {folder} and was not made by "
                              "envkit; it was left alone", f"remove it yourself (jupyter kernelspec remove "
                              f"{folder.name}) and run envkit kernel {env_name}")
        if os.path.realpath(owner) == os.path.realpath(prefix) or not Path(owner).is_dir():
            continue  # this env's own spec (refreshed), or one whose env is gone (taken over)
        other = _owner_name(folder) or Path(owner).name
        raise EnvkitError(f"the Jupyter kernel name {name!r} is already the env {other!r}'s ({owner}); env names "
                          "that differ only in case, or in characters a kernel name cannot hold, share one "
                          "kernel name, and envkit will not hand one env's kernel to another",
                          f"remove the other one first (envkit kernel {other} --remove), or give this env a name "
                          "that differs in more than case")


def _owner_name(folder: Path) -> str | None:
    try:
        data = load_json(folder / "kernel.json", "kernel spec", limit=1 << 20)
        return str(data["metadata"][MARK]["name"])
    except (InputError, KeyError, TypeError):
        return None


def register(prefix: Path, env_name: str) -> Kernel:
    """Write (or refresh) the env's kernelspec; a same-named spec envkit did not make, or one of another
    env, is left alone (an error says which). Logos are copied only from inside the env, only regular
    files of at most LOGO_LIMIT bytes, never with a wider mode (fsutil.copy_regular); one that is not
    is skipped and said."""
    name = kernel_name(env_name)
    root = kernels_dir()
    folder = root / name
    _clash(root, name, prefix, env_name)
    spec = kernel_spec(prefix, env_name)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "kernel.json", json.dumps(spec, indent=1) + "\n")
    skipped: list[str] = []
    for logo in LOGOS:
        for found in sorted(prefix.glob(f"lib/python3*/site-packages/ipykernel/resources/{logo}")):
            dest = folder / logo
            try:
                source = confined(prefix, found.relative_to(prefix).as_posix(), what="kernel logo")
                if dest.is_symlink() or dest.exists():
                    dest.unlink()  # envkit's own copy from a previous register (the folder is envkit's)
                copy_regular(source, dest, limit=LOGO_LIMIT, what="kernel logo")
            except (PathError, OSError) as exc:
                skipped.append(f"{logo} not copied: {getattr(exc, 'message', exc)}")
            break
    return Kernel(name, folder, spec["display_name"], prefix, tuple(skipped))


def unregister(prefix: Path | None, env_name: str | None = None) -> list[Path]:
    """Remove the kernelspecs envkit wrote for this prefix (or under this env's kernel name, when the env
    is gone already). A spec envkit did not write is never touched, nor is a symlink (envkit never makes
    one: neither the link nor what it points to is removed); in an envkit spec only the files envkit
    writes are removed, and the folder only once it is empty."""
    root = kernels_dir()
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    target = os.path.realpath(prefix) if prefix is not None else None
    wanted = kernel_name(env_name) if env_name else None
    for folder in sorted(root.iterdir()):
        if folder.is_symlink() or not folder.is_dir() or (folder / "kernel.json").is_symlink():
            continue
        owner = _owner(folder)
        if owner is not None and (os.path.realpath(owner) == target or folder.name.lower() == wanted):
            for made in _MADE:
                path = folder / made
                if path.is_file() and not path.is_symlink():
                    path.unlink()
            try:
                folder.rmdir()
            except OSError:
                pass  # files envkit did not write stay, and so does their folder
            removed.append(folder)
    return removed


def after_create(prefix: Path, env_name: str, skip: bool) -> str | None:
    """`envkit create`'s step: register when the env has ipykernel; a note for the summary, never a failure."""
    if skip or not has_ipykernel(prefix):
        return None
    try:
        kernel = register(prefix, env_name)
    except (OSError, EnvkitError) as exc:
        return f"Jupyter kernel not registered: {getattr(exc, 'message', exc)}"
    return (f"Jupyter kernel {kernel.name!r} registered ({kernel.display_name}) in {kernel.path.parent}"
            + "".join(f"; {why}" for why in kernel.skipped))
