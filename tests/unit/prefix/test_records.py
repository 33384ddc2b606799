"""prefix/records.py is the one reader and writer of an env's metadata files (conda-meta/*.json,
conda-meta/state, .envkit/*.json): nothing else in envkit spells their names, every read is bounded,
and a hostile record reads as the same one-line error it always did."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

import envkit
from envkit.errors import EnvkitError, ExportError, InputError
from envkit.prefix import records

ROOT = Path(envkit.__file__).parent
# names that only records.py may spell, wherever they appear as a whole string literal
NAMES = {records.CONDA_META, records.META_DIR, records.CREATE_FILE, records.VERIFY_FILE, records.OWNER_FILE_NAME,
         records.PIP_PROVENANCE}
# names too common to ban outright (a table column "state"): banned as a path component (`x / "state"`)
PATH_NAMES = {records.STATE, records.HISTORY}
# fsutil.py (floor 0, below prefix/) refuses writes into any conda-meta folder without opening one;
# verify/payload/ runs in the env's own python, where envkit is not importable
EXEMPT = ("fsutil.py", "verify/payload/", "prefix/records.py")


def name_hits(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line: literal` for each on-disk metadata name a module spells itself."""
    rel = path.relative_to(root).as_posix()
    hits = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        literal = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
            literal = node.value
        elif (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant)
              and node.right.value in PATH_NAMES):
            literal = f'... / "{node.right.value}"'
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
              and any(isinstance(a, ast.Constant) and a.value in NAMES | PATH_NAMES for a in node.args)):
            literal = "os.path.join(..., <a metadata name>)"
        if literal is not None:
            hits.append(f"{rel}:{getattr(node, 'lineno', '?')}: {literal}")
    return hits


def scan(root: Path = ROOT) -> list[str]:
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "_data" in path.parts or any(rel == e or rel.startswith(e) for e in EXEMPT):
            continue
        found += name_hits(path, root)
    return found


def test_the_scanner_finds_a_planted_reader(tmp_path: Path) -> None:
    pkg = tmp_path / "envkit"
    pkg.mkdir()
    (pkg / "stray.py").write_text(
        "import os\n"
        "def f(prefix, meta):\n"
        "    a = prefix / 'conda-meta' / 'x.json'\n"
        "    b = meta / 'state'\n"
        "    c = os.path.join(prefix, '.envkit', 'create.json')\n"
        "    d = ('node', 'state')  # a column name, not a path\n"
        "    return 'the conda-meta folder', 'owner.json'\n")
    found = scan(pkg)
    assert "stray.py:3: conda-meta" in found
    assert 'stray.py:4: ... / "state"' in found
    assert "stray.py:5: os.path.join(..., <a metadata name>)" in found
    assert "stray.py:7: owner.json" in found
    assert not any(":6:" in hit or "the conda-meta folder" in hit for hit in found)


def test_only_records_py_names_the_metadata_files() -> None:
    """conda-meta, .envkit, create.json, verify.json, owner.json, pip-provenance.json, conda-meta/state and
    conda-meta/history are spelt in envkit/prefix/records.py alone; everyone else asks it."""
    found = scan()
    assert not found, ("metadata file names outside envkit/prefix/records.py (use its constants and "
                       "functions):\n" + "\n".join(found))


# -- the reader and writer ------------------------------------------------------------------------
def _env(tmp_path: Path) -> Path:
    prefix = tmp_path / "env"
    records.conda_meta(prefix).mkdir(parents=True)
    return prefix


def _record(prefix: Path, name: str, version: str = "1.0", build: str = "0", **extra: object) -> Path:
    path = records.conda_meta(prefix) / records.record_name(name, version, build)
    path.write_text(json.dumps({"name": name, "version": version, "build": build, **extra}))
    return path


