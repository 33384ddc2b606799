#!/usr/bin/env python3
"""GPU evidence for `envkit create` (issue #4), run on the device machine from the repo root.

Builds the offline test bed whose stand-in `python` runs this machine's own interpreter with its
site-packages visible (the image's real torch + CUDA), serves it on 127.0.0.1 as a mirror,
runs `envkit create` with --cuda auto (real NVML / __cuda detection), which verifies at the end,
then the full `envkit verify`. Writes the JSON outputs and a log to $OUT (default ./gpu-out).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> int:
    from testbed.channel import PY, build_testbed, test_venv_site
    from testbed.pipindex import build_pip_indexes
    from testbed.server import ChannelServer

    out = Path(os.environ.get("OUT", "gpu-out"))
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="envkit-gpu-"))
    # this interpreter's site-packages (the image's torch lives in a venv) become visible in the env
    bed = build_testbed(work / "bed", host_site=test_venv_site())
    build_pip_indexes(bed.root)
    env = dict(os.environ, ENVKIT_HOME=str(work / "envkit"), ENVKIT_CACHE_DIR=str(work / "cache"),
               PIP_CONFIG_FILE=os.devnull)
    log = []
    with ChannelServer(bed.root) as srv:
        for name, argv in (
            ("create-h200", ["create", "gpuenv", "--spec", "minimal", "--python", PY, "--mirror", srv.url, "--json"]),
            ("verify-created-env-h200", ["verify", "gpuenv", "--json"]),
            # the README's main job, with the spec's pip section served by the local index
            ("create-dl_train-h200", ["create", "dl_train", "--cuda", "auto", "--python", PY, "--mirror", srv.url,
                                      "--json"]),
            # day two (issue 15): the static checks on the env just made, with the real driver and GPU
            ("doctor-dl_train-h200", ["doctor", "dl_train", "--json"]),
        ):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "envkit", *argv], env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            log.append(f"$ envkit {' '.join(argv)}\nrc={done.returncode} wall={wall:.2f}s\n{done.stderr[-3000:]}\n")
            try:
                data = json.loads(done.stdout)
                data["_wall_s"] = round(wall, 2)
                data["_rc"] = done.returncode
                (out / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
            except ValueError:
                log.append(f"(stdout was not JSON)\n{done.stdout[-3000:]}\n")
    prefix = work / "envkit" / "envs" / "gpuenv"
    meta = sorted(p.name for p in (prefix / "conda-meta").glob("*.json")) if prefix.exists() else []
    log.append("conda-meta: " + ", ".join(meta) + "\n")
    (out / "create-verify-h200.log").write_text("\n".join(log))
    print("\n".join(log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
