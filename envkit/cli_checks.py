"""Validators of the options shared by cli.py and the verbs kept in their own modules (cli_doctor,
cli_lock): here, below all of them, so no verb module imports envkit.cli (no import cycle)."""

from __future__ import annotations

import re

import click

_CUDA_RE = re.compile(r"^\d{1,2}\.\d{1,2}\Z")
_DRIVER_RE = re.compile(r"^\d{3,4}(\.\d{1,3}){1,2}\Z")
_CC_RE = re.compile(r"^\d{1,2}\.\d\Z")
_PY_RE = re.compile(r"^3\.\d{1,2}t?\Z")

def _check_cuda(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or value in ("auto", "cpu") or _CUDA_RE.match(value):
        return value
    raise click.BadParameter(f"{value!r}: use auto, cpu or a CUDA version like 12.4 or 13.0")


def _check_driver(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or _DRIVER_RE.match(value):
        return value
    raise click.BadParameter(f"{value!r}: use an NVIDIA driver version like 550.54.15 or 580.65.06")


def _check_cc(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    for item in value:
        if not _CC_RE.match(item) or not (3 <= int(item.split(".")[0]) <= 15):
            raise click.BadParameter(f"{item!r}: use a compute capability like 8.6, 9.0 or 12.0 (one per GPU)")
    return value


def _check_python(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is None or _PY_RE.match(value):
        return value
    raise click.BadParameter(f"{value!r}: use a Python version like 3.11 or 3.12")