def test_the_files_round_trip(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    records.write_create(prefix, {"name": "e", "selection": {"torch": "2.9.0", "cuda": "13.0"}, "phases_s": {}})
    records.update_create(prefix, phases_s={"solve": 1.5})
    assert records.read_meta(prefix, records.CREATE_FILE) == {
        "name": "e", "selection": {"torch": "2.9.0", "cuda": "13.0"}, "phases_s": {"solve": 1.5}}
    assert (prefix / ".envkit" / "create.json").read_text().endswith("}\n")  # the same text as before
    assert records.made_by_envkit(prefix) and records.has_create_record(prefix)

    records.write_state(prefix, (("CUDA_CACHE_MAXSIZE", "4294967296"), ("HF_HOME", "/data/hf")))
    assert json.loads((prefix / "conda-meta" / "state").read_text()) == {
        "env_vars": {"CUDA_CACHE_MAXSIZE": "4294967296", "HF_HOME": "/data/hf"}}
    assert records.state_vars(prefix) == {"CUDA_CACHE_MAXSIZE": "4294967296", "HF_HOME": "/data/hf"}
    assert records.state_vars_quiet(prefix) == records.state_vars(prefix)

    records.write_kept_env_file(prefix, "name: e\nchannels: [conda-forge]\ndependencies: [python]\n")
    assert records.read_kept_env_file(prefix) == {"name": "e", "channels": ["conda-forge"],
                                                  "dependencies": ["python"]}
    rows = [{"name": "rich", "version": "13.0", "url": "https://files/rich.whl", "sha256": "ab"}]
    records.write_pip_provenance(prefix, rows)
    assert records.read_pip_provenance(prefix) == rows
    records.write_owner_marker(prefix, json.dumps({"id": "abc"}))
    assert records.has_owner_marker(prefix) and records.read_owner_marker(prefix) == {"id": "abc"}
    records.write_verify(prefix, json.dumps({"outcome": "PASS"}) + "\n")
    assert records.read_meta_checked(prefix, records.VERIFY_FILE) == ({"outcome": "PASS"}, None)
    assert records.read_meta_quiet(prefix, records.VERIFY_FILE) == {"outcome": "PASS"}
    records.write_pip_requirements(prefix, "rich==13.0\n")
    assert sorted(p.name for p in records.meta_dir(prefix).iterdir()) == [
        "create.json", "environment.yml", "owner.json", "pip-provenance.json", "requirements.txt", "verify.json"]


def test_records_are_listed_sorted_and_read_by_name(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    torch = _record(prefix, "pytorch", "2.9.0", "cuda130_generic_py312_h0_200", url="https://x/pytorch.conda")
    numpy = _record(prefix, "numpy", "2.1.0", "py312h0_0")
    (records.history_path(prefix)).write_text("==> 2026-01-01 00:00:00 <==\n")
    assert records.record_paths(prefix) == [numpy, torch]  # history is not a record
    assert records.record_paths(prefix, "pytorch-[0-9]*.json") == [torch]
    assert [p for p, _d in records.conda_records(prefix)] == [numpy, torch]
    assert records.read_record(prefix, "pytorch", "2.9.0", "cuda130_generic_py312_h0_200")["url"] == \
        "https://x/pytorch.conda"
    assert records.read_record(prefix, "scipy", "1", "0") == {}
    assert records.has_record(prefix, "numpy") and not records.has_record(prefix, "ipykernel")
    assert records.has_conda_meta(prefix) and records.has_records_or_history(prefix)
    assert not records.has_conda_meta(tmp_path / "nowhere")


def test_a_hostile_record_is_the_same_clear_error(tmp_path: Path) -> None:
    """A FIFO planted as a record: export names it (not a hang), the lenient readers skip it, doctor sees {}."""
    from envkit.export import read_records

    prefix = _env(tmp_path)
    _record(prefix, "numpy", "2.1.0", "py312h0_0")
    fifo = records.conda_meta(prefix) / "evil-1-0.json"
    os.mkfifo(fifo)
    with pytest.raises(InputError) as caught:
        read_records(prefix)
    assert caught.value.message == (f"conda-meta record {fifo} is not a regular file (a device, FIFO or socket); "
                                    "envkit reads only regular files")
    assert [p.name for p, _d in records.conda_records(prefix)] == ["numpy-2.1.0-py312h0_0.json"]
    assert dict(records.scan_records(prefix))[fifo] == {}


def test_a_broken_record_is_named_with_its_fix(tmp_path: Path) -> None:
    from envkit.export import read_records

    prefix = _env(tmp_path)
    bad = records.conda_meta(prefix) / "numpy-2.1.0-0.json"
    bad.write_text(json.dumps({"name": "numpy", "version": "2.1.0"}))  # no build
    with pytest.raises(ExportError) as caught:
        read_records(prefix)
    assert caught.value.message == f"corrupt conda-meta record {bad}: 'build'"
    assert caught.value.hint == "repair or remove numpy-2.1.0-0.json, or recreate the env (envkit create NAME --force)"
    bad.write_bytes(b"\x00\x01binary")
    with pytest.raises(InputError, match=r"conda-meta record .* is a binary file, not text"):
        read_records(prefix)
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"conda-meta record .* is not valid JSON"):
        read_records(prefix)
    with pytest.raises(ExportError, match=r"is not an environment \(no conda-meta folder\)"):
        read_records(tmp_path / "nowhere")


def test_a_hostile_state_file_is_a_clear_error(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    state = records.state_path(prefix)
    assert records.state_vars(prefix) == {} and records.read_state(prefix) is None
    state.write_text(json.dumps({"env_vars": {"BAD NAME": "x"}}))
    with pytest.raises(EnvkitError) as caught:
        records.state_vars(prefix)
    assert caught.value.message == f"{state}: 'BAD NAME' is not a valid environment variable name"
    state.write_text(json.dumps({"env_vars": ["A=1"]}))
    with pytest.raises(EnvkitError, match="env_vars must be a mapping of NAME: value"):
        records.state_vars(prefix)
    assert records.state_vars_quiet(prefix) == {}
    state.unlink()
    os.mkfifo(state)
    with pytest.raises(InputError, match=r"conda state file .* is not a regular file"):
        records.state_vars(prefix)
    with pytest.raises(InputError, match=r"conda variables file .* is not a regular file"):
        records.read_state(prefix)
    assert records.state_vars_quiet(prefix) == {}


def test_an_unreadable_metadata_file_is_reported_not_raised(tmp_path: Path) -> None:
    prefix = _env(tmp_path)
    assert records.read_meta_checked(prefix, records.CREATE_FILE) == ({}, None)
    records.meta_dir(prefix).mkdir()
    os.mkfifo(records.meta_path(prefix, records.CREATE_FILE))
    data, why = records.read_meta_checked(prefix, records.CREATE_FILE)
    assert data == {} and why is not None and why.startswith("metadata file ") and "not a regular file" in why
    assert records.read_meta_quiet(prefix, records.CREATE_FILE) == {}
    with pytest.raises(InputError, match="metadata file"):
        records.read_meta(prefix, records.CREATE_FILE)
