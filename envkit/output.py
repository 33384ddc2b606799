"""Human (rich) and --json rendering of the models. Only cli.py calls these."""

from __future__ import annotations

import json
import sys
from typing import Any

from envkit.models import DetectResult, Machine, Selection


def machine_json(machine: Machine) -> dict[str, Any]:
    drv = machine.driver
    return {
        "driver": None if drv is None else {"version": drv.version, "cuda": drv.cuda, "source": drv.source},
        "gpus": [
            {"index": g.index, "name": g.name, "compute_capability": g.compute_capability,
             "memory_mib": g.memory_mib, "uuid": g.uuid}
            for g in machine.gpus
        ],
        "gpus_hidden": machine.gpus_hidden,
        "cuda_override": machine.cuda_override,
        "simulated": machine.simulated,
        "notes": list(machine.notes),
    }


def detect_json(result: DetectResult) -> dict[str, Any]:
    data = machine_json(result.machine)
    data["selection"] = None if result.selection is None else result.selection.to_json()
    data["error"] = result.error
    return data


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False)


def esc(text: str) -> str:
    """Escape user- and data-supplied text for rich markup (specs like pytorch[build=cuda*])."""
    from rich.markup import escape

    return escape(text)


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def print_detect(result: DetectResult) -> None:
    from rich.table import Table

    con = console()
    m = result.machine
    if m.driver is None:
        con.print("[bold]Driver:[/] none found" + (" (simulated)" if m.simulated else ""))
    else:
        con.print(f"[bold]Driver:[/] {m.driver.version}  [bold]CUDA (driver max):[/] {m.driver.cuda or 'unknown'}"
                  f"  [dim]source: {m.driver.source}[/]")
    if m.cuda_override is not None:
        con.print(f"[bold]CUDA override:[/] {m.cuda_override or '(empty: no CUDA)'}")
    if m.gpus:
        table = Table(title=None, show_edge=False)
        for col in ("#", "GPU", "compute capability", "memory (MiB)", "UUID"):
            table.add_column(col)
        for g in m.gpus:
            table.add_row(str(g.index), g.name, g.compute_capability, str(g.memory_mib or "?"), g.uuid or "")
        con.print(table)
    elif m.gpus_hidden:
        con.print("[yellow]GPUs: hidden by CUDA_VISIBLE_DEVICES[/]")
    elif m.driver is not None and not m.gpus_known:
        con.print("[yellow]GPUs: unknown (NVML and nvidia-smi unavailable)[/]")
    for note in m.notes:
        con.print(f"[yellow]note:[/] {esc(note)}")
    if result.selection is not None:
        print_selection(result.selection, con)


def print_selection(sel: Selection, con: Any | None = None) -> None:
    con = con or console()
    build = f"CUDA {sel.cuda} ({sel.variant})" if sel.cuda else "[yellow]CPU only[/]"
    con.print(f"[bold green]Selected:[/] torch {sel.torch} · {build} · python {sel.python} · flavor {sel.flavor}")
    con.print(esc("  conda: " + " ".join(sel.specs) + f"   channels: {', '.join(sel.channels)}"))
    if sel.pip_specs:
        con.print(esc("  pip:   " + " ".join(sel.pip_specs) + f"   index: {sel.pip_index_url}"))
    con.print("[bold]Why:[/]")
    for reason in sel.reasons:
        con.print(f"  - {esc(reason)}")
    if not sel.is_gpu:
        con.print("[bold yellow]Notice:[/] this is a CPU build; no GPU will be used.")


def error(message: str, hint: str | None) -> None:
    con = console(stderr=True)
    con.print(f"[bold red]error:[/] {esc(message)}")
    if hint:
        con.print(f"[bold]fix:[/] {esc(hint)}")


def plain(text: str = "", err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")
    stream.flush()


_STATUS_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}
_OUTCOME_STYLE = {"PASS": "bold green", "FAIL": "bold red", "SKIPPED": "bold yellow"}


def print_verify(report: Any) -> None:
    from rich.table import Table

    con = console()
    table = Table(show_edge=False, expand=False)
    for col in ("check", "GPU", "status", "time", "what it found"):
        table.add_column(col, overflow="fold")
    for c in report.checks:
        style = _STATUS_STYLE.get(c.get("status", ""), "")
        table.add_row(c["name"], "" if c.get("device") is None else str(c["device"]),
                      f"[{style}]{c['status'].upper()}[/]", f"{c.get('duration_s', 0):.2f}s", esc(c["explanation"]))
    con.print(table)
    style = _OUTCOME_STYLE[report.outcome]
    con.print(f"[{style}]{report.outcome}[/]: {esc(report.summary)}")
    if report.outcome == "SKIPPED":
        con.print("[bold yellow]!!! SKIPPED is not PASS: no check ran on a GPU. "
                  "Run on a machine with a visible NVIDIA GPU to prove this environment. !!![/]")
