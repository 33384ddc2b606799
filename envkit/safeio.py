"""Bounded reads of every file envkit takes as input: env files, specs, lock and explicit lists,
the config file, and the metadata of existing environments (which envkit/prefix/records.py reads
through these functions).

One place enforces what a hostile or broken file must not do to envkit: hang on a device or FIFO
(only regular files are read, opened non-blocking), exhaust memory (a size cap; YAML alias
expansion and nesting are counted on the event stream before anything is built, so a 400-byte
"billion laughs" file is refused in microseconds), or end in a traceback (non-UTF-8, UTF-16 and
binary files get a one-line error naming the file).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from envkit.errors import InputError

MAX_INPUT_BYTES = 16 * 1024 * 1024  # a lock file of 2,000 packages is ~1.5 MiB; env files are a few KiB
MAX_YAML_BYTES = 8 * 1024 * 1024
MAX_YAML_DEPTH = 64  # environment files nest 3 deep; PyYAML's composer recurses per level
MAX_YAML_ALIASES = 1000
MAX_YAML_NODES = 1_000_000  # after alias expansion: what a consumer walking the data would touch


def read_bytes(path: Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; anything else is an InputError naming it."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(f"{what} {path} does not exist", "check the path") from None
    except PermissionError:
        raise InputError(f"cannot read {what} {path}: permission denied",
                         f"check its permissions (ls -l {path}) or copy it somewhere readable") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}", "check the path") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{what} {path} is a folder, not a file", "pass the path of a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what} {path} is not a regular file (a device, FIFO or socket); "
                             "envkit reads only regular files", f"save the content to a file first: cat {path} > FILE")
        if info.st_size > limit:
            raise InputError(f"{what} {path} is {info.st_size / 2**20:.1f} MiB; envkit reads input files of at "
                             f"most {limit / 2**20:.0f} MiB", "pass the right file (this one is far too big to be it)")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:  # it grew while we read it
            raise InputError(f"{what} {path} is larger than {limit / 2**20:.0f} MiB", "pass the right file")
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}", "check the file") from None
    finally:
        os.close(fd)


def decode(data: bytes, path: Path, what: str = "file") -> str:
    """UTF-8 text (a BOM is allowed), or UTF-16 that starts with its BOM: Windows PowerShell 5.1's `>` writes that
    (about_Redirection: `conda env export > environment.yml`), and pip reads it too (pip/_internal/utils/encoding.py
    auto_decode). UTF-16 without a BOM, UTF-32, binary and other encodings are a clear error."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) and not data.startswith(b"\xff\xfe\0\0"):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            text = ""
        # an environment or requirements file is mostly ASCII whatever its encoding; bytes that only happen to
        # start with a BOM decode to CJK noise, and are refused below like any other damaged text
        if text and "\0" not in text and sum(ch < "\x80" for ch in text) * 2 >= len(text):
            return text
    if data.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(data) >= 4 and (data[1:4:2] == b"\0\0" or
                                                                            data[0:3:2] == b"\0\0")):
        raise InputError(f"{what} {path} is UTF-16 (or UTF-32) text; envkit reads UTF-8",
                         f"convert it: iconv -f UTF-16 -t UTF-8 {path} > {Path(path).stem}.utf8{Path(path).suffix}")
    if b"\0" in data:
        raise InputError(f"{what} {path} is a binary file, not text", "pass the text file envkit expects")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"{what} {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})",
                         f"convert it: iconv -f LATIN1 -t UTF-8 {path} > {Path(path).stem}.utf8{Path(path).suffix}"
                         ) from None


def read_text(path: Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> str:
    """A regular, bounded, UTF-8 text file."""
    return decode(read_bytes(path, what, limit), path, what)


def _loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dump_yaml(data: Any, **options: Any) -> str:
    """yaml.safe_dump through libyaml's emitter when PyYAML has it (same text, about 10x faster on a
    lock of a thousand packages); the pure-Python SafeDumper otherwise."""
    import yaml

    return str(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), **options))


