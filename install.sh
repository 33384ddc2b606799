#!/usr/bin/env bash
# Install envkit for this user from this checkout, without root, on the Python that is there (issue 15).
#
#   inside an active virtualenv or conda env (not base)  -> pip install into that env
#   else pipx, else uv, when installed                   -> pipx install / uv tool install
#   else                                                 -> a private venv in ~/.local/share/envkit/venv
#                                                           and a launcher ~/.local/bin/envkit
#
# It never overrides PEP 668 (no pip flag that breaks system packages): a system Python marked
# EXTERNALLY-MANAGED (Debian 12, Ubuntu 24.04) is only used to create the private venv. A Python
# older than 3.10 is refused before pip runs, with the ways out.
# The launcher is a short sh script written by Python with shlex.quote: `exec '<venv>/bin/python' -I -c
# '<run envkit.cli:main>' "$@"` (-I: neither the current folder nor PYTHON* variables reach envkit's
# imports). pip's own script is not linked to: for a venv path with a space pip (distlib) writes a
# /bin/sh trampoline with the python's path in double quotes, which runs any `$(...)` in $HOME on every
# call and breaks on a `"`. A path printed for you to paste is single-quoted.
# An `envkit` in the bin dir that install.sh did not write is never replaced: it stops with the fix.
# Options: --dry-run (say what would happen), --method=auto|env|pipx|uv|venv, --force (replace an
# envkit in the bin dir that install.sh did not write).
# Environment: ENVKIT_PYTHON (the interpreter to use), ENVKIT_VENV, ENVKIT_BIN_DIR; pip's own PIP_*
# variables pass through (offline: PIP_NO_INDEX=1 PIP_FIND_LINKS=/path/to/wheels). uv reads no PIP_*
# variable, so PIP_NO_INDEX, PIP_FIND_LINKS, PIP_INDEX_URL and PIP_EXTRA_INDEX_URL are also handed to
# pipx (--pip-args, for its pip or uv backend) and to uv tool install as the same-named options.
# An envkit command after the options runs once the install is done, through the installed executable's
# absolute path, so it works in this very shell even when the bin dir is not on PATH yet (a fresh account:
# Debian's and Ubuntu's ~/.profile add ~/.local/bin only if it existed at login):
#   ./install.sh create dl_train --cuda auto
# When the bin dir is not on PATH and your login profile would not put it there (root's Debian ~/.profile, from
# base-files, never does), one marked line is appended to it so that the next login finds envkit, as uv's and
# rustup's installers do: the first of ~/.bash_profile, ~/.bash_login, ~/.profile that exists (the one a bash
# login shell reads; else ~/.profile). The line holds no path from your environment ($HOME stays a variable);
# delete it to undo. --no-modify-path leaves every profile alone.
# Exit codes: that command's own exit code when one is given; else 0 installed and on PATH, 1 failed,
# 2 bad option, 3 installed but not on PATH (the line to add is printed, and whether a new login is enough).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
method=auto
dry_run=0
force=0
modify_path=1
after=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --force) force=1 ;;
    --no-modify-path) modify_path=0 ;;
    --method=*) method=${1#--method=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    --) shift; after=("$@"); break ;;
    -*) echo "install.sh: unknown option $1 (use --dry-run, --force, --no-modify-path, --method=auto|env|pipx|uv|venv, then an envkit command)" >&2; exit 2 ;;
    *) after=("$@"); break ;;  # the envkit command to run once installed: create dl_train --cuda auto
  esac
  shift
done
case "$method" in auto|env|pipx|uv|venv) ;; *) echo "install.sh: --method must be auto, env, pipx, uv or venv" >&2; exit 2 ;; esac

