"""What `conda activate` / `conda deactivate` do, as shell code: pure text generators.

The rules follow conda's own activator (github.com/conda/conda, conda/activate.py as of commit
0f64223, 2026-08: `_Activator._build_activate_stack`, `build_deactivate`, `_get_environment_env_vars`,
`_get_activate_scripts`, `_replace_prefix_in_path`, `PosixActivator`/`FishActivator`; and
conda/shell/etc/profile.d/conda.sh, conda/shell/etc/fish/conf.d/conda.fish for the prompt):

* `PATH` gets `<prefix>/bin` in front; activating B over A replaces A's entry in place (no
  `--stack`), stacking puts B in front of A. Deactivating removes or swaps the entry back.
* `CONDA_PREFIX`, `CONDA_SHLVL` (level + 1), `CONDA_DEFAULT_ENV` (the folder name when the env lives in
  an `envs` folder, else the full prefix), `CONDA_PROMPT_MODIFIER` (`(NAME) `, conda's default
  `env_prompt`), `CONDA_PREFIX_<n>` for the env below, `CONDA_STACKED_<n>` for a stacked one.
* The env's variables: `etc/conda/env_vars.d/*` (sorted; packages), then `conda-meta/state`'s
  `env_vars` (the env file's `variables:`) over them; `***unset***` values are not set; `PATH` is
  reserved and ignored. A variable the machine already had is saved in `__CONDA_SHLVL_<n>_<VAR>` and put
  back on deactivate.
* `etc/conda/activate.d/*` scripts of the shell's kind (`.sh` for bash/zsh/sh, `.fish` for fish) run
  sorted after the variables are set; `deactivate.d/*` run in reverse order. Scripts for other shells
  (`.ps1`, `.bat`, `.csh`, `.xsh`) are listed in `notes` and skipped, as conda does on Linux.

Where envkit deliberately differs (each keeps the environment exactly reversible):
* conda leaves env A's variables set while B is activated over A; envkit resets them to what they
  were before A and sets them again when B is deactivated back to A.
* conda leaves `__CONDA_SHLVL_<n>_<VAR>` behind after restoring from it and writes `VAR=''` for
  "unset"; envkit removes the saved copy and really unsets.
* deactivate.d scripts run first, while the environment they belong to is still fully active.
* `CONDA_SHLVL` goes back to unset (not `0`) at the bottom unless conda's shell hook is loaded
  (`CONDA_EXE` set: conda.sh exports `CONDA_SHLVL=0` itself).
* conda's own `CONDA_EXE`/`_CE_M`/`_CE_CONDA`/`CONDA_PYTHON_EXE` are not touched (no conda needed).
* The prompt shows the env's name, never a path: `(NAME) ` with NAME the folder name for an env outside an
  `envs` folder too (conda shows the whole path), control characters spelled out (`\x1b`), and in PS1
  escaped for the prompt expansion of the shell that evaluates the code (shell/quoting.py): conda
  splices the raw text into PS1, so a path like `/tmp/a$(cmd)` runs cmd at every prompt.
* Every value in the code goes through shell/quoting.py; a value no shell can hold (a NUL byte in
  conda-meta/state) is left out with a note, and the rest of the activation still happens.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from envkit.errors import EnvkitError, EnvNotFoundError, InputError, UsageError
from envkit.prefix.locations import conda_envs_dirs, conda_root, find_prefix
from envkit.prefix.records import read_state
from envkit.safeio import load_json
from envkit.shell.quoting import SHELLS, Unrepresentable, bash_quote, fish_quote, prompt_assignment, quote, var_name, visible

UNSET_MARK = "***unset***"  # conda/base/constants.py CONDA_ENV_VARS_UNSET_VAR
RESERVED = ("PATH",)  # conda/base/constants.py RESERVED_ENV_VARS
PROMPT_FORMAT = "({default_env}) "  # conda's default `env_prompt`
_SCRIPT_EXT = {"bash": ".sh", "zsh": ".sh", "sh": ".sh", "fish": ".fish"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class EnvInfo:
    """What activating one prefix involves, read from its files (see `read_env`)."""

    prefix: str
    env_vars: tuple[tuple[str, str], ...] = ()  # in conda's order; UNSET_MARK values kept
    activate_scripts: tuple[str, ...] = ()  # every file of etc/conda/activate.d, sorted
    deactivate_scripts: tuple[str, ...] = ()  # every file of etc/conda/deactivate.d, sorted in reverse
    notes: tuple[str, ...] = ()

    @property
    def bindir(self) -> str:
        return f"{self.prefix.rstrip('/')}/bin"

    def settable_vars(self) -> dict[str, str]:
        return {k: v for k, v in self.env_vars if v != UNSET_MARK}


@dataclass(frozen=True)
class Plan:
    """The changes to make, in the order they are made; rendered per shell by `render`."""

    deactivate_scripts: tuple[str, ...] = ()
    path: tuple[str, ...] | None = None
    unset: tuple[str, ...] = ()
    export: tuple[tuple[str, str], ...] = ()
    prompt: tuple[str, str] | None = None  # (old modifier to strip, new modifier to put in front)
    activate_scripts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def read_env(prefix: str | Path) -> EnvInfo:
    """The env's variables and scripts, read as conda's `_get_environment_env_vars` reads them."""
    root = Path(prefix)
    notes: list[str] = []
    merged: dict[str, str] = {}
    pkg_dir = root / "etc" / "conda" / "env_vars.d"
    if pkg_dir.is_dir():
        for path in sorted(pkg_dir.iterdir()):
            merged.update(_json_vars(path, notes))
    merged.update(_state_vars(root, notes))
    for name in RESERVED:
        if name in merged:
            if merged.pop(name) != UNSET_MARK:
                notes.append(f"{root}: the variable {name} is reserved and was ignored (as conda does)")
    for name in [n for n in merged if not _NAME_RE.match(n)]:
        merged.pop(name)
        notes.append(f"{root}: {visible(name)[:80]!r} is not a valid variable name; ignored")
    for name in [n for n, v in merged.items() if "\0" in v]:
        merged.pop(name)  # a shell variable is a C string (quoting.Unrepresentable): left out, never cut short
        notes.append(f"{root}: the value of {name} contains a NUL byte, which no shell variable can hold; "
                     f"{name} was not set (fix it: conda env config vars set -p {visible(str(root))} {name}=...)")
    return EnvInfo(str(root), tuple(merged.items()), _scripts(root / "etc/conda/activate.d", False),
                   _scripts(root / "etc/conda/deactivate.d", True), tuple(notes))


def _json_vars(path: Path, notes: list[str]) -> dict[str, str]:
    """One etc/conda/env_vars.d file (a package's variables: the whole JSON object)."""
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        data = load_json(path, "conda variables file", limit=1 << 20)  # bounded: not a device, FIFO or bomb
    except InputError as exc:
        notes.append(f"{exc.message}; its variables were not set")
        return {}
    return _table(data)


def _state_vars(root: Path, notes: list[str]) -> dict[str, str]:
    """conda-meta/state's `env_vars` (the env file's `variables:`), read by prefix/records.py."""
    try:
        data = read_state(root)
    except InputError as exc:
        notes.append(f"{exc.message}; its variables were not set")
        return {}
    return _table(data.get("env_vars") if isinstance(data, dict) else None)


def _table(table: object) -> dict[str, str]:
    if not isinstance(table, dict):
        return {}
    return {str(k): str(v) for k, v in table.items()}


def _scripts(folder: Path, reverse: bool) -> tuple[str, ...]:
    try:
        found = [str(p) for p in folder.iterdir() if p.is_file()]
    except OSError:
        return ()
    return tuple(sorted(found, reverse=reverse))


# -- planning (pure: an environment mapping in, a Plan out) ---------------------------------------------
Reader = Callable[[str], EnvInfo]


def default_env(prefix: str, root_prefix: str | None = None) -> str:
    """conda `_default_env`: 'base' for the root, the folder name inside an `envs` folder, else the path."""
    clean = prefix.rstrip("/")
    if root_prefix and clean == root_prefix.rstrip("/"):
        return "base"
    parent, name = os.path.split(clean)
    return name if os.path.basename(parent) == "envs" else clean


def prompt_modifier(name: str) -> str:
    """`(NAME) ` for the prompt: the env's name (a path's last part: never a whole path), made visible."""
    if "/" in name:
        name = os.path.basename(name.rstrip("/")) or "/"
    return PROMPT_FORMAT.format(default_env=visible(name))


def _shlvl(environ: Mapping[str, str]) -> int:
    try:
        return max(0, int((environ.get("CONDA_SHLVL") or "0").strip()))
    except ValueError:
        return 0


def _path_list(environ: Mapping[str, str]) -> list[str]:
    return (environ.get("PATH") or "/usr/bin").split(":")


def _replace_in_path(entries: list[str], old: str | None, new: str | None) -> tuple[str, ...]:
    """conda `_replace_prefix_in_path`: swap old's bin dir for new's in place; at the front if absent."""
    out = list(entries)
    index = 0
    if old is not None:
        old_bin = f"{old.rstrip('/')}/bin"
        if old_bin in out:
            index = out.index(old_bin)
            del out[index]
    if new is not None:
        out.insert(index, f"{new.rstrip('/')}/bin")
    return tuple(out)


def _select_scripts(scripts: tuple[str, ...], shell: str, notes: list[str]) -> tuple[str, ...]:
    ext = _SCRIPT_EXT[shell]
    chosen = tuple(s for s in scripts if s.endswith(ext))
    skipped = [os.path.basename(s) for s in scripts if not s.endswith(ext)]
    if skipped:
        notes.append(f"skipped {', '.join(skipped)} in {os.path.dirname(scripts[0])}: "
                     f"only {ext} scripts run in {shell} (conda does the same)")
    return chosen


def plan_activate(target: EnvInfo, environ: Mapping[str, str], read: Reader, *, shell: str = "bash",
                  stack: bool = False, root_prefix: str | None = None) -> Plan:
    """`conda activate TARGET` given the current environment `environ`."""
    notes = list(target.notes)
    prefix = target.prefix.rstrip("/")
    old_shlvl = _shlvl(environ)
    old_prefix = (environ.get("CONDA_PREFIX") or "").rstrip("/") or None
    if old_prefix is None:
        old_shlvl = 0
    if old_prefix == prefix and old_shlvl > 0:
        return plan_reactivate(target, environ, shell=shell, root_prefix=root_prefix)
    new_shlvl = old_shlvl + 1
    name = default_env(prefix, root_prefix)
    env_vars = target.settable_vars()
    export: dict[str, str] = {}
    unset: list[str] = []
    deactivate: tuple[str, ...] = ()
    entries = _path_list(environ)
    if old_shlvl == 0:
        path = (target.bindir, *entries)
    elif stack:
        path = (target.bindir, *entries)
        export[f"CONDA_PREFIX_{old_shlvl}"] = old_prefix or ""
        export[f"CONDA_STACKED_{new_shlvl}"] = "true"
    else:
        path = _replace_in_path(entries, old_prefix, prefix)
        export[f"CONDA_PREFIX_{old_shlvl}"] = old_prefix or ""
        below = read(old_prefix or "")
        notes += below.notes
        deactivate = _select_scripts(below.deactivate_scripts, shell, notes)
        # B replaces A: A's variables go back to what they were before A (conda leaves them set)
        for var, _value in below.env_vars:
            if var in env_vars:
                continue
            saved = environ.get(f"__CONDA_SHLVL_{old_shlvl - 1}_{var}")
            if saved is not None:
                export[var] = saved
            elif var in environ:
                unset.append(var)
    export.update(CONDA_PREFIX=prefix, CONDA_SHLVL=str(new_shlvl), CONDA_DEFAULT_ENV=name,
                  CONDA_PROMPT_MODIFIER=prompt_modifier(name))
    for var, value in env_vars.items():
        if var in environ:  # conda: keep the machine's value to put back on deactivate
            export[f"__CONDA_SHLVL_{old_shlvl}_{var}"] = environ[var]
        export[var] = value
    return Plan(deactivate, path, tuple(unset), tuple(export.items()),
                (environ.get("CONDA_PROMPT_MODIFIER", ""), export["CONDA_PROMPT_MODIFIER"]),
                _select_scripts(target.activate_scripts, shell, notes), tuple(notes))


def plan_reactivate(target: EnvInfo, environ: Mapping[str, str], *, shell: str = "bash",
                    root_prefix: str | None = None) -> Plan:
    """conda `build_reactivate`: the same env again: scripts re-run, PATH entry refreshed in place."""
    notes = list(target.notes)
    name = environ.get("CONDA_DEFAULT_ENV") or default_env(target.prefix, root_prefix)
    modifier = prompt_modifier(name)
    path = _replace_in_path(_path_list(environ), target.prefix, target.prefix)
    return Plan(_select_scripts(target.deactivate_scripts, shell, notes), path, (),
                (("CONDA_SHLVL", str(_shlvl(environ))), ("CONDA_PROMPT_MODIFIER", modifier)),
                (environ.get("CONDA_PROMPT_MODIFIER", ""), modifier),
                _select_scripts(target.activate_scripts, shell, notes), tuple(notes))


def plan_deactivate(environ: Mapping[str, str], read: Reader, *, shell: str = "bash",
                    root_prefix: str | None = None) -> Plan:
    """`conda deactivate` given the current environment: back to the env below, or to none."""
    old_prefix = (environ.get("CONDA_PREFIX") or "").rstrip("/")
    old_shlvl = _shlvl(environ)
    if not old_prefix or old_shlvl < 1:
        return Plan(notes=("no environment is active; nothing to deactivate",))
    current = read(old_prefix)
    notes = list(current.notes)
    deactivate = _select_scripts(current.deactivate_scripts, shell, notes)
    new_shlvl = old_shlvl - 1
    entries = _path_list(environ)
    export: dict[str, str] = {}
    unset: list[str] = []
    activate: tuple[str, ...] = ()
    new_vars: dict[str, str] = {}
    if old_shlvl == 1:
        path = _replace_in_path(entries, old_prefix, None)
        unset += ["CONDA_PREFIX", "CONDA_DEFAULT_ENV", "CONDA_PROMPT_MODIFIER"]
        if environ.get("CONDA_EXE"):
            export["CONDA_SHLVL"] = "0"
        else:
            unset.append("CONDA_SHLVL")
        modifier = ""
    else:
        new_prefix = (environ.get(f"CONDA_PREFIX_{new_shlvl}") or "").rstrip("/")
        if not new_prefix:
            raise EnvkitError(f"CONDA_SHLVL is {old_shlvl} but CONDA_PREFIX_{new_shlvl} is not set",
                              "the activation variables were changed by hand; open a new shell")
        below = read(new_prefix)
        notes += below.notes
        unset.append(f"CONDA_PREFIX_{new_shlvl}")
        if f"CONDA_STACKED_{old_shlvl}" in environ:
            path = _replace_in_path(entries, old_prefix, None)
            unset.append(f"CONDA_STACKED_{old_shlvl}")
        else:
            path = _replace_in_path(entries, old_prefix, new_prefix)
        name = default_env(new_prefix, root_prefix)
        modifier = prompt_modifier(name)
        export.update(CONDA_PREFIX=new_prefix, CONDA_SHLVL=str(new_shlvl), CONDA_DEFAULT_ENV=name,
                      CONDA_PROMPT_MODIFIER=modifier)
        new_vars = below.settable_vars()
        activate = _select_scripts(below.activate_scripts, shell, notes)
    for var, _value in current.env_vars:
        backup = f"__CONDA_SHLVL_{new_shlvl}_{var}"
        if backup in environ:
            export[var] = environ[backup]
            unset.append(backup)
        elif var not in new_vars:
            unset.append(var)
    export.update(new_vars)
    return Plan(deactivate, path, tuple(unset), tuple(export.items()),
                (environ.get("CONDA_PROMPT_MODIFIER", ""), modifier), activate, tuple(notes))


# -- rendering: every value through shell/quoting.py --------------------------------------------------
def render(plan: Plan, shell: str) -> str:
    """Shell code that makes the plan's changes in the shell that evaluates it."""
    if shell not in SHELLS:
        raise UsageError(f"unsupported shell {shell!r}", f"use --shell with one of {', '.join(SHELLS)}")
    lines = _render_fish(plan) if shell == "fish" else _render_posix(plan, shell)
    return "\n".join(lines) + "\n"


def _render_posix(plan: Plan, shell: str) -> list[str]:
    def q(value: str, what: str = "a value") -> str:
        return quote(value, shell, what)

    lines = [f". {q(script, 'a deactivate.d script path')}" for script in plan.deactivate_scripts]
    if plan.path is not None:
        lines.append(f"export PATH={q(':'.join(plan.path), 'PATH')}")
    lines += [f"unset {var_name(name)}" for name in plan.unset]
    if plan.prompt is not None:
        old, new = plan.prompt
        old = "" if re.search("[\ud800-\udfff]", old) else old  # not envkit's (visible) text: nothing to strip
        # conda.sh: PS1 is only touched when it exists; the old marker is stripped, the new one put in front.
        # Both are literals escaped for the prompt of the shell running this (quoting.prompt_assignment);
        # the quoted "$_envkit_o" is a literal pattern (XCU 2.6.2), and an expansion's result is not expanded again
        lines += ['if [ -n "${PS1+x}" ]; then',
                  *prompt_assignment(("_envkit_p", "_envkit_o"), (new, old), "  "),
                  '  PS1=$_envkit_p${PS1#"$_envkit_o"}',
                  "  unset _envkit_p _envkit_o",
                  "fi"]
    lines += [f"export {var_name(name)}={q(value, name)}" for name, value in plan.export]
    if plan.path is not None:
        lines.append("hash -r 2>/dev/null || true")  # as conda.sh does: forget cached command locations
    lines += [f". {q(script, 'an activate.d script path')}" for script in plan.activate_scripts]
    return lines


def _render_fish(plan: Plan) -> list[str]:
    q = fish_quote
    lines = [f"source {q(script, 'a deactivate.d script path')}" for script in plan.deactivate_scripts]
    if plan.path is not None:
        lines.append("set -gx PATH " + " ".join(q(p, "PATH") for p in plan.path))
    lines += [f"set -e {var_name(name)}" for name in plan.unset]
    lines += [f"set -gx {var_name(name)} {q(value, name)}" for name, value in plan.export]
    if plan.prompt is not None and plan.prompt[1]:
        # conda.fish wraps fish_prompt to print $CONDA_PROMPT_MODIFIER; do the same once, unless conda's is
        # loaded. printf '%s' prints the variable's text as it is: fish's prompt expands nothing in it
        lines.append("if functions -q fish_prompt; and not functions -q __envkit_fish_prompt_orig; "
                     "and not functions -q __conda_add_prompt; functions -c fish_prompt __envkit_fish_prompt_orig; "
                     "function fish_prompt; printf '%s' \"$CONDA_PROMPT_MODIFIER\"; __envkit_fish_prompt_orig; end; "
                     "end")
    lines += [f"source {q(script, 'an activate.d script path')}" for script in plan.activate_scripts]
    return lines


def shell_of(environ: Mapping[str, str]) -> str:
    """The user's shell kind from $SHELL (bash when unknown: its code also suits sh and zsh)."""
    name = os.path.basename(environ.get("SHELL") or "")
    return name if name in SHELLS else ("sh" if name in ("dash", "ash", "ksh", "mksh") else "bash")


def activate_code(prefix: str | Path, environ: Mapping[str, str], *, shell: str, stack: bool = False,
                  root_prefix: str | None = None) -> tuple[str, tuple[str, ...]]:
    """(shell code, notes) for `envkit activate`: reads the env's files, then plans and renders."""
    plan = plan_activate(read_env(prefix), environ, read_env, shell=shell, stack=stack, root_prefix=root_prefix)
    plan = representable(plan, shell)
    return render(plan, shell), plan.notes


def deactivate_code(environ: Mapping[str, str], *, shell: str,
                    root_prefix: str | None = None) -> tuple[str, tuple[str, ...]]:
    plan = representable(plan_deactivate(environ, read_env, shell=shell, root_prefix=root_prefix), shell)
    return render(plan, shell), plan.notes


def representable(plan: Plan, shell: str) -> Plan:
    """The plan less the variables `shell` cannot hold (an undecodable byte in sh code, a NUL), each named
    in a note: one odd value never breaks the activation. PATH and the prefix itself stay: without them
    there is no activation, and render's error says why."""
    keep: list[tuple[str, str]] = []
    notes = list(plan.notes)
    for name, value in plan.export:
        try:
            quote(value, shell, f"the value of {name}")
        except Unrepresentable as exc:
            if name in ("CONDA_PREFIX", "CONDA_DEFAULT_ENV"):
                raise
            notes.append(f"{exc.message}; {name} was not set ({exc.hint})")
            continue
        keep.append((name, value))
    return replace(plan, export=tuple(keep), notes=tuple(notes))


def next_steps(prefix: Path) -> list[tuple[str, str]]:
    """(command, what it does) for using the env, each one runnable on this machine as printed."""
    try:
        ref = prefix.name if find_prefix(prefix.name, None) == prefix else str(prefix)
    except (EnvNotFoundError, UsageError):
        ref = str(prefix)
    fish = shell_of(os.environ) == "fish"
    quoted = (fish_quote if fish else bash_quote)(ref, "the env's path")  # copied and run as printed
    activate = f"envkit activate {quoted} | source" if fish else f'eval "$(envkit activate {quoted})"'
    undo = "envkit deactivate | source" if fish else 'eval "$(envkit deactivate)"'
    steps = [(f"envkit shell {quoted}", "a shell inside the env; exit returns here"),
             (activate, f"activate it in this shell; {undo} undoes it")]
    if conda_root() is not None:
        target = prefix.name if prefix.parent in conda_envs_dirs() else str(prefix)
        steps.append((f"conda activate {target}", "conda is installed here too"))
    steps.append((f"envkit run {quoted} -- python train.py", "one command inside the env"))
    return steps
