"""Detection: an ordered list of sources, each a pure parser behind a thin read (uv's accelerator.rs).

Order (first answer wins, later sources only fill what is still unknown):
1. explicit overrides: --driver-version / --compute-capability replace the hardware query
   completely; --cuda X.Y and CONDA_OVERRIDE_CUDA (empty = no CUDA) set the CUDA level;
2. NVML through nvidia-ml-py: driver, CUDA the driver reports (nvmlSystemGetCudaDriverVersion_v2,
   "major*1000 + minor*10"), and per GPU index, name, UUID, compute capability, memory;
3. /proc/driver/nvidia/version, then /sys/module/nvidia/version (driver only; the CUDA level then
   follows from NVIDIA's Table 3, see compat/data.yaml `driver_cuda`);
4. nvidia-smi (driver, CUDA, GPUs with compute_cap).
No NVIDIA driver is a normal result (driver None), not an error. CUDA_VISIBLE_DEVICES is applied to
the GPU list: indices or UUIDs; empty or -1 hides every GPU ("hidden", not "no driver").

May import: compat/ and the ground floor.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from envkit.compat import load
from envkit.detect import sources
from envkit.errors import UsageError
from envkit.models import Driver, Gpu, Machine


def detect(*, driver_version: str | None = None, compute_capabilities: Sequence[str] = (),
           cuda: str | None = None, environ: Mapping[str, str] | None = None,
           root: Path = Path("/")) -> Machine:
    """Inspect this machine (or build a simulated one) and return what was found."""
    env = os.environ if environ is None else environ
    override = _cuda_override(cuda, env)
    if driver_version is not None or compute_capabilities:
        ignored = None
        if driver_version is not None and override is not None:
            # precedence: flags > ENVKIT_* > CONDA_OVERRIDE_CUDA > detection; --driver-version is a flag
            ignored, override = override, None
        machine = _simulated(driver_version, compute_capabilities, override)
        if ignored is not None:
            machine = replace(machine, notes=machine.notes + (
                f"CONDA_OVERRIDE_CUDA={ignored!r} ignored: --driver-version {driver_version} was given "
                "(command-line flags win over the environment)",))
        return machine

    found = sources._Partial()
    for source in (sources.from_nvml, sources.from_driver_files, sources.from_nvidia_smi):
        part = source(root)
        found.notes.extend(part.notes)
        if found.driver is None and part.driver is not None:
            found.driver = part.driver
        if found.gpus is None and part.gpus is not None:
            found.gpus = part.gpus
        if found.driver is not None and found.gpus is not None:
            break
    if found.driver is not None and found.driver.cuda is None:
        derived = load().cuda_for_driver(found.driver.version)
        found.driver = replace(found.driver, cuda=derived)
        if derived:
            found.notes.append(f"CUDA {derived} derived from driver {found.driver.version} (NVIDIA Table 3)")
    gpus, hidden, note = apply_visible_devices(found.gpus or [], env.get("CUDA_VISIBLE_DEVICES"))
    if note:
        found.notes.append(note)
    return Machine(
        driver=found.driver,
        gpus=tuple(gpus),
        gpus_hidden=hidden and found.driver is not None,
        gpus_known=found.gpus is not None,
        cuda_override=override,
        notes=tuple(found.notes),
    )


def _cuda_override(cuda: str | None, env: Mapping[str, str]) -> str | None:
    """--cuda X.Y wins; otherwise CONDA_OVERRIDE_CUDA (stripped; empty means no CUDA, as in conda)."""
    if cuda not in (None, "auto"):
        return None  # --cuda cpu / X.Y are handled by selection, not by detection
    value = env.get("CONDA_OVERRIDE_CUDA")
    if value is None:
        return None
    value = value.strip()
    # conda reads it as the __cuda version (conda docs, "Managing virtual packages"): X.Y, or empty
    if value and not re.fullmatch(r"\d{1,2}(\.\d{1,2}){0,2}", value, re.ASCII):
        raise UsageError(f"CONDA_OVERRIDE_CUDA={value[:40]!r} is not a CUDA version",
                         "set it to the CUDA version to plan for (e.g. CONDA_OVERRIDE_CUDA=12.4), to an empty "
                         "string for no CUDA, or unset it")
    return value


def _simulated(driver_version: str | None, ccs: Sequence[str], override: str | None) -> Machine:
    driver = None
    if driver_version is not None:
        driver = Driver(driver_version, load().cuda_for_driver(driver_version), "simulated")
    gpus = tuple(Gpu(i, f"simulated GPU {i}", cc) for i, cc in enumerate(ccs))
    return Machine(driver=driver, gpus=gpus, gpus_known=bool(gpus) or driver is None, cuda_override=override,
                   simulated=True, notes=("simulated machine: the hardware was not queried",))


def apply_visible_devices(gpus: Sequence[Gpu], value: str | None) -> tuple[list[Gpu], bool, str | None]:
    """Filter GPUs as the CUDA runtime does: stop at the first invalid entry; '' or -1 hides all.

    Returns (visible GPUs, hidden-by-variable, note). Visible GPUs keep their NVML index.
    """
    if value is None:
        return list(gpus), False, None
    entries = [e.strip() for e in value.split(",")]
    visible: list[Gpu] = []
    for entry in entries:
        match = None
        if entry.isascii() and entry.lstrip("-").isdigit():  # ASCII: int() also reads Arabic-Indic digits
            idx = int(entry)
            if idx < 0:
                break
            match = next((g for g in gpus if g.index == idx), None)
        elif entry.startswith(("GPU-", "MIG-")):
            match = next((g for g in gpus if g.uuid and g.uuid.startswith(entry)), None)
        if match is None or match in visible:
            break
        visible.append(match)
    if not visible and gpus:
        return [], True, f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU"
    if len(visible) < len(gpus):
        return visible, False, f"CUDA_VISIBLE_DEVICES={value!r}: {len(visible)} of {len(gpus)} GPUs visible"
    return visible, False, None