def _yaml_error(exc: Exception, path: Path | str, what: str) -> InputError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
    return InputError(f"{where}: YAML syntax error in {what}: {problem}", f"fix the YAML in {path}")


def check_yaml(text: str, path: Path | str, what: str = "file", *, max_depth: int = MAX_YAML_DEPTH,
               max_aliases: int = MAX_YAML_ALIASES, max_nodes: int = MAX_YAML_NODES) -> None:
    """Walk the event stream (no objects built): nesting depth, alias count and expanded size bounded."""
    import yaml

    anchors: dict[str, int] = {}
    stack: list[list[Any]] = []  # [expanded node count, anchor] per open collection
    aliases = 0

    def done(count: int, anchor: str | None) -> None:
        if anchor:
            anchors[anchor] = count
        if stack:
            stack[-1][0] += count
            if stack[-1][0] > max_nodes:
                raise InputError(f"{what} {path} expands to more than {max_nodes:,} YAML nodes "
                                 "(aliases of aliases: a 'billion laughs' file?)",
                                 f"write the data out without nested aliases in {path}")

    try:
        for event in yaml.parse(text, Loader=_loader()):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                stack.append([1, event.anchor])
                if len(stack) > max_depth:
                    line = event.start_mark.line + 1 if event.start_mark else "?"
                    raise InputError(f"{what} {path} nests deeper than {max_depth} levels (line {line})",
                                     f"flatten the data in {path}: environment files nest 3 levels deep")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                count, anchor = stack.pop()
                done(count, anchor)
            elif isinstance(event, yaml.ScalarEvent):
                done(1, event.anchor)
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > max_aliases:
                    raise InputError(f"{what} {path} uses more than {max_aliases} YAML aliases",
                                     f"write the data out without aliases (*name) in {path}")
                done(anchors.get(event.anchor or "", 1), None)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path, what) from None


def loads_yaml(text: str, path: Path | str, what: str = "file") -> Any:
    """YAML text -> plain data (safe tags only), after the bounds check."""
    import yaml

    check_yaml(text, path, what)
    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path, what) from None
    except (RecursionError, ValueError, OverflowError) as exc:  # a value PyYAML's constructors choke on
        raise InputError(f"{what} {path}: a value cannot be read ({type(exc).__name__}: {str(exc)[:120]})",
                         f"fix the YAML in {path}") from None


def load_yaml(path: Path, what: str = "file", limit: int = MAX_YAML_BYTES) -> Any:
    """A bounded, UTF-8, regular YAML file -> plain data; every failure is one InputError naming it."""
    return loads_yaml(read_text(path, what, limit), path, what)


def load_packaged_yaml(path: Path, what: str) -> dict[str, Any]:
    """A data file shipped inside envkit (compat tables, mirrors): the same bounds as user input, a
    mapping at the top, and a reinstall as the fix (a damaged or hand-edited installation)."""
    fix = "reinstall envkit (pip install --force-reinstall envkit) to restore its data files"
    try:
        data = load_yaml(path, f"envkit's {what}")
    except InputError as exc:
        raise InputError(exc.message, fix) from None
    if not isinstance(data, dict):
        raise InputError(f"envkit's {what} {path} is damaged: its top level is not a mapping", fix)
    return data


def loads_json(text: str, path: Path | str, what: str = "file") -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{what} {path} is not valid JSON: {str(exc)[:160]}", f"fix or remove {path}") from None


def load_json(path: Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> Any:
    return loads_json(read_text(path, what, limit), path, what)


def load_json_object(path: Path, what: str = "file", limit: int = MAX_INPUT_BYTES) -> dict[str, Any]:
    """A JSON file whose top level must be an object."""
    data = load_json(path, what, limit)
    if not isinstance(data, dict):
        raise InputError(f"{what} {path} must hold a JSON object, not {type(data).__name__}", f"fix or remove {path}")
    return data
