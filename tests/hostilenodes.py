"""A node's envkit faked at the command seam (ENVKIT_FLEET_ENVKIT), for the fleet tests of hostile nodes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

FAKE_NODE = r'''
"""A node's envkit, faked at the command seam (ENVKIT_FLEET_ENVKIT): per node (SLURMD_NODENAME) one of the ways
a broken or hostile node misbehaves; "good" runs the real envkit."""
import json, os, subprocess, sys

modes = json.loads(open(sys.argv[1]).read())
node = os.environ.get("SLURMD_NODENAME") or os.environ.get("ENVKIT_FLEET_NODE") or "?"
mode, args = modes.get(node, "good"), sys.argv[2:]
MACHINE = {"driver": {"version": "580.65.06", "cuda": "13.0", "source": "nvml"},
           "gpus": [{"index": 0, "name": "H100", "compute_capability": "9.0", "memory_mib": 81559, "uuid": None}],
           "gpus_hidden": False, "cuda_override": None, "simulated": False, "notes": [], "selection": None,
           "error": None}
if mode == "good":
    os.execv(sys.executable, [sys.executable, "-m", "envkit", *args])
elif mode == "flood":  # 1 GiB, as fast as a pipe takes it (NUL bytes: no tr in between to slow it down)
    os.execvp("head", ["head", "-c", "1073741824", "/dev/zero"])
elif mode == "endless":
    os.execvp("yes", ["yes"])
elif mode == "detach":  # answers, but leaves a grandchild in a session of its own holding stdout and stderr
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    with open(modes["pidfile"] + "." + node, "w") as f:
        f.write(str(child.pid))
    os.execv(sys.executable, [sys.executable, "-m", "envkit", *args])
elif mode == "deep":
    sys.stdout.write('{"a":' * 100000 + "1" + "}" * 100000 + "\n")
elif mode == "escapes":
    data = dict(MACHINE, error="own build: \x1b[8mhidden\x1b[0m")
    data["gpus"] = [dict(MACHINE["gpus"][0], name="H100\x1b]52;c;aGVsbG8=\x07\x1b[2J\x1b[H")]
    sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
elif mode == "wrongtype":
    sys.stdout.write(json.dumps(dict(MACHINE, driver={"version": 580, "cuda": "13.0"})) + "\n")
'''

# runs envkit as its only child and reports that child's peak RSS (ru_maxrss of RUSAGE_CHILDREN: the largest
# descendant waited for, envkit itself here; its srun, sh and tr children are a few MiB each)
RSS_PROBE = ("import resource, subprocess, sys, time; t = time.monotonic(); "
             "done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
             "sys.stderr.write('%d %.2f\\n' % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
             "time.monotonic() - t)); sys.stdout.buffer.write(done.stdout); sys.exit(done.returncode)")



def fake_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, modes: dict[str, str]) -> Path:
    """Nodes named in `modes` misbehave so; returns the prefix of the files the detaching ones write their
    grandchild's pid to (PREFIX.NODE)."""
    script, table = tmp_path / "fake_node.py", tmp_path / "modes.json"
    script.write_text(FAKE_NODE)
    table.write_text(json.dumps({**modes, "pidfile": str(tmp_path / "grandchild")}))
    monkeypatch.setenv("ENVKIT_FLEET_ENVKIT", f"{sys.executable} {script} {table}")
    return tmp_path / "grandchild"


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