say() { printf 'envkit install: %s\n' "$*"; }
die() { printf 'envkit install: error: %s\n' "$*" >&2; exit 1; }
# one single-quoted word for a line the user pastes into a shell (POSIX XCU 2.2.2: nothing inside single
# quotes is special; a quote is written '\''): a path with $(...) or a quote in it is pasted as it is
sq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }
LAUNCHER_MARK="# envkit launcher written by install.sh"
# The launcher, written by the install's python (shlex.quote: no shell reads a path as code); atomic
write_launcher() { # python, launcher path
  "$1" - "$1" "$2" "$LAUNCHER_MARK" <<'PY'
import os, shlex, sys
python, dest, mark = sys.argv[1:4]
main = 'import sys; sys.argv[0] = "envkit"; from envkit.cli import main; sys.exit(main())'  # [project.scripts]
text = ("#!/bin/sh\n%s; ./install.sh rewrites it\nexec %s -I -c %s \"$@\"\n"
        % (mark, shlex.quote(python), shlex.quote(main)))
tmp = "%s.install-%d" % (dest, os.getpid())
with open(tmp, "w", encoding="utf-8") as out:
    out.write(text)
os.chmod(tmp, 0o755)
os.replace(tmp, dest)
PY
}
# an envkit in the bin dir that install.sh made: its launcher, or the link older install.sh versions made
ours() { # path, venv
  if [ -L "$1" ]; then [ "$(readlink "$1")" = "$2/bin/envkit" ]; return; fi
  [ -f "$1" ] && [ "$(sed -n 2p "$1" 2>/dev/null | cut -c1-${#LAUNCHER_MARK})" = "$LAUNCHER_MARK" ]
}

# "X.Y.Z" of an interpreter, or nothing when it does not run
py_version() { "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null || true; }
new_enough() { # X.Y.Z >= 3.10
  local major minor
  IFS=. read -r major minor _ <<<"$1"
  [ -n "$major" ] && [ -n "$minor" ] && { [ "$major" -gt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -ge 10 ]; }; }
}

too_old() {
  cat >&2 <<EOF
envkit install: error: envkit needs Python >= 3.10; $1.
Ways out (none needs root); then run ./install.sh again:
  uv:     curl -LsSf https://astral.sh/uv/install.sh | sh && uv python install 3.12 && ENVKIT_PYTHON="\$(uv python find 3.12)" ./install.sh
  conda:  conda create -n envkit-py python=3.12 && conda activate envkit-py && ./install.sh   (micromamba alike)
  pyenv:  pyenv install 3.12 && ENVKIT_PYTHON="\$(pyenv prefix 3.12)/bin/python" ./install.sh
EOF
  exit 1
}

# 1. where to install: the active env, or a tool/private venv
target_env=""
if [ "$method" = auto ] || [ "$method" = env ]; then
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    target_env=$VIRTUAL_ENV
  elif [ -n "${CONDA_PREFIX:-}" ] && [ "${CONDA_DEFAULT_ENV:-}" != base ] && [ -x "$CONDA_PREFIX/bin/python" ]; then
    target_env=$CONDA_PREFIX
  elif [ "$method" = env ]; then
    die "--method=env needs an active virtualenv or conda env (\$VIRTUAL_ENV / \$CONDA_PREFIX)"
  fi
fi

# 2. which Python
if [ -n "$target_env" ]; then
  py="$target_env/bin/python"
  version=$(py_version "$py")
  new_enough "$version" || too_old "the active env's python ($py) is ${version:-not runnable}"
elif [ -n "${ENVKIT_PYTHON:-}" ]; then
  py=$ENVKIT_PYTHON
  version=$(py_version "$py")
  new_enough "$version" || too_old "ENVKIT_PYTHON=$py is ${version:-not runnable}"
else
  py="" version="" seen=""
  for candidate in python3 python3.14 python3.13 python3.12 python3.11 python3.10; do
    path=$(command -v "$candidate" 2>/dev/null) || continue
    v=$(py_version "$path")
    if new_enough "$v"; then
      py=$path version=$v
      break
    fi
    seen="$seen${seen:+, }$candidate ${v:-?} ($path)"
  done
  [ -n "$py" ] || too_old "found ${seen:-no python3 on PATH}"
  [ -z "$seen" ] || say "note: skipped $seen: too old"
fi

if [ -z "$target_env" ] && [ "$method" = auto ]; then
  if command -v pipx >/dev/null 2>&1; then method=pipx
  elif command -v uv >/dev/null 2>&1; then method=uv
  else method=venv
  fi
elif [ -n "$target_env" ]; then
  method=env
fi
if { [ "$method" = pipx ] || [ "$method" = uv ]; } && ! command -v "$method" >/dev/null 2>&1; then
  die "--method=$method: $method is not on PATH (PATH=$PATH). Install $method first, or run ./install.sh without --method: it picks pipx or uv when one is on PATH, else a private venv"
fi

managed=""
if "$py" -c 'import sys, sysconfig, os; sys.exit(0 if os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)' 2>/dev/null; then
  managed=" (externally managed, PEP 668: left untouched)"
