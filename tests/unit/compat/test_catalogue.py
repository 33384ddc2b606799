"""The pure half of the catalogue: reading build strings, wheel names, conda version specs, merging."""

from __future__ import annotations

import json

import pytest

from envkit.compat import load
from envkit.compat.catalogue import Catalogue, Record, cuda_of, merge, python_of, version_matches
from envkit.compat.select import select
from envkit.engines.repodata import wheel_record
from envkit.models import Driver, Gpu, Machine, Request

H200 = Machine(Driver("580.65.06", "13.0", "nvml"), (Gpu(0, "H200", "9.0"),))


@pytest.mark.parametrize(("spec", "version", "ok"), [
    ("2.13.*", "2.13.0", True), ("2.13.*", "2.12.1", False), (">=2.13,<2.14", "2.13.1", True),
    (">=2.4.0a0,<2.5.0a0", "2.5.1", False), ("2.5.1", "2.5.1", True), ("2.5.1", "2.5.10", False),
    ("2.5.1.*|2.6.*", "2.6.0", True), ("*", "9.9", True), ("=2.5", "2.5.1", True), ("!=2.5.1", "2.5.1", False),
])
def test_conda_version_specs(spec: str, version: str, ok: bool) -> None:
    assert version_matches(spec, version) is ok


def test_build_strings_and_wheel_names() -> None:
    assert cuda_of(Record("pytorch", "2.13.0", "cuda130_generic_py312_h1234_200", "linux-64")) == "13.0"
    assert cuda_of(Record("pytorch", "2.1.2", "cuda118_py311_h0_301", "linux-64")) == "11.8"
    assert cuda_of(Record("pytorch", "2.5.1", "py3.11_cuda12.4_cudnn9.1.0_0", "linux-64")) == "12.4"
    assert cuda_of(Record("pytorch", "2.13.0", "cpu_mkl_py312_h0_100", "linux-64")) == "cpu"
    assert python_of("cuda130_generic_py312_h1234_200", []) == "3.12"
    assert python_of("h0_0", ["python >=3.13,<3.14.0a0"]) == "3.13"
    rec = wheel_record("torch-2.14.0+cu130-cp313-cp313t-manylinux_2_28_x86_64.whl", "cu130")
    assert rec == Record("torch", "2.14.0", "cu130", "cu130", "3.13t")
    assert wheel_record("torch-2.14.0+cu130-cp312-cp312-win_amd64.whl", "cu130") is None
    assert cuda_of(rec) == "13.0"


def test_catalogue_round_trips_through_json_and_says_where_it_came_from() -> None:
    cat = Catalogue("conda-forge", "conda-forge via tuna", ("https://mirror/conda-forge",), "2026-11-30T09:12:00Z",
                    (Record("pytorch", "2.13.0", "cuda130_py312_h0_0", "linux-64", "3.12", ("cuda-version >=13.0",)),))
    back = Catalogue.from_json(json.loads(json.dumps(cat.to_json())))
    assert back.records == cat.records and back.cached
    assert cat.describe() == "catalogue: conda-forge via tuna, read 2026-11-30 09:12 UTC"
    assert back.describe().startswith("catalogue: conda-forge via tuna, read 2026-11-30 09:12 UTC (cached, ")


def test_merge_keeps_only_what_exists() -> None:
    recs = [Record("pytorch", "2.12.1", f"cuda{c}_generic_py312_h0_0", "linux-64", "3.12") for c in ("129", "130")]
    recs.append(Record("cuda-version", "12.9", "h0", "noarch"))  # no cuda-version 13.0 on this channel
    cat = Catalogue("conda-forge", "conda-forge via lagging", (), "2026-11-30T09:12:00Z", tuple(recs))
    merged = merge(load(), "conda-forge", cat)
    r = next(r for r in merged.releases if r.minor == "2.12")
    assert [b.label for b in r.builds["conda-forge"]] == ["cuda129"] and r.python == ("3.12",)
    assert "has no cuda-version 13.0" in " ".join(merged.notes["2.12"])
    assert merged.missing["2.13"] == ("torch 2.13 skipped: conda-forge via lagging has no pytorch 2.13 "
                                      "for linux-64 yet")
    sel = select(H200, Request(), catalogue=cat, source_note=cat.describe())
    assert (sel.torch, sel.variant, sel.python) == ("2.12.1", "cuda129", "3.12")
    assert sel.reasons[0] == "catalogue: conda-forge via lagging, read 2026-11-30 09:12 UTC"
