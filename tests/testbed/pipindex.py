"""A small "simple" index of test-built wheels, laid out like a mirror: <root>/pypi/simple/ for
PyPI-style packages and <root>/whl/<variant>/ for PyTorch-index-style torch wheels. Every page is
written twice: PEP 503 HTML (index.html) and PEP 691 JSON (index.json); server.py picks one by the
request's Accept header, as PyPI and download.pytorch.org do."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(out_dir: Path, name: str, version: str, body: str = "OK = True\n",
                requires: tuple[str, ...] = ()) -> Path:
    """A minimal valid py3-none-any wheel with METADATA (`requires`: its Requires-Dist lines), WHEEL and RECORD."""
    dist = name.replace("-", "_")
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"{dist}-{version}-py3-none-any.whl"
    files = {
        f"{dist}/__init__.py": body.encode(),
        f"{dist}-{version}.dist-info/METADATA": (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                                 + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{dist}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: envkit-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{p},{_record_hash(c)},{len(c)}\n" for p, c in files.items())
    record += f"{dist}-{version}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, content in files.items():
            zf.writestr(path, content)
        zf.writestr(f"{dist}-{version}.dist-info/RECORD", record)
    return wheel


PEP691_JSON = "application/vnd.pypi.simple.v1+json"


def _json_page(data: dict[str, object]) -> str:
    # PEP 691: every response carries meta.api-version; 1.0 is the version PEP 691 defines
    return json.dumps({"meta": {"api-version": "1.0"}, **data}, indent=1) + "\n"


def write_simple_index(index_root: Path, wheels: list[Path]) -> None:
    """<index_root>/<project>/index.html with links carrying #sha256= (PEP 503), and index.json (PEP 691)."""
    projects: dict[str, list[Path]] = {}
    for wheel in wheels:
        projects.setdefault(wheel.name.split("-")[0].replace("_", "-").lower(), []).append(wheel)
    index_root.mkdir(parents=True, exist_ok=True)
    links = []
    for project, files in sorted(projects.items()):
        pdir = index_root / project
        pdir.mkdir(parents=True, exist_ok=True)
        rows = []
        entries = []
        for wheel in files:
            target = pdir / wheel.name
            target.write_bytes(wheel.read_bytes())
            digest = hashlib.sha256(target.read_bytes()).hexdigest()
            rows.append(f'<a href="{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a><br>')
            # PEP 691 project detail: url may be relative to the page, like the HTML href
            entries.append({"filename": wheel.name, "url": wheel.name, "hashes": {"sha256": digest}})
        (pdir / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(rows) + "\n</body></html>\n")
        (pdir / "index.json").write_text(_json_page({"name": project, "files": entries}))
        links.append(f'<a href="{project}/">{project}</a><br>')
    (index_root / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (index_root / "index.json").write_text(_json_page({"projects": [{"name": p} for p in sorted(projects)]}))


def build_pip_indexes(root: Path) -> None:
    """PyPI-style packages (transformers, datasets, tiny stand-ins) and PyTorch-index torch wheels."""
    work = root / "_wheels"
    pypi = [build_wheel(work, "transformers", "4.99.0"), build_wheel(work, "datasets", "3.99.0"),
            build_wheel(work, "accelerate", "1.99.0")]
    write_simple_index(root / "pypi" / "simple", pypi)
    for variant in ("cu130", "cu126", "cpu"):
        wheels = [build_wheel(work / variant, "torch", f"2.14.0+{variant}", "STANDIN = True\n"),
                  build_wheel(work / variant, "torchvision", f"0.29.0+{variant}", "STANDIN = True\n"),
                  build_wheel(work / variant, "torchaudio", f"2.11.0+{variant}", "STANDIN = True\n")]
        write_simple_index(root / "whl" / variant, wheels)