fi
if [ -z "${HOME:-}" ] && [ "$method" != env ]; then
  die "HOME is not set, and the $method install goes under it (~/.local). Set it and run again: HOME=/home/$(id -un 2>/dev/null || echo you) ./install.sh (or install into an active env: $py -m venv DIR && . DIR/bin/activate && ./install.sh)"
fi
bindir=${ENVKIT_BIN_DIR:-${HOME:-}/.local/bin}
venv=${ENVKIT_VENV:-${XDG_DATA_HOME:-${HOME:-}/.local/share}/envkit/venv}
case "$method" in
  env) where="into the active env $target_env" ;;
  pipx) where="with pipx (its venv, link in \$PIPX_BIN_DIR or ~/.local/bin)" ;;
  uv) where="with uv tool install" ;;
  venv) where="into a private venv $venv, with a launcher $bindir/envkit" ;;
esac
say "python $py ($version)$managed"
say "installing envkit from $here $where"
if [ "$method" = venv ] && { [ -e "$bindir/envkit" ] || [ -L "$bindir/envkit" ]; } && ! ours "$bindir/envkit" "$venv"; then
  if [ "$force" = 1 ]; then
    say "note: --force: replacing $bindir/envkit, which install.sh did not write"
  else
    die "$bindir/envkit exists and was not written by install.sh (it is $(ls -ld "$bindir/envkit" | cut -c1-200)); nothing was changed. Keep it and install elsewhere: ENVKIT_BIN_DIR=$(sq "$HOME/bin") ./install.sh; or remove it yourself (rm $(sq "$bindir/envkit")), or replace it: ./install.sh --force"
  fi
fi
[ ${#after[@]} -eq 0 ] || [ "$dry_run" = 0 ] || say "then it would run: envkit ${after[*]}"
[ "$dry_run" = 0 ] || exit 0

# 3. install (${a[@]+"${a[@]}"}: an empty array under set -u, bash < 4.4 too)
pip_flags=(--disable-pip-version-check --no-input)
# pip's index settings as options that pip, `uv pip install` (pipx's uv backend) and `uv tool install`
# all accept: uv ignores PIP_* (https://docs.astral.sh/uv/reference/environment/), pip reads them anyway
index_args=()
case "${PIP_NO_INDEX:-}" in 1|[Tt]rue|[Yy]es|[Oo]n) index_args+=(--no-index) ;; esac
[ -z "${PIP_INDEX_URL:-}" ] || index_args+=(--index-url "$PIP_INDEX_URL")
for url in ${PIP_EXTRA_INDEX_URL:-}; do index_args+=(--extra-index-url "$url"); done
for link in ${PIP_FIND_LINKS:-}; do index_args+=(--find-links "$link"); done
case "$method" in
  env)
    "$py" -m pip install "${pip_flags[@]}" "$here" || die "pip install into $target_env failed (see above)"
    envkit_exe="$target_env/bin/envkit"
    ;;
  pipx)
    pipx_args=()
    # pipx splits --pip-args with shlex: %q quoting keeps a path with spaces in one piece
    [ "${#index_args[@]}" = 0 ] || pipx_args=(--pip-args "$(printf '%q ' "${index_args[@]}")")
    pipx install --force --python "$py" ${pipx_args[@]+"${pipx_args[@]}"} "$here" || die "pipx install failed (see above)"
    # pipx's own answer: its default bin dir moved between releases and platforms
    bindir=$(pipx environment --value PIPX_BIN_DIR 2>/dev/null || echo "${PIPX_BIN_DIR:-$HOME/.local/bin}")
    envkit_exe="$bindir/envkit"
    ;;
  uv)
    uv tool install --force --python "$py" ${index_args[@]+"${index_args[@]}"} "$here" || die "uv tool install failed (see above)"
    bindir=$(uv tool dir --bin 2>/dev/null || echo "$HOME/.local/bin")
    envkit_exe="$bindir/envkit"
    ;;
  venv)
    if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
      xy=${version%.*}
      cat >&2 <<EOF
