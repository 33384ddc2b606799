"""envkit: a working GPU training environment in one command, and proof that it works.

The layering rule (tests/unit/meta/test_import_graph.py asserts it on the source, function-level imports
included; conda writes the same kind of rule in gateways/__init__.py). Each floor may import its own
floor and the floors below it, never one above; within a floor, no import cycle:

  7  cli/                               the only package that knows click or rich; prints and exits
  6  lock/ (solve, bundle), doctor/, shell/, fleet/, change/     the verbs' cores beside create
  5  create.py                          install atomically, settle, verify
  4  plan.py, export.py                 what to install (detect -> select -> env file); what is installed
  3  engines/                           rattler (the only importer of rattler), conda/mamba/micromamba, pip
  2  detect/, render/, verify/          the machine; the env file; the proof run in the env's own python
  1  compat/, prefix/, lock/file.py     compatibility facts; what is on disk in an env; the lock format
  0  errors models secrets resources safeio fsutil proc config    vocabulary and the one-of-each tools

compat/ and render/ stay pure: they import neither proc, detect nor engines (they compute, they do not run).
"""

from __future__ import annotations

__version__ = "0.1.0"

# (floor, module prefixes): a module's floor is that of its longest matching prefix
LAYERS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (0, ("envkit.errors", "envkit.models", "envkit.secrets", "envkit.resources", "envkit.safeio",
         "envkit.fsutil", "envkit.proc", "envkit.config")),
    (1, ("envkit.compat", "envkit.prefix", "envkit.lock.file")),
    (2, ("envkit.detect", "envkit.render", "envkit.verify")),
    (3, ("envkit.engines",)),
    (4, ("envkit.plan", "envkit.export")),
    (5, ("envkit.create",)),
    (6, ("envkit.lock", "envkit.doctor", "envkit.shell", "envkit.fleet", "envkit.change")),
    (7, ("envkit.cli", "envkit.__main__")),
)
PURE: dict[str, tuple[str, ...]] = {
    "envkit.compat": ("envkit.proc", "envkit.detect", "envkit.engines"),
    "envkit.render": ("envkit.proc", "envkit.detect", "envkit.engines"),
}


def floor_of(module: str) -> int | None:
    """The floor of an envkit module (None: not covered by LAYERS, which the layering test rejects)."""
    best: tuple[int, int] | None = None
    for floor, prefixes in LAYERS:
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), floor)
    return None if best is None else best[1]
