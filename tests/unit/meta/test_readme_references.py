"""Every file the README and docs/ name is part of the repository (a reader of a clone has no ../shared folder)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# a backticked repository path: `tests/fixtures/corpus_real/`, `docs/conda-behaviour.md`, `scripts/bench_create.py`
PATH_RE = re.compile(r"`((?:tests|docs|scripts|envkit|examples|\.ci|templates)/[A-Za-z0-9_./\-]*)`")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_reference_leaves_the_repository() -> None:
    for doc in _documents():
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            assert "../shared" not in line, f"{doc.name}:{number} names a file outside the repository: {line.strip()}"


def test_every_named_repository_path_exists() -> None:
    named = 0
    for doc in _documents():
        for path in PATH_RE.findall(doc.read_text(encoding="utf-8")):
            named += 1
            assert (ROOT / path).exists() or list(ROOT.glob(path)), f"{doc.name} names {path}, which does not exist"
    assert named > 20  # the README names its tests, scripts and data files: a checker that found none is broken