envkit install: error: $py cannot create a virtual environment: its venv/ensurepip modules are missing
(Debian and Ubuntu ship them separately, in python3-venv).
Ways out: ask an admin for  sudo apt install python3-venv  (or python$xy-venv);
or, without root, install pipx or uv (curl -LsSf https://astral.sh/uv/install.sh | sh) and run ./install.sh again;
or use a conda Python: conda create -n envkit-py python=3.12 && conda activate envkit-py && ./install.sh
EOF
      exit 1
    fi
    if [ ! -x "$venv/bin/python" ]; then
      mkdir -p "$(dirname "$venv")"
      "$py" -m venv "$venv" || die "$py -m venv $venv failed (see above)"
    fi
    "$venv/bin/python" -m pip install "${pip_flags[@]}" --upgrade "$here" \
      || die "pip install into $venv failed (see above); nothing outside $venv was changed"
    mkdir -p "$bindir"
    write_launcher "$venv/bin/python" "$bindir/envkit" || die "cannot write $bindir/envkit (see above)"
    envkit_exe="$bindir/envkit"
    ;;
esac

[ -x "$envkit_exe" ] || die "the install finished but $envkit_exe is missing"
# it must run: a launcher a path broke would otherwise be reported as installed
installed=$("$envkit_exe" --version) || die "$envkit_exe was installed but does not run (see above); rerun ./install.sh --method=venv with ENVKIT_VENV set to a plain path (letters, digits, . _ - /)"
say "installed: $installed at $envkit_exe"
exe_dir=$(dirname "$envkit_exe")
case ":$PATH:" in
  *":$exe_dir:"*)
    found=$(command -v envkit || true)
    if [ -n "$found" ] && [ "$found" != "$envkit_exe" ]; then
      say "warning: another envkit comes first on PATH: $found"
    fi
    [ ${#after[@]} -gt 0 ] || say "next: envkit create dl_train --cuda auto"
    ;;
  *)
    # Debian's and Ubuntu's stock ~/.profile (from /etc/skel): if [ -d "$HOME/.local/bin" ] ; then
    # PATH="$HOME/.local/bin:$PATH"; read by login shells, so now that the folder exists the next login has it
    next_login=0
    if [ "$exe_dir" = "${HOME:-}/.local/bin" ] && [ -f "$HOME/.profile" ] && grep -q '\.local/bin' "$HOME/.profile" 2>/dev/null; then
      next_login=1
    fi
    profile_line=""
    if [ $next_login = 0 ] && [ $modify_path = 1 ] && [ -n "${HOME:-}" ] && [ -d "$HOME" ]; then
      profile="$HOME/.profile"
      for f in "$HOME/.bash_profile" "$HOME/.bash_login"; do
        if [ -f "$f" ]; then profile=$f; break; fi
      done
      if [ "$exe_dir" = "$HOME/.local/bin" ]; then
        dir_word='"$HOME/.local/bin"'  # written as a variable: nothing from $HOME's value is ever read as code
      else
        dir_word=$(sq "$exe_dir")
      fi
      mark="# envkit install.sh: envkit's folder on PATH for login shells (delete this line to undo)"
      line="case \":\$PATH:\" in *:$dir_word:*) ;; *) PATH=$dir_word:\"\$PATH\"; export PATH ;; esac $mark"
      if grep -qF "$mark" "$profile" 2>/dev/null; then
        next_login=1  # written by an earlier install
      elif printf '\n%s\n' "$line" >>"$profile" 2>/dev/null; then
        next_login=1
        profile_line="added one line to ${profile/#$HOME/\~} so that your next login has it on PATH (--no-modify-path skips this; delete the line to undo)"
      fi
    fi
    if [ -n "$profile_line" ]; then
      cat >&2 <<EOF
envkit install: envkit is installed at $envkit_exe. $exe_dir is not on this shell's PATH: $profile_line. For this shell:
  export PATH=$(sq "$exe_dir"):"\$PATH"
EOF
    elif [ $next_login = 1 ]; then
      cat >&2 <<EOF
envkit install: envkit is installed at $envkit_exe. $exe_dir is not on this shell's PATH yet: your ~/.profile adds it at your next login (the folder did not exist when you logged in). For this shell:
  export PATH=$(sq "$exe_dir"):"\$PATH"
EOF
    else
      cat >&2 <<EOF
envkit install: envkit is installed at $envkit_exe, but $exe_dir is not on your PATH. Add it, now and in ~/.bashrc (or ~/.zshrc):
  export PATH=$(sq "$exe_dir"):"\$PATH"
EOF
    fi
    [ ${#after[@]} -gt 0 ] || exit 3
    ;;
esac
if [ ${#after[@]} -gt 0 ]; then
  say "running: envkit ${after[*]}"
  exec "$envkit_exe" "${after[@]}"
fi
