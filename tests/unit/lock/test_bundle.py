"""After an install from a bundle, records name the archive's original URL (restore_urls)."""

from __future__ import annotations

import json
from pathlib import Path

from envkit.lock.bundle import Bundle, BundleFile, restore_urls

# the shape rattler writes (serde_json, pretty, two spaces), with the archive's bundle URL
RECORD = """{
  "build": "h0_0",
  "name": "zlib",
  "url": "%s",
  "version": "1.3",
  "files": [
    "lib/libz.so"
  ],
  "paths_data": {
    "paths": []
  }
}"""


def _installed(tmp_path: Path, text: str) -> tuple[Bundle, str, Path]:
    """A bundle of one archive, and an env whose record of it holds `text` (%s: the bundle URL)."""
    item = BundleFile("conda/linux-64/zlib-1.3-h0_0.conda", "0" * 64, 1,
                      "https://conda.anaconda.org/conda-forge/linux-64/zlib-1.3-h0_0.conda", "conda")
    bundle = Bundle(tmp_path / "bundle", "t", "linux-64", (item,))
    local = (bundle.root / item.path).absolute().as_uri()
    meta = tmp_path / "env" / "conda-meta"
    meta.mkdir(parents=True)
    record = meta / "zlib-1.3-h0_0.json"
    record.write_text(text.replace("%s", local), encoding="utf-8")
    return bundle, local, record


def test_only_the_url_member_changes(tmp_path: Path) -> None:
    bundle, _local, record = _installed(tmp_path, RECORD)
    other = record.parent / "python-3.12-0.json"  # not from the bundle: untouched
    other.write_text(RECORD % "https://example.org/python.conda", encoding="utf-8")
    restore_urls(tmp_path / "env", bundle)
    assert record.read_text(encoding="utf-8") == RECORD % bundle.files[0].url  # byte for byte, but the URL
    assert other.read_text(encoding="utf-8") == RECORD % "https://example.org/python.conda"


def test_an_unexpected_layout_is_rewritten_from_the_parsed_record(tmp_path: Path) -> None:
    # compact separators: the member is spelt `"url":"..."`, so the text swap does not apply
    bundle, local, record = _installed(tmp_path, '{"name":"zlib","url":"%s","note":"url: %s"}')
    restore_urls(tmp_path / "env", bundle)
    data = json.loads(record.read_text(encoding="utf-8"))
    assert data["url"] == bundle.files[0].url and data["note"] == f"url: {local}"
