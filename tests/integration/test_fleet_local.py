"""Hostile nodes through the local launcher (real processes on this machine, no Slurm needed): a node's 1 GiB
streams through envkit's bounded reader, endless output stops at the deadline, and a grandchild a node leaves
in a session of its own holding the pipe is neither waited for nor left running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostilenodes import RSS_PROBE, alive, fake_nodes


def test_a_gibibyte_endless_output_and_a_detached_grandchild_are_bounded(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = fake_nodes(tmp_path, monkeypatch, {"local1": "flood", "local2": "endless", "local3": "detach"})
    timeout = 8
    done = subprocess.run([sys.executable, "-c", RSS_PROBE, sys.executable, "-m", "envkit", "fleet", "detect",
                           "--launcher", "local", "--nodes", "4", "--json", "--timeout", str(timeout)],
                          capture_output=True, text=True, timeout=120)
    rss_kib, seconds = (float(x) for x in done.stderr.strip().splitlines()[-1].split())
    rows = {n["node"]: n for n in json.loads(done.stdout)["nodes"]}
    assert rss_kib < 200 * 1024, f"envkit peaked at {rss_kib / 1024:.0f} MiB"
    assert seconds < timeout + 10, f"returned after {seconds:.1f} s"
    # 1 GiB went through envkit (a few seconds), of which it kept the first 8 MiB
    error = rows["local1"]["error"]
    assert "printed more than 8 MiB on stdout (" in error, error
    assert int(error.split("(", 1)[1].split()[0]) >= 1 << 30, error  # all of it was read, not left in the pipe
    assert f"no answer within {timeout} s" in rows["local2"]["error"], rows["local2"]
    assert rows["local3"]["ok"] and rows["local4"]["ok"], (rows["local3"], rows["local4"])
    grandchild = int(pidfile.with_name(pidfile.name + ".local3").read_text())
    for _ in range(50):
        if not alive(grandchild):
            break
        time.sleep(0.1)
    else:
        os.kill(grandchild, 9)
        raise AssertionError("the grandchild that held local3's pipe outlived fleet detect")
