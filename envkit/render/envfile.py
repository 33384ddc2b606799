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
from envkit.resources import yaml_str  # noqa: F401  (re-exported: it lived here before)

TEMPLATE = "environment.yml.j2"
# Conda and pip package names: letters, digits, '.', '_', '-' (conda's and PEP 508's common ground).
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
# Version constraints: what MatchSpec and PEP 440 use, and nothing YAML or jinja could act on.
VERSION_RE = re.compile(r"^[A-Za-z0-9_.*!+<>=,|~\- ]*$")
BUILD_RE = re.compile(r"^[A-Za-z0-9_.*+\-]*$")
CHANNEL_RE = re.compile(r"^([A-Za-z0-9_.\-]+|(https?|file)://[A-Za-z0-9_.~\-/%@:+\[\]]+)$")
VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONDA_SPEC_RE = re.compile(
    r"^(?:(?P<channel>[A-Za-z0-9_.\-/]+)::)?(?P<name>[^\s=<>!~]+)"
    r"(?:\s*(?P<rest>[=<>!~ ].*))?$")
_FORBIDDEN = ("\n", "\r", "\t", "{{", "}}", "{%", "%}", "#", "'", '"', "`", "\\", "$")


@dataclass(frozen=True)
class CondaSpec:
    """A conda dependency: [channel::]name[ version[ build]], in `name=ver=build` or MatchSpec form."""

    name: str
    version: str = ""  # '=1.2', '>=1.2,<2', '1.2.*' (as written, operator included)
    build: str = ""
    channel: str = ""

    def render(self, *, with_build: bool = True) -> str:
        text = (f"{self.channel}::" if self.channel else "") + self.name
        version = self.version
        if self.build and with_build:
            bare = version[1:] if version.startswith("=") and not version.startswith("==") else version
            return f"{text}={bare or '*'}={self.build}"
        return text + version

    @property
    def exact_version(self) -> str | None:
        v = self.version.lstrip("=")
        return v if v and re.fullmatch(r"[0-9][A-Za-z0-9_.+]*", v) else None


def _reject(value: str, what: str, where: str) -> None:
    bad = next((tok for tok in _FORBIDDEN if tok in value), None)
    if bad is not None or ": " in value or value.endswith(":"):
        shown = bad if bad is not None else ":"
        raise RenderError(f"{where}: {what} {value!r} contains {shown!r}, which is not allowed in a package spec",
                          "use a plain name with an optional version, e.g. numpy=1.26 or transformers>=4.40")


def parse_conda_spec(text: Any, where: str = "dependency") -> CondaSpec:
    """Parse and validate one conda dependency; anything YAML or jinja could act on is rejected."""
    if not isinstance(text, str) or not text.strip():
        raise RenderError(f"{where}: {text!r} is not a package spec", "write a string such as numpy=1.26")
    value = text.strip()
    _reject(value, "conda spec", where)
    match = _CONDA_SPEC_RE.match(value)
    if not match or not NAME_RE.match(match.group("name")):
        raise RenderError(f"{where}: cannot read {value!r} as a conda package spec",
                          "use name, name=version, name=version=build or name>=version")
    rest = (match.group("rest") or "").strip()
    version, build = "", ""
    if rest.startswith("=") and not rest.startswith("=="):
        parts = rest[1:].split("=")
        if len(parts) > 2:
            raise RenderError(f"{where}: too many '=' in {value!r}", "use name=version or name=version=build")
        version = "=" + parts[0] if parts[0] else ""
        build = parts[1] if len(parts) == 2 else ""
    elif " " in rest and not re.search(r"[<>=!~,]\s", rest):
        ver, _, build = rest.partition(" ")
        version = " " + ver.strip() if ver.strip() else ""
        build = build.strip()
    else:
        version = rest if not rest or rest[0] in "=<>!~" else " " + rest
    if not VERSION_RE.match(version) or not BUILD_RE.match(build):
        raise RenderError(f"{where}: invalid version or build in {value!r}", "use e.g. numpy>=1.26,<2")
    if version.startswith(" "):
        version = "=" + version.strip() if re.fullmatch(r"[0-9][\w.*+]*", version.strip()) else version
    channel = match.group("channel") or ""
    return CondaSpec(match.group("name"), version, build, channel)


def check_pip_line(text: Any, where: str = "pip") -> str:
    """Validate a pip requirement or an index option line (--index-url URL, --extra-index-url URL)."""
    if not isinstance(text, str) or not text.strip():
        raise RenderError(f"{where}: {text!r} is not a pip requirement", "write a string such as transformers>=4.40")
    value = text.strip()
    if value.startswith("-"):
        opt, _, arg = value.partition(" ")
        opt, eq, arg2 = opt.partition("=")
        arg = arg2 if eq else arg.strip()
        if opt not in ("--index-url", "-i", "--extra-index-url", "--trusted-host", "-f", "--find-links"):
            raise RenderError(f"{where}: unsupported pip option line {value!r}",
                              "only --index-url, --extra-index-url, --find-links and --trusted-host are kept")
        if not re.fullmatch(r"[A-Za-z0-9_.~\-/%:+@]+", arg):
            raise RenderError(f"{where}: invalid URL in {value!r}", "use a plain http(s) URL")
        return f"{opt} {arg}"
    if value.startswith(("git+", "http://", "https://")):
        if not re.fullmatch(r"[A-Za-z0-9_.~\-/%:+@#=&]+", value) or "{{" in value:
            raise RenderError(f"{where}: invalid URL requirement {value!r}", "use git+https://host/repo@commit")
        return value
    _reject(value, "pip requirement", where)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(value)
    except InvalidRequirement as exc:
        raise RenderError(f"{where}: {value!r} is not a valid pip requirement ({exc})",
                          "use e.g. transformers>=4.40 or datasets==2.19.0") from exc
    return value


def check_channel(text: Any, where: str = "channels") -> str:
    if not isinstance(text, str) or not CHANNEL_RE.match(text.strip()):
        raise RenderError(f"{where}: {text!r} is not a channel name or URL",
                          "use a name like conda-forge or a full https:// URL")
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

    def render(self) -> str:
        from envkit.resources import template_env

        template = template_env().get_template(TEMPLATE)
        text = template.render(
            name=self.name, channels=list(self.channels), dependencies=list(self.dependencies),
            pip=list(self.pip), variables=list(self.variables),
            header=[sanitize_comment(h) for h in self.header],
        )
        return text.rstrip("\n") + "\n"


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


def load_yaml_file(path: Path) -> Any:
    """Read YAML with errors that name the file and line."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RenderError(f"cannot read {path}: {exc.strerror or exc}", "check the path") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RenderError(f"{where}: YAML syntax error: {problem}", f"fix the YAML in {path}") from exc
