"""The loopback index speaks PEP 691 like PyPI and download.pytorch.org: the same project page as JSON
or HTML, chosen by the Accept header (https://peps.python.org/pep-0691/). The catalogue reads the JSON
form and still reads a PEP 503-only (HTML) server; a real pip installs from the JSON form (issue 11)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from testbed.pipindex import build_wheel, write_simple_index
from testbed.server import LEGACY_HTML, PEP691_HTML, PEP691_JSON, ChannelServer, negotiate

PIP_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"


@pytest.mark.parametrize(("accept", "answer"), [
    (None, LEGACY_HTML),  # PEP 691: no header is a legacy client
    ("*/*", LEGACY_HTML),  # curl, urllib with a wildcard: the legacy default
    ("text/html", LEGACY_HTML),
    (PIP_ACCEPT, PEP691_JSON),  # pip >= 22.2
    ("application/vnd.pypi.simple.v1+json, text/html;q=0.1", PEP691_JSON),  # envkit's catalogue
    ("application/vnd.pypi.simple.latest+json", PEP691_JSON),  # `latest` is v1 today
    ("application/vnd.pypi.simple.latest+html", PEP691_HTML),
    ("text/html;q=0.9, application/vnd.pypi.simple.v1+json;q=0.5", LEGACY_HTML),  # the client's q wins
    ("application/vnd.pypi.simple.v1+json;q=0, */*;q=0.5", LEGACY_HTML),  # q=0 refuses JSON
    ("application/json", None),  # nothing offered is acceptable: 406
])
def test_content_negotiation(accept: str | None, answer: str | None) -> None:
    assert negotiate(accept) == answer


def fetch(url: str, accept: str | None) -> tuple[int, str, str, bytes]:
    """(status, Content-Type, Vary, body) of one GET."""
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - loopback
            return response.status, response.headers.get("Content-Type", ""), response.headers.get("Vary", ""), \
                response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, "", "", b""


@pytest.fixture
def index(tmp_path: Path) -> Path:
    root = tmp_path / "index"
    work = tmp_path / "wheels"
    for variant in ("cu130", "cu126"):
        wheels = [build_wheel(work / variant, "torch", f"2.14.0+{variant}"),
                  build_wheel(work / variant, "torchvision", f"0.29.0+{variant}"),
                  build_wheel(work / variant, "torchaudio", f"2.11.0+{variant}")]
        write_simple_index(root / "whl" / variant, wheels)
    return root


def test_project_and_root_pages_as_json_and_html(index: Path) -> None:
    with ChannelServer(index) as srv:
        status, ctype, vary, body = fetch(f"{srv.url}/whl/cu130/torch/", PIP_ACCEPT)
        assert (status, ctype, vary) == (200, PEP691_JSON, "Accept")
        page = json.loads(body)
        assert page["meta"] == {"api-version": "1.0"} and page["name"] == "torch"
        [entry] = page["files"]
        assert entry["filename"] == "torch-2.14.0+cu130-py3-none-any.whl"
        # the url is relative to the page and the hash is the served file's
        wheel = fetch(f"{srv.url}/whl/cu130/torch/{entry['url']}", None)[3]
        assert entry["hashes"] == {"sha256": hashlib.sha256(wheel).hexdigest()}
        status, ctype, _vary, body = fetch(f"{srv.url}/whl/cu130/", "application/vnd.pypi.simple.v1+json")
        assert ctype == PEP691_JSON
        assert json.loads(body)["projects"] == [{"name": "torch"}, {"name": "torchaudio"}, {"name": "torchvision"}]
        status, ctype, vary, body = fetch(f"{srv.url}/whl/cu130/torch/", None)
        assert (status, ctype, vary) == (200, LEGACY_HTML, "Accept") and b'<a href="torch-2.14.0+cu130' in body
        assert fetch(f"{srv.url}/whl/cu130/torch/", "application/vnd.pypi.simple.v1+html")[1] == PEP691_HTML
        assert fetch(f"{srv.url}/whl/cu130/torch/", "application/json")[0] == 406
        # a PEP 503-only server: HTML whatever is asked, no Vary
        srv.state.offer_json = False
        status, ctype, vary, body = fetch(f"{srv.url}/whl/cu130/torch/", PIP_ACCEPT)
        assert (status, ctype, vary) == (200, LEGACY_HTML, "") and body.startswith(b"<!DOCTYPE html>")


@pytest.mark.parametrize("offer_json", [True, False], ids=["pep691-json", "pep503-html-only"])
def test_catalogue_reads_the_json_form_and_falls_back_to_html(index: Path, offer_json: bool) -> None:
    from envkit.engines.repodata import read_pip

    with ChannelServer(index) as srv:
        srv.state.offer_json = offer_json
        catalogue = read_pip(f"{srv.url}/whl", variants=("cu130", "cu126", "cpu"))
        want = PEP691_JSON if offer_json else LEGACY_HTML
        for variant in ("cu130", "cu126"):
            for project in ("torch", "torchvision", "torchaudio"):
                assert srv.content_types(f"/whl/{variant}/{project}/") == [want]
        assert srv.hits("/whl/cpu/torch/") == [("GET", "/whl/cpu/torch/", 404)]  # a missing variant is no error
    got = sorted((r.name, r.version, r.build, r.subdir) for r in catalogue.records)
    assert got == sorted((name, version, variant, variant) for variant in ("cu130", "cu126") for name, version in
                         (("torch", "2.14.0"), ("torchvision", "0.29.0"), ("torchaudio", "2.11.0")))
    assert catalogue.source.startswith("127.0.0.1:")


@pytest.mark.slow
def test_pip_installs_from_the_json_form(index: Path, tmp_path: Path) -> None:
    """pip validates PEP 691 pages (api-version, hashes): the JSON the test index serves is what pip accepts."""
    with ChannelServer(index) as srv:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                               "--no-deps", "--index-url", f"{srv.url}/whl/cu130", "-d", str(tmp_path / "got"),
                               "torch==2.14.0+cu130"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert srv.content_types("/whl/cu130/torch/") == [PEP691_JSON]
    assert [p.name for p in (tmp_path / "got").iterdir()] == ["torch-2.14.0+cu130-py3-none-any.whl"]


def test_a_broken_json_page_is_an_unread_page_not_a_crash(index: Path) -> None:
    """A mirror whose JSON page is garbage (here: corrupted in flight) loses that page only."""
    from envkit.engines.repodata import read_pip

    with ChannelServer(index) as srv:
        srv.state.faults["/whl/cu130/torch/"] = "corrupt"
        catalogue = read_pip(f"{srv.url}/whl", variants=("cu130", "cu126"))
        assert srv.content_types("/whl/cu130/torch/") == [PEP691_JSON]
    torches = sorted(r.subdir for r in catalogue.records if r.name == "torch")
    assert torches == ["cu126"]
