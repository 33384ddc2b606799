"""The HTML report: self-contained (nothing fetched), every report value escaped, the charts each kind of
report promises (curves, scale, bars for --model; speed/memory/TFLOP/s bars for the env check)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

from envkit.verify.html import bar_chart, line_chart, render_html, write_html
from envkit.verify.report import build_model_report, build_report
from helpers import FIXTURES

REC = FIXTURES / "verify"


def model_report(name: str = "tiny-eps-norm"):  # type: ignore[no-untyped-def]
    return build_model_report(json.loads((REC / f"model-{name}-cpu.json").read_text()), None, "/opt/env/bin/python",
                              None)


def test_model_report_has_curves_scale_bars_verdict_and_code() -> None:
    page = render_html(model_report())
    assert page.count("<svg") == 3  # loss, scale, step time; memory is written "not measured" on the CPU
    for mode in ("fp32", "fp16", "bf16"):
        assert re.search(rf'<text [^>]*class="tick">{mode}</text>', page)
    assert "First module whose fp16 output overflows: <code>norm</code> (TinyEpsRMSNorm)" in page
    assert "torch.autocast(&#34;cuda&#34;, dtype=torch.bfloat16)" in page  # escaped, shown as code
    assert 'class="verdict SKIPPED"' in page and "CPU mode" in page
    assert "peak memory allocated: not measured here" in page


def test_nothing_is_fetched() -> None:
    page = render_html(model_report("stable-mlp"))
    refs = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page) + re.findall(r"url\(([^)]*)\)", page)
    assert refs == [] and "<script" not in page and "@import" not in page
    assert set(re.findall(r"https?://[^\s\"']+", page)) <= {"http://www.w3.org/2000/svg"}


def test_report_values_are_escaped() -> None:
    data = json.loads((REC / "model-tiny-eps-norm-cpu.json").read_text())
    evil = "<script>alert(1)</script>"
    for probe in data["probe"]["fp16"]:
        if probe["path"] == "norm":
            probe["class"] = evil
    data["model"] = evil
    page = render_html(build_model_report(data, None, "/opt/env/bin/python", None))
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_env_verify_report_draws_speed_memory_and_tflops(tmp_path: Path) -> None:
    payload = json.loads((REC / "pass-h200.json").read_text())
    report = build_report(copy.deepcopy(payload), None, "python3", None)
    out = tmp_path / "verify.html"
    write_html(report, out)
    page = out.read_text()
    assert page.count("<svg") == 3 and "matmul TFLOP/s" in page and "NVIDIA H200" in page
    assert 'class="verdict PASS"' in page and "speed" in page


def test_a_non_finite_step_breaks_the_line_and_is_marked() -> None:
    svg = line_chart({"fp16": [1.0, 0.9, None, 0.8, 0.7]}, "loss", "loss")
    assert svg.count("<polyline") == 2 and svg.count('stroke="#c7362f" stroke-width="2"/>') == 1
    assert "no finite values" in line_chart({"fp16": [None, None]}, "loss", "loss")


def test_bars_scale_to_the_largest() -> None:
    svg = bar_chart({"fp32": 10.0, "fp16": 5.0, "bf16": None}, "step time", "ms")
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="\d+" width="([\d.]+)" height="20"', svg)]
    assert len(widths) == 2 and abs(widths[0] - 2 * widths[1]) < 0.2 and "not measured" in svg


def test_fleet_report_has_a_row_per_node_and_the_slowest_named(tmp_path: Path) -> None:
    from envkit.fleet.verify import FleetVerify, NodeVerify
    from envkit.verify.html import write_fleet_html

    nodes = (NodeVerify("n1", "PASS", "AMP works", {"speed": "PASS", "training": "PASS"}, 8.6, 0.51, 779.0),
             NodeVerify("n2<b>", "FAIL", "training: loss is not finite", {"speed": "WARN", "training": "FAIL"},
                        1.1, 0.9, 120.0))
    result = FleetVerify(nodes, None, "FAIL", "FAIL on n2<b>", "n2<b>", 12.0)
    out = tmp_path / "fleet.html"
    write_fleet_html(result.to_json(), out)
    page = out.read_text()
    assert page.count("<svg") == 2 and "AMP speed-up per node" in page and "matmul TFLOP/s per node" in page
    assert "<td>n2&lt;b&gt; (slowest)</td>" in page and "n2<b>" not in page
    assert '<td class="fail">FAIL</td>' in page and '<td class="warn">WARN</td>' in page
    assert 'class="verdict FAIL"' in page and "8.60×" in page
