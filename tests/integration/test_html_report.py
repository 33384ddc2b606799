"""`envkit verify --model ... --html FILE` opened in headless Chromium (Debian's `chromium`): the page renders
with its charts, not blank. Skips with the reason where chromium is not installed (.ci/apt-packages)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pytest

from helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) with the standard library."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytearray] = []
    prev = bytearray(stride)
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    pixels = [tuple(row[x * channels:x * channels + 3]) for row in rows[::4] for x in range(0, width, 4)]
    return width, height, pixels


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_html_report_renders_in_chromium(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    page = tmp_path / "report.html"
    code, _out, _err = run_cli(capsys, "verify", "--python", sys.executable, "--model",
                               str(ROOT / "examples/tiny_eps_norm.py:small"), "--steps", "8", "--html", str(page))
    assert code == 4 and page.is_file()
    shot = tmp_path / "shot.png"
    subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1000,1400",
                    page.as_uri()], check=True, capture_output=True, timeout=120)
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (1000, 1400)
    counts = Counter(pixels)
    background, most = counts.most_common(1)[0]
    assert most / len(pixels) < 0.9, f"the screenshot is {most / len(pixels):.0%} one colour {background}: blank"
    assert len(counts) > 30  # text, charts and banners, not a flat page
    # the SKIPPED banner (#a86b00) and the fp16 curve colour (#c7362f) were painted
    assert any(abs(r - 0xa8) < 6 and abs(g - 0x6b) < 6 and b < 10 for r, g, b in counts)
    assert any(abs(r - 0xc7) < 8 and abs(g - 0x36) < 8 and abs(b - 0x2f) < 8 for r, g, b in counts)
