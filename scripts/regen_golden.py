#!/usr/bin/env python3
"""Regenerate tests/fixtures/golden/*.yml: the render matrix flavor x cpu/cuda x with/without mirror.

Run after an intended change to the template or the selection data, review the diff, commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    from golden_matrix import CASES, render_case

    GOLDEN.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        (GOLDEN / f"{case.id}.yml").write_text(render_case(case), encoding="utf-8")
        print(f"wrote {case.id}.yml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
