"""External engines (--engine conda|mamba|micromamba): the same flow, solved and installed by the
user's own conda tool through the one subprocess wrapper.

Which executable: conda -> $CONDA_EXE (set by `conda activate`/`conda init`), then PATH; micromamba ->
$MAMBA_EXE when it names micromamba (its shell hook sets it), then PATH; mamba -> PATH, then a
$MAMBA_EXE that names mamba. Its version (`<exe> --version`: "conda 26.7.1", micromamba "2.0.5")
goes into create.json; the engine writes conda-meta/history itself, with its real version.

argv (conda 26.7 `conda env create --help`, `conda create --help`; micromamba 2.x `micromamba create
--help`: -f/--file, -p/--prefix, -c/--channel, --override-channels, --dry-run, --json, -y/--yes):
- create:  conda|mamba `env create -f FILE -p PREFIX`; micromamba `create -y -f FILE -p PREFIX`;
- dry run: `<exe> create --dry-run --json -y -p PREFIX --override-channels -c CH ... SPEC ...`, whose
  JSON plan (`actions.LINK`/`actions.FETCH`, the same shape in conda and micromamba) becomes envkit's
  plan table and goes through the plan guard. A GPU selection runs this plan first on a real create
  too, so a CPU torch is refused before anything is downloaded.

Channels: --channel replaces the file's; a --mirror's URLs are in the file (no credentials). When
conda's own config maps channel names to a server (channel_alias / custom_channels, where conda keeps
tokens), the names are passed instead so conda applies its config and its credentials; a mirror URL
given with credentials becomes CONDA_CHANNEL_ALIAS in the engine's environment only. envkit never
writes a credential to disk. CONDA_OVERRIDE_CUDA carries the selection's CUDA level.
After the run, conda-meta is read for the real package list.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from envkit import proc
from envkit.engines.base import Built, CreateOptions, PlannedPackage
from envkit.errors import EngineError
from envkit.prefix import condarc
from envkit.prefix.records import conda_records
from envkit.render import mirrors
from envkit.render.envfile import EnvFile
from envkit.secrets import VAULT, redact

ENGINE_NAMES = ("conda", "mamba", "micromamba")
_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:[.\-]\w+)?)")
_URL = re.compile(r"(https?://[^\s<>\"']+)")


# -- finding the engine -----------------------------------------------------------------------------
def find_engine(engine: str, environ: dict[str, str] | None = None) -> str:
    """The executable for --engine NAME (CONDA_EXE / MAMBA_EXE first, as conda's own shell hooks set them)."""
    env = os.environ if environ is None else environ
    candidates: list[str] = []
    if engine == "conda" and env.get("CONDA_EXE"):
        candidates.append(env["CONDA_EXE"])
    mamba_exe = env.get("MAMBA_EXE", "")
    if engine == "micromamba" and "micromamba" in Path(mamba_exe).name:
        candidates.append(mamba_exe)
    found = shutil.which(engine, path=env.get("PATH"))
    if found:
        candidates.append(found)
    if engine == "mamba" and Path(mamba_exe).name.startswith("mamba"):
        candidates.append(mamba_exe)
    for exe in candidates:
        if Path(exe).is_file() and os.access(exe, os.X_OK):
            return exe
    hint = {"conda": "activate conda (it sets CONDA_EXE) or put conda on PATH",
            "micromamba": "run micromamba's shell hook (it sets MAMBA_EXE) or put micromamba on PATH",
            "mamba": "put mamba on PATH"}.get(engine, "put it on PATH")
    raise EngineError(f"--engine {engine}: `{engine}` was not found (CONDA_EXE/MAMBA_EXE/PATH)",
                      f"{hint}, or use the embedded engine (the default: --engine rattler)")


def engine_version(exe: str) -> str:
    """`conda --version` -> "conda 26.7.1"; micromamba prints the bare "2.0.5"."""
    try:
        done = proc.run([exe, "--version"], timeout=60, env=proc.child_env(isolate_python=True))
    except (OSError, FileNotFoundError):
        return "unknown"
    match = _VERSION.search(done.stdout + "\n" + done.stderr)
    return match.group(1) if match and done.returncode == 0 else "unknown"


# -- argv ---------------------------------------------------------------------------------------------
def engine_argv(engine: str, exe: str, file: Path, prefix: Path) -> list[str]:
    if engine == "micromamba":
        return [exe, "create", "-y", "-f", str(file), "-p", str(prefix)]
    return [exe, "env", "create", "-f", str(file), "-p", str(prefix)]


def dry_run_argv(exe: str, prefix: Path, channels: Sequence[str], specs: Sequence[str]) -> list[str]:
    argv = [exe, "create", "--dry-run", "--json", "-y", "-p", str(prefix), "--override-channels"]
    for channel in channels:
        argv += ["-c", channel]
    return argv + list(specs)


# -- channels and credentials ---------------------------------------------------------------------------
def engine_channels(opts: CreateOptions, envfile: EnvFile) -> tuple[EnvFile, dict[str, str], list[str]]:
    """The file the engine gets, extra environment for it, and notes. See the module docstring."""
    notes: list[str] = []
    if opts.channels:
        clean = tuple(redact(_split(c)) for c in opts.channels)
        return replace(envfile, channels=clean), {}, notes
    extra: dict[str, str] = {}
    mirror_url = opts.mirror if opts.mirror and "://" in opts.mirror else None
    if mirror_url and ("@" in urlsplit(mirror_url).netloc or "/t/" in mirror_url):
        # credentials given on the command line: conda resolves names under CONDA_CHANNEL_ALIAS (env only)
        extra["CONDA_CHANNEL_ALIAS"] = mirror_url.rstrip("/") + "/"
        names = tuple(mirrors.canonical_channel(c) for c in envfile.channels)
        notes.append("the mirror's credentials reach the engine through CONDA_CHANNEL_ALIAS in its environment "
                     "(never written to a file)")
        return replace(envfile, channels=names), extra, notes
    custom = condarc.setting("custom_channels") or {}
    alias = condarc.setting("channel_alias")
    if (alias or custom) and opts.mirror:
        names = tuple(mirrors.canonical_channel(c) for c in envfile.channels)
        hosts = {urlsplit(str(u)).hostname for u in ([alias] if alias else []) + list(custom.values())}
        if any(urlsplit(c).hostname in hosts for c in envfile.channels if "://" in c) or all(
                n in custom for n in names):
            notes.append("channel names passed as is: conda's own config (channel_alias/custom_channels) maps them "
                         "to the mirror, with its credentials")
            return replace(envfile, channels=names), extra, notes
    return envfile, extra, notes


def _split(url: str) -> str:
    return VAULT.split(url) if "://" in url else url


# -- reading results --------------------------------------------------------------------------------
def _planned_from(data: dict[str, Any], cached: bool) -> PlannedPackage:
    channel = str(data.get("channel") or data.get("base_url") or "")
    url = str(data.get("url") or "")
    return PlannedPackage(
        name=str(data.get("name", "")), version=str(data.get("version", "")),
        build=str(data.get("build") or data.get("build_string") or ""),
        build_number=int(data.get("build_number") or 0), channel=redact(channel).rstrip("/"),
        subdir=str(data.get("subdir") or data.get("platform") or ""),
        file_name=str(data.get("fn") or (url.rsplit("/", 1)[-1] if url else "")), url=redact(url),
        size=int(data["size"]) if data.get("size") else None, sha256=data.get("sha256"),
        depends=tuple(str(d) for d in data.get("depends") or ()), cached=cached)


def parse_plan(text: str) -> list[PlannedPackage]:
    """`create --dry-run --json` output -> the packages it would link (conda and micromamba shapes)."""
    try:
        data = json.loads(text[text.index("{"):]) if "{" in text else {}
    except ValueError as exc:
        raise EngineError(f"the engine's --json plan is not JSON: {exc}", "run the engine's dry run by hand") from exc
    actions = data.get("actions") or {}
    if isinstance(actions, list):  # older conda: one dict per prefix
        actions = actions[0] if actions else {}
    fetched = {str(f.get("fn") or f.get("url") or "") for f in actions.get("FETCH") or [] if isinstance(f, dict)}
    out = []
    for item in actions.get("LINK") or []:
        if isinstance(item, str):  # "channel::name-version-build"
            name, version, build = item.split("::")[-1].rsplit("-", 2)
            item = {"name": name, "version": version, "build": build}
        planned = _planned_from(item, cached=True)
        out.append(replace(planned, cached=not ({planned.file_name, planned.url} & fetched)))
    return out


def read_installed(prefix: Path) -> list[PlannedPackage]:
    """The real package list after the engine ran: conda-meta/*.json."""
    # bounded reads (records.py): the engine wrote these, but they are files
    return [_planned_from(data, cached=True) for _path, data in conda_records(prefix) if data.get("name")]


# -- errors ----------------------------------------------------------------------------------------
def engine_error(engine: str, rc: int, output: str, shown: bool) -> EngineError:
    """The engine's failure in envkit's words (what, why, the fix). `shown`: the output was streamed."""
    text = redact(output)
    tail = "" if shown else "\n" + "\n".join(text.strip().splitlines()[-15:])
    seen = " (its output is above)" if shown else ""
    data: dict[str, Any] = {}
    if "{" in text:
        try:
            data = json.loads(text[text.index("{"):])
        except ValueError:
            data = {}
    url = next(iter(_URL.findall(text)), "")
    url = url.rstrip(">.,)")
    code = re.search(r"(?:HTTP[ /]|returned error:?\s*|response code said error.*?)(401|403|404)\b", text)
    if code and code.group(1) in ("401", "403") or re.search(r"\b(UNAUTHORIZED|FORBIDDEN)\b", text):
        status = code.group(1) if code else "401"
        return EngineError(
            f"{engine} was refused by the channel server (HTTP {status}){' at ' + url if url else ''}: "
            f"the credentials are missing or wrong{seen}{tail}",
            "give the token to conda itself (envkit never writes it to disk): `conda config --set channel_alias "
            "https://<token-url>/` or a custom_channels entry in ~/.condarc, or `conda token set`; "
            "or use the embedded engine with --mirror https://USER:TOKEN@host/...")
    if (code and code.group(1) == "404") or "UnavailableInvalidChannel" in text:
        return EngineError(f"{engine}: a channel does not exist (HTTP 404){' at ' + url if url else ''}{seen}{tail}",
                           "check the channel names and the mirror URL (a mirror may lack this channel): "
                           "pass the right one with --channel URL or --mirror")
    missing = _missing_specs(text, data)
    if missing is not None:
        return EngineError(f"{engine}: not available from the channels: {', '.join(missing) or '(see above)'}"
                           f"{seen}{tail}",
                           "check the names and pins (envkit render NAME shows the file), the channel list, "
                           "or the mirror")
    if re.search(r"Unsatisfiable|could not solve|conflicting requirements|Could not solve", text):
        return EngineError(f"{engine}: the solver found no solution{seen}{tail}",
                           "relax pins; for CUDA builds on a machine without a GPU pass --cuda X.Y")
    if re.search(r"CondaHTTPError|HTTP 000|ConnectionError|Could not resolve host|Download error", text):
        return EngineError(f"{engine}: the channel could not be reached{' at ' + url if url else ''}{seen}{tail}",
                           mirrors.unreachable_hint())
    if re.search(r"Pip failed|Pip subprocess error", text):
        return EngineError(f"{engine}: the pip section failed{seen}{tail}", "check the pip packages and index URLs")
    said = conda_message(text, data)
    return EngineError(f"{engine} failed (rc {rc}){': ' + said[:300] if said else ''}{seen}{tail}",
                       "read the engine's output for the cause")


# conda's "not available" errors by their current names (conda/exceptions.py): PackagesNotFoundError
# (conda <= 24), PackagesNotFoundInChannelsError, its subclass that conda 25+/26.7 raises for a create,
# PackagesNotFoundInPrefixError (a remove); ResolvePackageNotFound (the classic solver). Matched as a
# family, so a new subclass of the same name is still read.
_NOT_FOUND = re.compile(r"\b(PackagesNotFound\w*Error|ResolvePackageNotFound)\b")
# conda's own one-line statement of an error it raised: `SomeError: message` at the start of a line
# (conda/exceptions.py `CondaError.__str__`, printed by conda's exception handler).
_CONDA_ERROR = re.compile(r"^(?P<line>(?:[A-Z]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.*)$", re.M)


def conda_message(text: str, data: dict[str, Any]) -> str:
    """conda's own statement of an error envkit has no rule for (the JSON `error`, else the first
    `NameError: ...` line), so an unknown or renamed error is still shown in conda's words."""
    if isinstance(data.get("error"), str) and data["error"].strip():
        line = data["error"].strip().splitlines()[0]
        name = str(data.get("exception_name") or "")
        return line if not name or line.startswith(name) else f"{name}: {line}"
    match = _CONDA_ERROR.search(text)
    return match.group("line").strip() if match else ""


def _missing_specs(text: str, data: dict[str, Any]) -> list[str] | None:
    if _NOT_FOUND.fullmatch(str(data.get("exception_name") or "")):
        return [str(p) for p in data.get("packages") or []]
    if _NOT_FOUND.search(text):
        block = text.split("current channels:", 1)[-1].split("Current channels:", 1)[0]
        return re.findall(r"^\s+-\s+(\S+)\s*$", block, re.M)
    found = re.findall(r"(\S+) does not exist \(perhaps", text)  # micromamba 2.x
    found += re.findall(r"nothing provides requested (\S+)", text)  # micromamba 1.x / libsolv
    return list(dict.fromkeys(found)) if found else None


# -- the Engine contract (engines/base.py) ---------------------------------------------------------
class CondaCLIEngine:
    """conda, mamba or micromamba behind the Engine contract: plan() is the engine's own dry run
    (`create --dry-run --json`), build() is `env create -f` of the env file at the final path (a conda
    prefix is not relocatable), which installs the pip section and variables and writes conda-meta/history
    itself. The env file handed over never holds credentials (engine_channels)."""

    in_place = True
    whole_file = True
    build_phase = "solve+install"

    def __init__(self, opts: CreateOptions, envfile: EnvFile, prefix: Path, cuda: str | None,
                 on_line: Callable[[str], None] | None = None) -> None:
        """`cuda`: the __cuda level to solve for (engines.base.cuda_override_for), None for the engine's own."""
        self.name = opts.engine
        self.prefix = prefix
        self.exe = find_engine(opts.engine)
        self.version = f"{opts.engine} {engine_version(self.exe)}"
        self.file_env, extra, self.notes = engine_channels(opts, envfile)
        if cuda is not None:
            extra["CONDA_OVERRIDE_CUDA"] = cuda
        self.env = proc.child_env(extra, isolate_python=True)
        self.on_line = on_line

    def plan(self, specs: Sequence[str]) -> list[PlannedPackage]:
        done = proc.run(dry_run_argv(self.exe, self.prefix, self.file_env.channels, specs), timeout=3600, env=self.env)
        if done.returncode != 0:
            raise engine_error(self.name, done.returncode, done.stdout + "\n" + done.stderr, shown=False)
        return parse_plan(done.stdout)

    def build(self, target: Path, final: Path) -> Built:
        lines: list[str] = []

        def stream(line: str) -> None:
            lines.append(line)
            if self.on_line:
                self.on_line(redact(line))

        with tempfile.TemporaryDirectory(prefix="envkit-") as tmp:
            file = Path(tmp) / "environment.yml"
            file.write_text(self.file_env.render(), encoding="utf-8")  # credentials are never in it
            done = proc.run(engine_argv(self.name, self.exe, file, target), timeout=3 * 3600, env=self.env,
                            on_line=stream)
        if done.returncode != 0:
            raise engine_error(self.name, done.returncode, "\n".join(lines), shown=self.on_line is not None)
        return Built(tuple(read_installed(target)))

    def describe_virtual_packages(self) -> list[str]:
        return []  # the external engine detects its own (CONDA_OVERRIDE_CUDA set above)
