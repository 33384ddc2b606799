"""Engines: what solves and installs an env file into a prefix, behind one contract (base.Engine).

Owns: base (the Engine protocol, CreateOptions/CreateResult, what the orchestrator and the engines
share), rattler_engine (the embedded py-rattler engine, the only importer of rattler), conda_cli
(conda, mamba, micromamba as external engines), pip (the pip step and its index environment),
repodata (what channels and indexes publish: the live catalogue), fetch (resumable, retried, parallel
archive downloads into the cache, before rattler links), cache_sweep and errtext.
May import: prefix/, render/, verify/, compat/, lock/file.py and the ground floor.
"""
