"""A verify report as one self-contained HTML file: inline SVG charts and CSS, nothing fetched.

`verify` shows its checks and the speed/memory/TFLOP/s figures; `verify --model` adds the loss curve per
precision, the GradScaler scale, step-time and peak-memory bars and the recommendation. Every value that
comes from the report reaches the page through jinja2's autoescape or `_e` (a module path is the user's text).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envkit.fsutil import atomic_write_text
from envkit.resources import data_dir
from envkit.secrets import redact

if TYPE_CHECKING:
    from envkit.verify.report import VerifyReport

TEMPLATE = "verify-report.html.j2"
COLOURS = {"fp32": "#1f5fa8", "fp16": "#c7362f", "bf16": "#2e8b3d", "tf32": "#7a4fb0", "fp8": "#d08400"}
W, H, PAD = 640, 260, 48
# identical curves (bf16 == fp32 on a well-behaved model) must stay visible: wide and pale under narrow and dashed
STROKES = ('stroke-width="5" stroke-opacity="0.45"', 'stroke-width="2"', 'stroke-width="1.5" stroke-dasharray="6 3"')


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    if hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / n for i in range(n + 1)]


def line_chart(series: dict[str, Sequence[float | None]], title: str, y_label: str, log2: bool = False) -> str:
    """Polylines per series (a None breaks the line and is marked under the axis as a non-finite step)."""
    points = [v for vals in series.values() for v in vals if v is not None and (v > 0 or not log2)]
    if not points:
        return f'<p class="empty">{_e(title)}: no finite values to draw</p>'
    tf = (lambda v: math.log2(v)) if log2 else (lambda v: v)
    lo, hi = min(tf(v) for v in points), max(tf(v) for v in points)
    if hi - lo < 1e-12:
        lo, hi = lo - 1, hi + 1
    steps = max(len(v) for v in series.values())
    x_of = (lambda i: PAD + (W - 2 * PAD) * (i / max(1, steps - 1)))
    y_of = (lambda v: H - PAD - (H - 2 * PAD) * ((tf(v) - lo) / (hi - lo)))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" aria-label="{_e(title)}">',
             f'<rect x="0" y="0" width="{W}" height="{H}" fill="#fff"/>',
             f'<text x="{W / 2}" y="18" text-anchor="middle" class="title">{_e(title)}</text>',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" class="axis"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" class="axis"/>']
    for t in _ticks(lo, hi):
        y = H - PAD - (H - 2 * PAD) * ((t - lo) / (hi - lo))
        label = f"2^{t:.0f}" if log2 else f"{t:.3g}"
        parts.append(f'<line x1="{PAD}" y1="{y:.1f}" x2="{W - PAD}" y2="{y:.1f}" class="grid"/>'
                     f'<text x="{PAD - 4}" y="{y + 4:.1f}" text-anchor="end" class="tick">{_e(label)}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle" class="tick">step (0 to {steps - 1})</text>'
                 f'<text x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" text-anchor="middle" '
                 f'class="tick">{_e(y_label)}</text>')
    for k, (name, vals) in enumerate(series.items()):
        colour = COLOURS.get(name, "#555")
        run: list[str] = []
        for i, v in enumerate(list(vals) + [None]):
            if v is None or (log2 and v <= 0):
                if len(run) > 1:
                    parts.append(f'<polyline fill="none" stroke="{colour}" {STROKES[k % len(STROKES)]} '
                                 f'points="{" ".join(run)}"/>')
                elif len(run) == 1:
                    cx, cy = run[0].split(",")
                    parts.append(f'<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>')
                run = []
                if i < len(vals):
                    parts.append(f'<line x1="{x_of(i):.1f}" y1="{H - PAD + 4 + 5 * k}" x2="{x_of(i):.1f}" '
                                 f'y2="{H - PAD + 8 + 5 * k}" stroke="{colour}" stroke-width="2"/>')
            else:
                run.append(f"{x_of(i):.1f},{y_of(v):.1f}")
        lx = W - PAD - 70
        parts.append(f'<rect x="{lx}" y="{28 + 16 * k}" width="12" height="4" fill="{colour}"/>'
                     f'<text x="{lx + 16}" y="{34 + 16 * k}" class="tick">{_e(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(bars: dict[str, float | None], title: str, unit: str) -> str:
    """Horizontal bars, one per label; a missing value is written, not drawn."""
    shown = {k: v for k, v in bars.items() if v is not None}
    if not shown:
        return f'<p class="empty">{_e(title)}: not measured here</p>'
    top = max(shown.values()) or 1.0
    height = 40 + 28 * len(bars)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" role="img" '
             f'aria-label="{_e(title)}"><rect x="0" y="0" width="{W}" height="{height}" fill="#fff"/>'
             f'<text x="{W / 2}" y="18" text-anchor="middle" class="title">{_e(title)}</text>']
    for i, (name, value) in enumerate(bars.items()):
        y = 32 + 28 * i
        parts.append(f'<text x="{PAD + 40}" y="{y + 15}" text-anchor="end" class="tick">{_e(name)}</text>')
        if value is None:
            parts.append(f'<text x="{PAD + 48}" y="{y + 15}" class="tick">not measured</text>')
            continue
        width = max(2.0, (W - 2 * PAD - 140) * value / top)
        parts.append(f'<rect x="{PAD + 48}" y="{y}" width="{width:.1f}" height="20" '
                     f'fill="{COLOURS.get(name, "#555")}"/>'
                     f'<text x="{PAD + 54 + width:.1f}" y="{y + 15}" class="tick">{value:.4g} {_e(unit)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _model_charts(data: dict[str, Any]) -> list[str]:
    precisions = {k: v for k, v in (data.get("precisions") or {}).items() if "losses" in v}
    charts = [line_chart({k: v["losses"] for k, v in precisions.items()}, "loss per step (same weights, same "
                         "batches)", "loss")]
    scales = {k: v["scales"] for k, v in precisions.items() if v.get("scales")}
    if scales:
        charts.append(line_chart(scales, "GradScaler scale after each step", "scale (log2)", log2=True))
    charts.append(bar_chart({k: v.get("step_ms") for k, v in precisions.items()}, "median step time", "ms"))
    charts.append(bar_chart({k: v.get("peak_mem_mib") for k, v in precisions.items()}, "peak memory allocated",
                            "MiB"))
    found = (data.get("analysis") or {}).get("max_batch") or {}
    if found and "skipped" not in found:
        charts.append(bar_chart({k: v.get("batch") for k, v in found.items()}, "largest batch (--max-batch)",
                                "samples"))
    return charts


def _env_charts(checks: Sequence[dict[str, Any]]) -> list[str]:
    by_name = {c["name"]: c.get("values") or {} for c in checks}
    charts = []
    speed = by_name.get("speed") or {}
    if speed.get("fp32_ms"):
        charts.append(bar_chart({"fp32": speed.get("fp32_ms"), "fp16": speed.get("amp_fp16_ms")},
                                f"AMP step time ({speed.get('workload', '')})", "ms"))
    memory = by_name.get("memory") or {}
    if memory.get("fp32_peak_mib"):
        charts.append(bar_chart({"fp32": memory.get("fp32_peak_mib"), "fp16": memory.get("amp_fp16_peak_mib")},
                                f"peak memory ({memory.get('workload', '')})", "MiB"))
    tflops = dict((by_name.get("matmul_tflops") or {}).get("tflops") or {})
    fp8 = by_name.get("fp8") or {}
    for recipe, row in (fp8.get("results") or {}).items():
        if isinstance(row, dict) and row.get("tflops"):
            tflops[f"fp8 {recipe}"] = row["tflops"]
    if tflops:
        charts.append(bar_chart(tflops, "matmul TFLOP/s", "TFLOP/s"))
    return charts


def _page(**context: Any) -> str:
    import jinja2
    from markupsafe import Markup  # jinja2's own dependency: these charts are built here, already escaped

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
                             autoescape=True)  # optional report fields render empty
    context["charts"] = [Markup(c) for c in context["charts"]]
    context.setdefault("fleet", None)
    context.setdefault("analysis", None)
    return redact(env.get_template(TEMPLATE).render(**context))


def render_html(report: VerifyReport) -> str:
    data = report.to_json()
    analysis = data.get("analysis")
    charts = _model_charts(data) if analysis else _env_charts(report.checks)
    return _page(report=data, outcome=report.outcome, summary=report.summary, checks=report.checks,
                 analysis=analysis, charts=charts, title="envkit verify --model" if analysis else "envkit verify")


def render_fleet_html(fleet: dict[str, Any]) -> str:
    """`fleet verify`: one row per node and check, AMP speed-up and TFLOP/s per node (the slowest named)."""
    nodes = fleet.get("nodes") or []
    names = sorted({name for n in nodes for name in (n.get("checks") or {})})
    charts = [bar_chart({str(n["node"]): n.get("speedup") for n in nodes}, "AMP speed-up per node", "x"),
              bar_chart({str(n["node"]): n.get("tflops") for n in nodes}, "matmul TFLOP/s per node", "TFLOP/s")]
    return _page(report={"time": "", "envkit_version": "", "torch": None}, outcome=fleet.get("outcome", "FAIL"),
                 summary=fleet.get("summary", ""), checks=[], charts=charts, title="envkit fleet verify",
                 fleet={"nodes": nodes, "check_names": names, "slowest": fleet.get("slowest"),
                        "nccl": fleet.get("nccl")})


def write_fleet_html(fleet: dict[str, Any], path: Path) -> None:
    atomic_write_text(path, render_fleet_html(fleet))


def write_html(report: VerifyReport, path: Path) -> None:
    atomic_write_text(path, render_html(report))
