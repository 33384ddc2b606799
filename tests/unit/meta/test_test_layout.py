"""The tests mirror envkit's layout (architecture.md): tests/unit/<package>/ per package or module, and every
test file and test named by what it tests, never by an issue or a round."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import envkit

TESTS = Path(__file__).resolve().parents[2]
PACKAGE = Path(envkit.__file__).parent
# "issue 9", "round 3", "second pass": where a piece of work came from, not what a test checks
PROVENANCE = re.compile(r"(?:^|_)(?:issues?(?:_?\d+)?|rounds?_?\d+|(?:first|second|third)_pass)(?:_|$)")


def test_every_unit_folder_is_an_envkit_package_or_module() -> None:
    folders = {p.name for p in (TESTS / "unit").iterdir() if p.is_dir() and p.name not in ("meta", "__pycache__")}
    stray = {f for f in folders if not (PACKAGE / f / "__init__.py").is_file() and not (PACKAGE / f"{f}.py").is_file()}
    assert not stray, f"tests/unit/<folder> must name a package or module of envkit/: {sorted(stray)}"


def test_no_test_file_or_test_is_named_by_its_provenance() -> None:
    named = []
    for path in sorted((TESTS / "unit").rglob("test_*.py")) + sorted((TESTS / "integration").rglob("test_*.py")):
        if PROVENANCE.search(path.stem[len("test_"):]):
            named.append(str(path.relative_to(TESTS)))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") and PROVENANCE.search(node.name[5:]):
                named.append(f"{path.relative_to(TESTS)}::{node.name}")
    assert not named, f"name these by what they check: {named}"
