"""environment.yml as data: validated specs, the EnvFile model, deterministic rendering and parsing.

Rules from real conda 26.7 (shared/reference/conda-behaviour.md): always an explicit `channels:`
list; never `nodefaults` (26.7 fetches it as a channel and fails); never `prefix:` (ignored when
`name:` is set); `variables:` values quoted as strings; pip index options as lines of `pip:`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import RenderError
from envkit.resources import template_env, yaml_scalar, yaml_str  # noqa: F401  (re-exported: they lived here before)
from envkit.safeio import load_yaml

TEMPLATE = "environment.yml.j2"
# Conda and pip package names: letters, digits, '.', '_', '-' (conda's and PEP 508's common ground).
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*\Z")
# Version constraints: what MatchSpec and PEP 440 use, and nothing YAML or jinja could act on.
VERSION_RE = re.compile(r"^[A-Za-z0-9_.*!+<>=,|~\- ]*\Z")
BUILD_RE = re.compile(r"^[A-Za-z0-9_.*+\-]*\Z")
# Channels as conda takes them: a name, owner/label/name (anaconda.org labels), conda-forge/linux-64,
# an http(s):// or file:// URL, or an absolute local path (conda docs, "Managing channels").
CHANNEL_RE = re.compile(r"^([A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-]+)*|(https?|file)://[A-Za-z0-9_.~\-/%@:+\[\]]+"
                        r"|/[A-Za-z0-9_.~\-/%@+]+)\Z")
VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_NAME_HEAD_RE = re.compile(r"^(?P<name>[A-Za-z0-9_][A-Za-z0-9_.\-]*)(?P<rest>.*)$")
# What no package spec needs and a YAML file or a jinja template could act on: line breaks (a second
# YAML key), template markers (envkit's own template and conda-build style recipes), shell markers.
_FORBIDDEN = ("\n", "\r", "\t", "\x00", "{{", "}}", "{%", "%}", "#", "'", '"', "`", "\\", "$")
_TEMPLATE_MARKERS = ("{{", "}}", "{%", "%}", "{#", "#}")
# MatchSpec bracket keys (conda/models/match_spec.py); version/build/channel/subdir are carried as fields.
_BRACKET_KEYS = ("version", "build", "build_number", "channel", "subdir", "md5", "sha256", "license", "fn", "url")


@dataclass(frozen=True)
class CondaSpec:
    """A conda MatchSpec: [channel[/subdir]::]name[ version[ build]][[key=value,...]]."""

    name: str
    version: str = ""  # '=1.2', '==1.2', '>=1.2,<2', ' 1.2.*' (operator as written; a leading space = bare)
    build: str = ""
    channel: str = ""
    extra: tuple[tuple[str, str], ...] = ()  # bracket keys other than version/build/channel

    def render(self, *, with_build: bool = True) -> str:
        text = (f"{self.channel}::" if self.channel else "") + self.name
        version = self.version
        if self.build and with_build:
            if version.startswith("=") and not version.startswith("=="):
                text += f"{version}={self.build}"
            elif not version:
                text += f"=*={self.build}"
            else:
                text += f" {version.strip()} {self.build}"
        else:
            text += version
        if self.extra:
            text += "[" + ",".join(f"{k}={_bracket_value(v)}" for k, v in self.extra) + "]"
        return text

    @property
    def exact_version(self) -> str | None:
        v = self.version.strip().lstrip("=")
        return v if v and re.fullmatch(r"[0-9][A-Za-z0-9_.+]*", v) else None


def _bracket_value(value: str) -> str:
    return value if re.fullmatch(r"[A-Za-z0-9_.*+\-]+", value) else f"'{value}'"


def _reject(value: str, what: str, where: str, forbidden: tuple[str, ...] = _FORBIDDEN) -> None:
    bad = next((tok for tok in forbidden if tok in value), None)
    if bad is None and any(not ch.isprintable() for ch in value):
        bad = "a control character"
    if bad is not None or ": " in value or value.endswith(":"):
        shown = bad if bad is not None else ":"
        raise RenderError(f"{where}: {what} {value!r} contains {shown!r}, which is not allowed in a package spec",
                          "use a plain name with an optional version, e.g. numpy=1.26 or transformers>=4.40")


def _split_brackets(value: str, where: str) -> tuple[str, dict[str, str]]:
    """'numpy[version=\'>=1\',build=py*]' -> ('numpy', {...}); quotes are allowed only in here."""
    if not value.endswith("]") or "[" not in value:
        return value, {}
    head, _, body = value[:-1].partition("[")
    if "=" not in body and re.fullmatch(r"[A-Za-z0-9_.,\- ]*", body):
        # conda reads only key=value pairs in brackets and ignores the rest (conda/models/match_spec.py,
        # _parse_spec_str step 4): `imageio[ffmpeg]` and `jaxlib=0.4.23[cuda118]` install imageio and jaxlib=0.4.23
        return head.strip(), {}
    fields: dict[str, str] = {}
    for match in re.finditer(r"\s*([a-z_0-9]+)\s*=\s*('[^']*'|\"[^\"]*\"|[^,]*)\s*(,|$)", body):
        key, raw = match.group(1), match.group(2).strip()
        if key not in _BRACKET_KEYS:
            raise RenderError(f"{where}: unknown MatchSpec key {key!r} in {value!r}",
                              f"conda accepts {', '.join(_BRACKET_KEYS)}")
        fields[key] = raw[1:-1] if raw[:1] in "'\"" and raw[-1:] == raw[:1] and len(raw) >= 2 else raw
    rebuilt = ",".join(f"{k}={v}" for k, v in fields.items())
    if not fields or len(re.sub(r"['\"\s]", "", body)) != len(re.sub(r"['\"\s]", "", rebuilt)):
        raise RenderError(f"{where}: cannot read the [...] part of {value!r}",
                          "write it as name[version='>=1.2',build='*cuda*']")
    for key, val in fields.items():
        _reject(val.replace(" ", ""), f"MatchSpec {key}", where)
    return head.strip(), fields


def parse_conda_spec(text: Any, where: str = "dependency") -> CondaSpec:
    """Parse and validate one conda MatchSpec (every form conda's environment.yml takes); anything
    YAML or jinja could act on is rejected."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str) or not text.strip():
        raise RenderError(f"{where}: {text!r} is not a package spec", "write a string such as numpy=1.26")
    value = text.strip()
    _reject(re.sub(r"\[.*\]$", "", value), "conda spec", where, (*_FORBIDDEN, "[", "]"))
    value, fields = _split_brackets(value, where)
    channel = ""
    if "::" in value:
        channel, _, value = value.rpartition("::")
        channel = channel.strip()
        if not CHANNEL_RE.match(channel):
            raise RenderError(f"{where}: {channel!r} is not a channel (in {text.strip()!r})",
                              "use channel::name, e.g. conda-forge::numpy or nvidia/label/cuda-11.8.0::cuda")
    head = _NAME_HEAD_RE.match(value.strip())
    if not head:
        raise RenderError(f"{where}: cannot read {text.strip()!r} as a conda package spec",
                          "use name, name=version, name=version=build or name>=version")
    name = head.group("name")
    rest = head.group("rest").strip()
    # conda tolerates blanks around operators and separators: 'numpy >= 1.2, <2'
    rest = re.sub(r"\s*([,|])\s*", r"\1", rest)
    rest = re.sub(r"([<>=!~]=?)\s+(?=[0-9A-Za-z*])", r"\1", rest)
    version, build = "", ""
    exact_build = re.fullmatch(r"==([^=<>!~,|\s]+)=([A-Za-z0-9_.*+\-]+)", rest)
    if exact_build:
        # `name==1.2=build` (conda-lock and `conda list` style): conda's MatchSpec takes the last `=` that follows
        # no operator as the build separator (_parse_version_plus_build)
        rest = f"={exact_build.group(1)}={exact_build.group(2)}"
    if rest.startswith("=") and not rest.startswith("=="):
        parts = rest[1:].split("=")
        if len(parts) > 2:
            raise RenderError(f"{where}: too many '=' in {text.strip()!r}", "use name=version or name=version=build")
        version = "=" + parts[0] if parts[0] else ""
        build = parts[1].strip() if len(parts) == 2 else ""
    elif " " in rest:
        ver, _, build = rest.partition(" ")
        version = ver if ver[:1] in "=<>!~" else " " + ver
        build = build.strip()
    elif rest:
        version = rest if rest[0] in "=<>!~" else " " + rest
    if exact_build:
        version = "==" + exact_build.group(1)
    if " " in build or not VERSION_RE.match(version) or not BUILD_RE.match(build):
        raise RenderError(f"{where}: invalid version or build in {text.strip()!r}", "use e.g. numpy>=1.26,<2")
    if "version" in fields:
        v = fields.pop("version").replace(" ", "")
        if not VERSION_RE.match(v):
            raise RenderError(f"{where}: invalid version in {text.strip()!r}", "use e.g. version='>=1.26,<2'")
        version = v if v[:1] in "=<>!~" else " " + v
    if "build" in fields:
        build = fields.pop("build")
        if not BUILD_RE.match(build):
            raise RenderError(f"{where}: invalid build in {text.strip()!r}", "use e.g. build='*cuda*'")
    if "channel" in fields:
        channel = fields.pop("channel")
        if not CHANNEL_RE.match(channel):
            raise RenderError(f"{where}: {channel!r} is not a channel (in {text.strip()!r})", "use a channel name")
    if "subdir" in fields and channel:
        channel = f"{channel}/{fields.pop('subdir')}"
    if version == " *":
        version = ""
    return CondaSpec(name, version, build, channel, tuple(sorted(fields.items())))


# pip options a requirements file may hold (pip's "Requirements File Format"): option -> takes a value
PIP_OPTIONS = {
    "-i": True, "--index-url": True, "--extra-index-url": True, "--no-index": False, "-f": True,
    "--find-links": True, "--trusted-host": True, "--pre": False, "--prefer-binary": False,
    "--only-binary": True, "--no-binary": True, "--require-hashes": False, "--use-feature": True,
    "-c": True, "--constraint": True, "-r": True, "--requirement": True, "-e": True, "--editable": True,
    "--config-settings": True, "-C": True, "--global-option": True,
}
# per-requirement options allowed after a requirement on the same line
_PER_REQ = ("--hash", "--config-settings", "-C", "--global-option")
_URLISH_RE = re.compile(r"^(git\+|hg\+|svn\+|bzr\+|https?://|file:|\.{1,2}/|/|~/|[A-Za-z]:[\\/])")
_ARG_RE = re.compile(r"^[A-Za-z0-9_.~\-/%:+@#=&?,\[\]!${}*]+$")
_ENV_VAR_RE = re.compile(r"\$\{[A-Z0-9_]+\}")


@dataclass(frozen=True)
class PipLine:
    """One line of a pip requirements file, split into what envkit needs to know."""

    text: str  # normalised line
    option: str = ""  # '-e', '-r', '--index-url', ... ('' for a requirement)
    arg: str = ""  # the option's value, or the requirement
    name: str = ""  # the distribution name, when known ('' for a bare URL or path)
    local_path: bool = False  # a path on this machine (relative ones resolve against the env file's folder)
    ignored: str = ""  # file-wide options written after a requirement ('--index-url URL'): pip ignores them there


def _check_arg(arg: str, what: str, where: str) -> None:
    bare = _ENV_VAR_RE.sub("X", arg)  # pip expands ${VAR} in requirements files
    if not arg or not _ARG_RE.match(arg) or "$" in bare or "{" in bare or any(m in arg for m in _TEMPLATE_MARKERS):
        raise RenderError(f"{where}: {what} {arg!r} is not allowed: a pip argument is one word of URL or path "
                          "characters (no quotes, blanks, template markers or $ other than ${VAR})",
                          "use a plain URL or path, e.g. git+https://host/repo@v1#egg=pkg or ./pkg")


def _requirement_name(req: str) -> str:
    egg = re.search(r"[#&]egg=([A-Za-z0-9_.\-]+)", req)
    if egg:
        return egg.group(1)
    wheel = re.search(r"/([A-Za-z0-9_.]+)-[0-9][^/-]*(-[^/]*)?\.(whl|tar\.gz|zip)$", req)
    return wheel.group(1) if wheel else ""


def parse_pip_line(text: Any, where: str = "pip") -> PipLine:
    """Read one line of a pip section the way pip reads a requirements file; reject what pip would,
    and what could break the YAML or a template (line breaks, template markers, stray quotes)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        text = str(text)
    if not isinstance(text, str) or not text.strip():
        raise RenderError(f"{where}: {text!r} is not a pip requirement", "write a string such as transformers>=4.40")
    value = text.strip()
    if any(tok in value for tok in ("\n", "\r", "\x00")) or any(not ch.isprintable() for ch in value):
        raise RenderError(f"{where}: pip line {value!r} contains a line break or control character, which is "
                          "not allowed (one requirement per line)", "split it into separate list items")
    bad = next((m for m in _TEMPLATE_MARKERS if m in value), None)
    if bad:
        raise RenderError(f"{where}: pip line {value!r} contains {bad!r}, which is not allowed (a template "
                          "marker)", "write the requirement literally")
    value = re.sub(r"\s+#.*$", "", value)  # pip drops ' # comment'
    if value.startswith("-"):
        match = re.match(r"^(-[A-Za-z]|--[a-z-]+)(?:\s*=\s*|\s+)?(.*)$", value)
        opt, arg = (match.group(1), match.group(2)) if match else (value, "")
        if opt not in PIP_OPTIONS:
            raise RenderError(f"{where}: unsupported pip option line {value!r} (pip's requirements files do not "
                              "take it)", "see pip's 'Requirements File Format' for the options a file may hold")
        if not PIP_OPTIONS[opt]:
            if arg.strip():
                raise RenderError(f"{where}: {opt} takes no value in {value!r}", f"write {opt} alone")
            return PipLine(opt, opt)
        arg = arg.strip()
        if not arg:
            # conda writes each pip item as one line of a requirements file and pip reads each line alone
            # ("--extra-index-url option requires 1 argument", pip 26.3): the option and its value are one item
            raise RenderError(f"{where}: {opt} has no value on its line: pip reads each item of the pip section "
                              "as one line (pip: option requires 1 argument)",
                              f"write the option and its value as one item: - {opt} URL")
        quoted = re.fullmatch(r"""(['"])([^'"]+)\1""", arg)
        if quoted:
            # pip splits an option line as a shell does (pip/_internal/req/req_file.py: shlex.split), so
            # `-e "..[JAX,dev]"` is the path ..[JAX,dev]; written back unquoted, pip reads the same word
            arg = quoted.group(2)
        canon = {"-i": "--index-url", "--editable": "-e", "--requirement": "-r", "--constraint": "-c",
                 "--find-links": "-f", "-C": "--config-settings"}.get(opt, opt)
        _check_arg(arg, f"{opt} value", where)
        local = canon in ("-r", "-c") or (canon in ("-e", "-f") and not re.match(r"^[a-z+]+://", arg)
                                          and not arg.startswith(("git+", "hg+", "svn+", "bzr+")))
        name = _requirement_name(arg) if canon == "-e" else ""
        return PipLine(f"{canon} {arg}", canon, arg, name, local)
    # a requirement, maybe followed by per-requirement options (--hash=sha256:...)
    req, options, ignored = value, "", ""
    split = re.search(r"\s(--[a-z-]+|-C|-[if])(=|\s)", value)
    if split:
        req, options = value[: split.start()].strip(), value[split.start():].strip()
        kept: list[str] = []
        dropped: list[str] = []
        # option words in order: `--opt value` or `--opt=value`, or a flag alone
        for opt, _eq, arg in re.findall(r"(--?[A-Za-z-]+)(?:(=|\s+)(?!-)(\S+))?", options):
            if opt in _PER_REQ:
                kept.append(f"{opt}={arg}" if arg else opt)
            elif opt in PIP_OPTIONS:
                # pip parses a file-wide option after a requirement and ignores it there (pip/_internal/req/
                # req_file.py: only SUPPORTED_OPTIONS_REQ reach the requirement; pip 23.2 and 26.3 install the
                # line from the configured index): kept out, as pip keeps it out, and said so
                dropped.append(f"{opt} {arg}".strip())
            else:
                raise RenderError(f"{where}: {opt} is not a pip option ({value!r})",
                                  "per-requirement options are --hash, --config-settings and --global-option")
            if arg:
                _check_arg(arg, "option value", where)
        ignored = " ".join(dropped)
        options = " ".join(kept)
        if dropped:
            value = f"{req} {options}".strip()
    if _URLISH_RE.match(req):
        url, sep, marker = req.partition("; ")
        if sep:
            # pip splits a URL or path requirement from its environment markers at "; " (semicolon and blank: a
            # URL may hold ';'), pip/_internal/req/constructors.py parse_req_from_line; theroyallab/tabbyAPI's
            # `https://.../exllamav2-0.0.11+cu118-cp311-cp311-linux_x86_64.whl; platform_system == "Linux"`
            from packaging.markers import InvalidMarker, Marker

            try:
                Marker(marker)
            except InvalidMarker as exc:
                raise RenderError(f"{where}: the environment marker of {value!r} is not valid ({exc})",
                                  'write it as pip does: URL; python_version == "3.11"') from None
            req = url.strip()
        _check_arg(req, "requirement URL or path", where)
        local = not re.match(r"^[a-z+]+://", req) and not req.startswith(("git+", "hg+", "svn+", "bzr+"))
        return PipLine(value, "", req, _requirement_name(req), local and not req.startswith("file:"), ignored)
    from packaging.requirements import InvalidRequirement, Requirement

    if " @ " not in req and ";" not in req and _looks_like_path(req):
        # pip takes a bare path as a local project or archive (pip/_internal/req/constructors.py,
        # _looks_like_path / is_archive_file: a path separator, a leading '.', or an archive name):
        # submodules/simple-knn, .[vis], dist/pkg-1.0-py3-none-any.whl
        _check_arg(req, "requirement path", where)
        return PipLine(value, "", req, _requirement_name("/" + req), True, ignored)
    try:
        parsed = Requirement(req)
    except InvalidRequirement as exc:
        raise RenderError(f"{where}: pip line {value!r} is not allowed: it is not a valid requirement ({str(exc).splitlines()[0]})",
                          "use e.g. transformers>=4.40, datasets==2.19.0 or pkg; python_version < \"3.11\"") from exc
    if parsed.url:
        _check_arg(parsed.url, "requirement URL", where)
    return PipLine(value, "", req, parsed.name, ignored=ignored)


_ARCHIVE_RE = re.compile(r"\.(whl|tar\.gz|tgz|tar\.bz2|tbz|tar\.xz|txz|tar|zip)$")


def _looks_like_path(req: str) -> bool:
    """pip's test for a requirement that is a path, not a name (a name never holds '/' or starts with '.')."""
    head = req.split("[", 1)[0]
    return "/" in head or head.startswith(".") or bool(_ARCHIVE_RE.search(head))


def check_pip_line(text: Any, where: str = "pip") -> str:
    """Validate one pip requirements-file line; the normalised line."""
    return parse_pip_line(text, where).text


def check_channel(text: Any, where: str = "channels") -> str:
    if not isinstance(text, str) or not CHANNEL_RE.match(text.strip()) or ".." in text.split("://")[-1]:
        raise RenderError(f"{where}: {text!r} is not a channel name or URL",
                          "use a name like conda-forge, a label like nvidia/label/cuda-11.8.0, or a full URL")
    value = text.strip()
    if value == "nodefaults":
        raise RenderError(f"{where}: 'nodefaults' breaks `conda env create` in conda 26.7 (fetched as a channel)",
                          "leave it out: envkit writes an explicit channel list and never relies on defaults")
    return value


def sanitize_comment(text: str) -> str:
    """Header comments carry GPU names and reasons: one printable line each, no jinja markers."""
    clean = "".join(ch if ch.isprintable() else " " for ch in text)
    return clean.replace("{{", "{ {").replace("{%", "{ %").strip()


@dataclass(frozen=True)
class EnvFile:
    """An environment.yml before it becomes text."""

    name: str
    channels: tuple[str, ...]
    dependencies: tuple[str, ...]
    pip: tuple[str, ...] = ()
    variables: tuple[tuple[str, str], ...] = ()
    header: tuple[str, ...] = field(default=())
    pip_repositories: tuple[str, ...] = ()  # conda-lock's top-level keys (for_conda_lock); conda ignores them
    allow_pypi_requests: bool = True

    def render(self) -> str:
        template = template_env().get_template(TEMPLATE)
        text = template.render(
            name=self.name, channels=list(self.channels), dependencies=list(self.dependencies),
            pip=list(self.pip), variables=list(self.variables),
            header=[sanitize_comment(h) for h in self.header],
            pip_repositories=list(self.pip_repositories), allow_pypi_requests=self.allow_pypi_requests,
        )
        return text.rstrip("\n") + "\n"


# conda-lock (4.0.3 src_parser/environment_yaml.py) reads every pip line as a requirement: an option line
# such as `--index-url URL` fails with `InvalidRequirement: Expected package name`. Its own place for
# indexes is top-level: `pip-repositories: [URL, ...]` and `allow-pypi-requests: false` (PyPI off, as pip's
# --index-url replaces it). conda env create warns about those keys and ignores them
# (EnvironmentSectionNotValid), so this form is for conda-lock only. Other pip options (--trusted-host,
# --find-links, --pre, ...) have no conda-lock key: they are left out and named.
_PIP_INDEX = re.compile(r"^(--index-url|-i|--extra-index-url)[ =]\s*(\S+)$")


def for_conda_lock(envfile: EnvFile) -> tuple[EnvFile, tuple[str, ...]]:
    """The env file in the form conda-lock parses, and what had to change (notes for the user)."""
    repos: list[str] = []
    allow_pypi = True
    kept: list[str] = []
    notes: list[str] = []
    for line in envfile.pip:
        text = line.strip()
        match = _PIP_INDEX.match(text)
        if match:
            if match.group(1) == "--extra-index-url":
                repos.append(match.group(2))
            else:
                repos.insert(0, match.group(2))
                allow_pypi = False
            continue
        if text.startswith("-") and not text.startswith(("-e ", "--editable")):
            notes.append(f"conda-lock has no place for the pip option {text!r}: left out of this file")
            continue
        kept.append(line)
    if not repos and not notes:
        return envfile, ()
    if repos:
        notes.insert(0, "pip index lines moved to conda-lock's pip-repositories:"
                     + ("" if allow_pypi else " (allow-pypi-requests: false, as --index-url replaces PyPI)"))
    header = (*envfile.header, "conda-lock form: pip indexes are in pip-repositories:, which conda env create "
              "ignores (it would use PyPI): give conda the plain render, without --conda-lock.")
    return EnvFile(envfile.name, envfile.channels, envfile.dependencies, tuple(kept), envfile.variables, header,
                   tuple(dict.fromkeys(repos)), allow_pypi), tuple(notes)


def check_variables(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise RenderError(f"{where}: variables must be a mapping of NAME: value", "e.g. OMP_NUM_THREADS: \"8\"")
    out = []
    for key, value in raw.items():
        if not isinstance(key, str) or not VAR_NAME_RE.match(key):
            raise RenderError(f"{where}: variable name {key!r} is not valid", "use letters, digits and _")
        text = "" if value is None else (str(value).lower() if isinstance(value, bool) else str(value))
        if any(tok in text for tok in ("\n", "\r", "{{", "{%")):
            raise RenderError(f"{where}: variable {key} has a value with a newline or template marker",
                              "use a single-line plain value")
        out.append((key, text))
    return tuple(sorted(out))


def load_yaml_file(path: Path, what: str = "environment file") -> Any:
    """Read YAML with errors that name the file and line (bounded: safeio)."""
    return load_yaml(path, what)
