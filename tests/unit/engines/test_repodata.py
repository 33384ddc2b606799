"""What channels and wheel indexes publish, as read: PEP 691 JSON and PEP 503 HTML project pages."""

from __future__ import annotations

import json

import pytest

from envkit.engines.repodata import parse_project_page


def test_pep691_json_and_pep503_html_pages() -> None:
    body = json.dumps({"meta": {"api-version": "1.1"}, "files": [{"filename": "torch-2.14.0+cu126-cp312-cp312-"
                                                                   "manylinux_2_28_x86_64.whl"}]})
    assert parse_project_page("application/vnd.pypi.simple.v1+json", body)[0].startswith("torch-2.14.0+cu126")
    html = '<a href="../../torch-2.14.0%2Bcu126-cp312-cp312-linux_x86_64.whl#sha256=ab">x</a>'
    assert parse_project_page("text/html", html) == ["torch-2.14.0+cu126-cp312-cp312-linux_x86_64.whl"]
    # PEP 691: an unknown major api-version is refused, and a page that is not JSON is an error, not a crash
    with pytest.raises(ValueError, match="api-version 2.0"):
        parse_project_page("application/vnd.pypi.simple.v2+json", json.dumps({"meta": {"api-version": "2.0"}}))
    with pytest.raises(ValueError):
        parse_project_page("application/vnd.pypi.simple.v1+json", "<html>captive portal</html>")
