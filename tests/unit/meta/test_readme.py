"""The README's navigation and first-hour claims hold: the table of contents lists every section and each
link lands on a heading, and every test the Troubleshooting table names exists."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"
TESTS = README.parent / "tests"


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lowercased, punctuation but '-' and '_' dropped, each space a '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> list[str]:
    return [line[3:] for line in text.splitlines() if line.startswith("## ")]


def test_the_table_of_contents_lists_every_section_and_each_link_lands() -> None:
    text = README.read_text(encoding="utf-8")
    contents = text.split("**Contents:**", 1)[1].split("\n\n", 1)[0]
    linked = re.findall(r"\]\(#([^)]+)\)", contents)
    headings = [line.lstrip("#").strip() for line in text.splitlines() if re.match(r"#{2,4} ", line)]
    anchors = {anchor(h) for h in headings}
    assert not [a for a in linked if a not in anchors], "a Contents link names no heading"
    assert [anchor(h) for h in sections(text)] == linked, "Contents must list every ## section, in order"
    stray = [a for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in anchors]
    assert not stray, f"links to no heading: {stray}"


def test_every_test_the_troubleshooting_table_names_exists() -> None:
    text = README.read_text(encoding="utf-8")
    table = text.split("## Troubleshooting\n", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`(test_\w+)`", table))
    assert len(named) >= 5
    defined = {m for path in TESTS.rglob("test_*.py")
               for m in re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.M)}
    assert named <= defined, sorted(named - defined)
