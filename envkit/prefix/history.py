"""conda-meta/history in conda's own format, so `conda env export --from-history` and
`conda list --revisions` work on envkit envs (py-rattler leaves the file empty).

Format (conda/history.py): a `==> YYYY-MM-DD HH:MM:SS <==` header, `# cmd: ...`, `# engine:` (in place of `# conda version:`),
`+channel/subdir::name-version-build` lines, `# update specs: [...]` (a Python list literal).
"""

from __future__ import annotations

import ast
import datetime as _dt
import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from envkit import __version__
from envkit.prefix.records import history_path
from envkit.safeio import read_bytes



@dataclass(frozen=True)
class Dist:
    channel: str  # sanitized channel URL
    subdir: str
    name: str
    version: str
    build: str

    def line(self) -> str:
        return f"{self.channel}/{self.subdir}::{self.name}-{self.version}-{self.build}"


def revision_block(argv: Sequence[str], added: Iterable[Dist], removed: Iterable[Dist], specs: Sequence[str],
                   *, action: str = "update", when: _dt.datetime | None = None, engine: str | None = None) -> str:
    """One revision. No `# conda version:` line: conda did not make it (conda's History parser needs only
    `# cmd:`); the real engine (`# engine: py-rattler 0.28.0`) and envkit's version are named instead."""
    when = when or _dt.datetime.now()
    lines = [f"==> {when.strftime('%Y-%m-%d %H:%M:%S')} <==",
             f"# cmd: {shlex.join(argv)}"]
    if engine:
        lines.append(f"# engine: {engine}")
    lines.append(f"# envkit version: {__version__}")
    lines += [f"-{d.line()}" for d in sorted(removed, key=lambda d: d.name)]
    lines += [f"+{d.line()}" for d in sorted(added, key=lambda d: d.name)]
    lines.append(f"# {action} specs: {list(specs)!r}")
    return "\n".join(lines) + "\n"


def append(prefix: Path, block: str) -> None:
    path = history_path(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(block)


_SPECS_RE = re.compile(r"^#\s*(update|install|create|remove|neutered) specs:\s*(\[.*\])\s*$")


def requested_specs(prefix: Path) -> dict[str, str]:
    """name -> the last spec the user asked for (what `--from-history` exports), removals applied."""
    path = history_path(prefix)
    if not path.is_file():
        return {}
    specs: dict[str, str] = {}
    for line in read_bytes(path, "conda history file").decode("utf-8", "replace").splitlines():
        match = _SPECS_RE.match(line.strip())
        if not match:
            continue
        try:
            items = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            continue
        for item in items:
            name = re.split(r"[\s=<>!~\[]", str(item).split("::")[-1], maxsplit=1)[0]
            if match.group(1) == "remove":
                specs.pop(name, None)
            else:
                specs[name] = str(item)
    return specs
