#!/usr/bin/env bash
# Install envkit for this user from this checkout, without root, on the Python that is there (issue 15).
#
#   inside an active virtualenv or conda env (not base)  -> pip install into that env
#   else pipx, else uv, when installed                   -> pipx install / uv tool install
#   else                                                 -> a private venv in ~/.local/share/envkit/venv
#                                                           and a link ~/.local/bin/envkit
#
# It never overrides PEP 668 (no pip flag that breaks system packages): a system Python marked
# EXTERNALLY-MANAGED (Debian 12, Ubuntu 24.04) is only used to create the private venv. A Python
# older than 3.10 is refused before pip runs, with the ways out.
# Options: --dry-run (say what would happen), --method=auto|env|pipx|uv|venv.
# Environment: ENVKIT_PYTHON (the interpreter to use), ENVKIT_VENV, ENVKIT_BIN_DIR; pip's own PIP_*
# variables pass through (offline: PIP_NO_INDEX=1 PIP_FIND_LINKS=/path/to/wheels).
# Exit codes: 0 installed and on PATH, 1 failed, 2 bad option, 3 installed but not on PATH (the line
# to add is printed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
method=auto
dry_run=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) dry_run=1 ;;
    --method=*) method=${arg#--method=} ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (use --dry-run, --method=auto|env|pipx|uv|venv)" >&2; exit 2 ;;
  esac
done
case "$method" in auto|env|pipx|uv|venv) ;; *) echo "install.sh: --method must be auto, env, pipx, uv or venv" >&2; exit 2 ;; esac

say() { printf 'envkit install: %s\n' "$*"; }
die() { printf 'envkit install: error: %s\n' "$*" >&2; exit 1; }

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

managed=""
if "$py" -c 'import sys, sysconfig, os; sys.exit(0 if os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)' 2>/dev/null; then
  managed=" (externally managed, PEP 668: left untouched)"
fi
bindir=${ENVKIT_BIN_DIR:-$HOME/.local/bin}
venv=${ENVKIT_VENV:-${XDG_DATA_HOME:-$HOME/.local/share}/envkit/venv}
case "$method" in
  env) where="into the active env $target_env" ;;
  pipx) where="with pipx (its venv, link in \$PIPX_BIN_DIR or ~/.local/bin)" ;;
  uv) where="with uv tool install" ;;
  venv) where="into a private venv $venv, linked from $bindir/envkit" ;;
esac
say "python $py ($version)$managed"
say "installing envkit from $here $where"
[ "$dry_run" = 0 ] || exit 0

# 3. install
pip_flags=(--disable-pip-version-check --no-input)
case "$method" in
  env)
    "$py" -m pip install "${pip_flags[@]}" "$here" || die "pip install into $target_env failed (see above)"
    envkit_exe="$target_env/bin/envkit"
    ;;
  pipx)
    pipx install --force --python "$py" "$here" || die "pipx install failed (see above)"
    bindir=${PIPX_BIN_DIR:-$HOME/.local/bin}
    envkit_exe="$bindir/envkit"
    ;;
  uv)
    uv tool install --force --python "$py" "$here" || die "uv tool install failed (see above)"
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
    if [ -e "$bindir/envkit" ] && [ ! -L "$bindir/envkit" ]; then
      die "$bindir/envkit exists and was not made by install.sh; move it away or set ENVKIT_BIN_DIR"
    fi
    ln -sfn "$venv/bin/envkit" "$bindir/envkit"
    envkit_exe="$bindir/envkit"
    ;;
esac

[ -x "$envkit_exe" ] || die "the install finished but $envkit_exe is missing"
say "installed: $("$envkit_exe" --version)"
exe_dir=$(dirname "$envkit_exe")
case ":$PATH:" in
  *":$exe_dir:"*)
    found=$(command -v envkit || true)
    if [ -n "$found" ] && [ "$found" != "$envkit_exe" ]; then
      say "warning: another envkit comes first on PATH: $found"
    fi
    say "next: envkit create dl_train --cuda auto"
    ;;
  *)
    cat >&2 <<EOF
envkit install: envkit is installed at $envkit_exe, but $exe_dir is not on your PATH. Add it, now and in ~/.bashrc (or ~/.zshrc):
  export PATH="$exe_dir:\$PATH"
EOF
    exit 3
    ;;
esac
