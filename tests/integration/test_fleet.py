"""Fleet commands on a real local Slurm cluster (4 slurmd + slurmctld + munge in a temp dir).

Nodes differ through ENVKIT_DRIVER_VERSION / ENVKIT_COMPUTE_CAPABILITY, set per node by the
cluster's TaskProlog (the --driver-version / --compute-capability plumbing). Where Slurm cannot run
here, every test of this module skips with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from envkit.cli import cli
from helpers import run_cli
from hostilenodes import RSS_PROBE, alive, fake_nodes
from testbed.channel import PY, TestBed
from testbed.server import ChannelServer
from testbed.slurm import SlurmCluster, missing_reason, private_dirs_reason

REASON = missing_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no local Slurm cluster: {REASON}")

# n1: an old driver and V100s; n2: H100s on a CUDA 13 driver; n3: A100 on a CUDA 12.8 driver; n4: like n2
HETERO = {
    "n1": {"ENVKIT_DRIVER_VERSION": "535.104.05", "ENVKIT_COMPUTE_CAPABILITY": "7.0 7.0"},
    "n2": {"ENVKIT_DRIVER_VERSION": "580.65.06", "ENVKIT_COMPUTE_CAPABILITY": "9.0 9.0"},
    "n3": {"ENVKIT_DRIVER_VERSION": "570.86.10", "ENVKIT_COMPUTE_CAPABILITY": "8.0"},
    "n4": {"ENVKIT_DRIVER_VERSION": "580.65.06", "ENVKIT_COMPUTE_CAPABILITY": "9.0 9.0"},
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    root = tmp_path_factory.mktemp("slurm")
    with SlurmCluster(root, node_env=HETERO, partitions={"old": ("n1",), "new": ("n2", "n3", "n4")}) as c:
        yield c


@pytest.fixture
def slurm(cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    cluster.write_node_env(HETERO)
    for node in cluster.nodes:
        cluster.set_delay(node, None)
    return cluster


def fleet_json(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(cli, ["fleet", *args, "--json"])
    assert result.stdout.strip().startswith("{"), result.output
    return result.exit_code, json.loads(result.stdout)


def test_inventory_of_four_heterogeneous_nodes(slurm: SlurmCluster) -> None:
    start = time.perf_counter()
    code, data = fleet_json("detect")
    elapsed = time.perf_counter() - start
    assert code == 0, data
    rows = {n["node"]: n for n in data["nodes"]}
    assert sorted(rows) == ["n1", "n2", "n3", "n4"]
    assert rows["n1"]["machine"]["driver"]["version"] == "535.104.05"
    assert rows["n1"]["machine"]["driver"]["cuda"] == "12.2"
    assert [g["compute_capability"] for g in rows["n2"]["machine"]["gpus"]] == ["9.0", "9.0"]
    assert rows["n3"]["machine"]["driver"]["cuda"] == "12.8"
    assert rows["n2"]["selection"]["cuda"] == "13.0"  # each node's own best build
    assert rows["n1"]["partition"] == "all"
    assert elapsed < 10, f"fleet detect of 4 nodes took {elapsed:.1f} s"


def test_fleet_selection_binds_on_the_weakest_node(slurm: SlurmCluster) -> None:
    _code, data = fleet_json("detect")
    fleet = data["fleet"][0]
    assert fleet["binding"] == ["n1"]
    assert fleet["cuda"] == "12.2"
    assert fleet["compute_capabilities"] == ["7.0", "8.0", "9.0"]
    first = fleet["reasons"][0]
    assert first.startswith("n1's driver 535.104.05 caps the fleet at CUDA 12.2; without it: CUDA 12.8"), first
    assert fleet["selection"]["cuda"] is not None
    # the build must cover the V100s of n1: its CUDA level stays within what n1's driver allows
    assert any("sm_70" in r for r in fleet["reasons"]), fleet["reasons"]


def test_exclude_lifts_the_cap(slurm: SlurmCluster) -> None:
    _code, data = fleet_json("detect", "--exclude", "n1")
    assert sorted(n["node"] for n in data["nodes"]) == ["n2", "n3", "n4"]
    fleet = data["fleet"][0]
    assert fleet["binding"] == ["n3"]
    assert fleet["cuda"] == "12.8"
    assert fleet["reasons"][0].startswith("n3's driver 570.86.10 caps the fleet at CUDA 12.8; without it: CUDA 13.0")


def test_per_partition_and_nodelist(slurm: SlurmCluster) -> None:
    _code, data = fleet_json("detect", "--partition", "new", "--per-partition")
    assert sorted(n["node"] for n in data["nodes"]) == ["n2", "n3", "n4"]
    assert [f["partition"] for f in data["fleet"]] == ["new"]
    _code, data = fleet_json("detect", "--nodelist", "n[2,4]", "--time", "5", "--srun-arg=--comment=envkit-test")
    assert [n["node"] for n in data["nodes"]] == ["n2", "n4"]
    assert data["fleet"][0]["cuda"] == "13.0"


def test_slow_node_is_a_row_not_a_hang(slurm: SlurmCluster) -> None:
    slurm.set_delay("n3", 60)
    start = time.perf_counter()
    code, data = fleet_json("detect", "--timeout", "8")
    elapsed = time.perf_counter() - start
    assert code == 1
    rows = {n["node"]: n for n in data["nodes"]}
    assert not rows["n3"]["ok"] and "no answer within 8 s" in rows["n3"]["error"]
    assert all(rows[n]["ok"] for n in ("n1", "n2", "n4"))
    assert elapsed < 20, elapsed  # the timeout plus cancelling n3's job, not srun's own minutes
    assert data["fleet"][0]["nodes"] == ["n1", "n2", "n4"]


STUB = r'''#!{python}
"""The GPU, faked at its seam: prints what the verify payload would print on this node's GPU."""
import json, os, sys
mode = os.environ.get("ENVKIT_TEST_VERIFY", "skip")
speedup = float(os.environ.get("ENVKIT_TEST_SPEEDUP", "3.0"))
checks = [{{"name": "import", "status": "pass", "explanation": "ok", "values": {{}}}}]
if mode == "skip":
    checks.append({{"name": "driver", "status": "skip", "explanation": "no NVIDIA driver", "values": {{}}}})
else:
    checks += [{{"name": "driver", "status": "pass", "explanation": "1 GPU", "values": {{}}}},
               {{"name": "architecture", "status": "pass", "explanation": "sm_90 in arch list", "values": {{}}}},
               {{"name": "training", "status": "fail" if mode == "fail" else "pass",
                "explanation": "loss went NaN" if mode == "fail" else "ok", "values": {{}}}},
               {{"name": "speed", "status": "pass", "explanation": "fast", "values": {{"speedup": speedup}}}},
               {{"name": "memory", "status": "pass", "explanation": "less", "values": {{"ratio": 0.55}}}},
               {{"name": "matmul_tflops", "status": "pass", "explanation": "x",
                "values": {{"tflops": {{"fp32": 50.0, "fp16": 700.0 * speedup / 3}}}}}}]
sys.stdout.write("\n@@ENVKIT-VERIFY-JSON@@\n" + json.dumps({{"checks": checks, "torch": "2.13.0",
                 "gpus": [{{"name": "H200", "compute_capability": "9.0"}}]}}) + "\n")
'''


def stub_python(tmp_path: Path) -> Path:
    import sys

    path = tmp_path / "gpu-python"
    path.write_text(STUB.format(python=sys.executable))
    path.chmod(0o755)
    return path


def test_fleet_verify_aggregates_pass_skipped_fail(slurm: SlurmCluster, tmp_path: Path) -> None:
    stub = stub_python(tmp_path)
    env = {"n1": {"ENVKIT_TEST_VERIFY": "pass", "ENVKIT_TEST_SPEEDUP": "3.1"},
           "n2": {"ENVKIT_TEST_VERIFY": "pass", "ENVKIT_TEST_SPEEDUP": "1.4"},
           "n3": {"ENVKIT_TEST_VERIFY": "skip"},
           "n4": {"ENVKIT_TEST_VERIFY": "fail"}}
    slurm.write_node_env(env)
    page = tmp_path / "fleet.html"
    code, data = fleet_json("verify", "--python", str(stub), "--html", str(page))
    rows = {n["node"]: n for n in data["nodes"]}
    assert code == 3 and data["outcome"] == "FAIL", data["summary"]
    html = page.read_text()  # the same run as a page: one row per node, the slowest named, bars per node
    assert 'class="verdict FAIL"' in html and "<td>n2 (slowest)</td>" in html and html.count("<svg") == 2
    assert [rows[n]["outcome"] for n in ("n1", "n2", "n3", "n4")] == ["PASS", "PASS", "SKIPPED", "FAIL"]
    assert rows["n4"]["checks"]["training"] == "FAIL"
    assert data["summary"].startswith("FAIL on n4")
    assert data["slowest"] == "n2" and rows["n2"]["speedup"] == 1.4
    assert rows["n1"]["memory_ratio"] == 0.55 and rows["n1"]["tflops"] > 700

    slurm.write_node_env({n: {"ENVKIT_TEST_VERIFY": "pass"} for n in ("n1", "n2")}
                         | {n: {"ENVKIT_TEST_VERIFY": "skip"} for n in ("n3", "n4")})
    code, data = fleet_json("verify", "--python", str(stub))
    assert code == 0 and data["outcome"] == "PASS" and "SKIPPED (no GPU) on n3, n4" in data["summary"]
    slurm.write_node_env({n: {"ENVKIT_TEST_VERIFY": "skip"} for n in slurm.nodes})
    code, data = fleet_json("verify", "--python", str(stub))
    assert code == 4 and data["outcome"] == "SKIPPED"
    result = CliRunner().invoke(cli, ["fleet", "verify", "--python", str(stub), "--nodelist", "n[1-2]"])
    assert result.exit_code == 4 and "SKIPPED" in result.output and "n2" in result.output


def test_fleet_verify_nccl_across_two_nodes_real_torch(slurm: SlurmCluster) -> None:
    """Real verify payload and a real 2-node torchrun (c10d on n1) with the test venv's CPU torch:
    every node SKIPPED (no GPU); the cross-node all-reduce + DDP step runs over gloo and must agree."""
    import sys

    pytest.importorskip("torch")
    code, data = fleet_json("verify", "--python", sys.executable, "--quick", "--nccl",
                            "--nodelist", "n[1-2]", "--timeout", "300")
    assert [n["outcome"] for n in data["nodes"]] == ["SKIPPED", "SKIPPED"], data
    nccl = data["nccl"]
    assert nccl["outcome"] == "SKIPPED", nccl
    assert nccl["nodes"] == ["n1", "n2"] and nccl["world_size"] == 2
    assert nccl["all_reduce_ok"] and nccl["ddp_in_sync"] and nccl["busbw_gbps"] > 0
    assert code == 4


def test_dead_node_is_reported_within_its_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = stub_python(tmp_path)
    with SlurmCluster(tmp_path / "slurm", nodes=("d1", "d2"),
                      node_env={"d1": {"ENVKIT_TEST_VERIFY": "pass"}, "d2": {"ENVKIT_TEST_VERIFY": "pass"}}) as c:
        monkeypatch.setenv("SLURM_CONF", str(c.conf))
        c.kill_node("d2")
        start = time.perf_counter()
        code, data = fleet_json("verify", "--python", str(stub), "--timeout", "10")
        elapsed = time.perf_counter() - start
    rows = {n["node"]: n for n in data["nodes"]}
    assert rows["d1"]["outcome"] == "PASS"
    assert rows["d2"]["outcome"] == "FAIL" and "no answer within 10 s" in rows["d2"]["error"]
    assert code == 3
    assert elapsed < 20, elapsed


def records(prefix: Path) -> set[str]:
    return {p.name for p in (prefix / "conda-meta").glob("*.json")}


def test_fleet_create_selects_for_the_fleet_solves_once_installs_everywhere(slurm: SlurmCluster, testbed: TestBed,
                                                                            tmp_path: Path) -> None:
    # dl_train asks for python 3.11: with no --python the fleet is selected for it, as create selects (the build
    # said before the install once said the default 3.12 and installed 3.11)
    python = [] if PY == "3.11" else ["--python", PY]
    with ChannelServer(testbed.root) as srv:
        code, data = fleet_json("create", "dl", "--spec", "dl_train", *python, "--mirror", srv.url,
                                "--prefix", f"{tmp_path}/{{node}}/dl", "--bundle-dir", str(tmp_path / "bundle"))
        solves = len(srv.hits("repodata.json")) + len(srv.hits("repodata_shards.msgpack.zst"))
    assert code == 0, data
    assert data["fleet"]["binding"] == ["n1"] and data["fleet"]["cuda"] == "12.2"
    assert data["ok"] and data["identical"] and not data["shared_prefix"]
    assert [n["node"] for n in data["nodes"] if n["ok"]] == ["n1", "n2", "n3", "n4"]
    sets = [records(tmp_path / n / "dl") for n in ("n1", "n2", "n3", "n4")]
    assert sets[0] and all(s == sets[0] for s in sets)
    # n1's driver (CUDA 12.2) binds: the CUDA 12.9 build through minor version compatibility, on every node
    assert any(r.startswith("pytorch-2.13.0-cuda129") for r in sets[0])
    assert any(r.startswith(f"python-{PY}.") for r in sets[0]) and f'"python": "{PY}"' in json.dumps(data["fleet"])
    assert solves <= 6, f"repodata fetched {solves} times: the fleet must solve once, not once per node"


def test_fleet_create_from_a_bundle_offline_and_a_node_failing_midway(slurm: SlurmCluster, testbed: TestBed,
                                                                      tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    with ChannelServer(testbed.root) as srv:
        result = CliRunner().invoke(cli, ["bundle", "dl", "--spec", "dl_train", "--cuda", "13.0", "--python", PY,
                                          "--mirror", srv.url, "-o", str(bundle)])
        assert result.exit_code == 0, result.output
    # the mirror is gone; on top, every node's proxy points at a closed port: only the bundle folder is reachable
    dead = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}
    env = {n: dict(dead) for n in slurm.nodes}
    env["n3"]["PIP_CONSTRAINT"] = "/nonexistent/constraints.txt"  # n3's pip step fails after conda linked
    slurm.write_node_env(env)
    code, data = fleet_json("create", "dl", "--bundle", str(bundle), "--prefix", f"{tmp_path}/{{node}}/dl")
    assert code == 1
    rows = {n["node"]: n for n in data["nodes"]}
    assert [n for n in rows if rows[n]["ok"]] == ["n1", "n2", "n4"] and data["identical"]
    assert "pip" in rows["n3"]["error"], rows["n3"]
    assert records(tmp_path / "n1" / "dl") == records(tmp_path / "n4" / "dl")
    assert not (tmp_path / "n3" / "dl").exists()
    assert not [p.name for p in (tmp_path / "n3").iterdir()] if (tmp_path / "n3").exists() else True

    # one shared prefix: created once (by the first node), then checked from every node
    slurm.write_node_env({n: dict(dead) for n in slurm.nodes})
    result = CliRunner().invoke(cli, ["fleet", "create", "shared", "--bundle", str(bundle), "--prefix",
                                      f"{tmp_path}/shared/env"])
    assert result.exit_code == 0, result.output
    assert "4 of 4 node(s) ok (one shared prefix); records identical on every node" in result.output
    assert (tmp_path / "shared" / "env" / "conda-meta").is_dir()


def test_nodes_started_early_leave_with_nothing_made_when_the_solve_fails(slurm: SlurmCluster, testbed: TestBed,
                                                                         tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """fleet create starts every node while it solves and bundles (each waits, loaded, for the go); an
    unsolvable file closes the gates instead: the solver's error is the answer, every node's srun has
    ended by then, and no node made anything."""
    import subprocess

    env_file = tmp_path / "env.yml"
    with ChannelServer(testbed.root) as srv:
        env_file.write_text(f"name: nope\nchannels:\n  - {srv.url}/conda-forge\ndependencies:\n"
                            f"  - python={PY}\n  - no-such-package-anywhere\n")
        start = time.monotonic()
        code, out, err = run_cli(capsys, "fleet", "create", "nope", "--file", str(env_file), "--no-adapt",
                                 "--prefix", f"{tmp_path}/{{node}}/nope", "--bundle-dir", str(tmp_path / "bundle"))
        seconds = time.monotonic() - start
    assert code == 1 and "error: the solver found no solution" in err and "no-such-package-anywhere" in err, err
    assert "FAILED" not in err and err.count("stopped") == 4, err  # the nodes were told to leave, not failed
    assert seconds < 60, seconds
    assert not [p for p in tmp_path.iterdir() if p.name in slurm.nodes], "a node made something"
    for _ in range(40):  # each srun has returned; its job leaves the queue once Slurm has cleaned it up
        left = subprocess.run(["squeue", "-h", "-o", "%j %T"], env=slurm.env(), capture_output=True, text=True,
                              timeout=30)
        jobs = [line for line in left.stdout.splitlines() if line.startswith("envkit-fleet-")]
        if not jobs:
            break
        assert all(line.endswith("COMPLETING") for line in jobs), jobs  # none still running or waiting
        time.sleep(0.25)
    assert not jobs, jobs


def test_inside_an_allocation_the_jobs_nodes_are_used(slurm: SlurmCluster, tmp_path: Path) -> None:
    """The README's sbatch example: envkit runs in the batch step and uses exactly the job's nodes."""
    import subprocess
    import sys

    out = tmp_path / "detect.json"
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/sh\n#SBATCH --nodes=2\n#SBATCH --nodelist=n2,n3\n"
                      f"{sys.executable} -m envkit fleet detect --json > {out}\n")
    done = subprocess.run(["sbatch", "--wait", "--output", str(tmp_path / "job.log"), str(script)],
                          env=slurm.env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + (tmp_path / "job.log").read_text()
    data = json.loads(out.read_text())
    assert [n["node"] for n in data["nodes"]] == ["n2", "n3"] and all(n["ok"] for n in data["nodes"])
    assert data["fleet"][0]["binding"] == ["n3"]


DEAD_PROXY = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
              "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9"}


@pytest.mark.skipif(private_dirs_reason() is not None, reason=f"nodes cannot get private folders: "
                    f"{private_dirs_reason()}")
def test_fleet_create_stages_the_bundle_onto_nodes_without_its_filesystem(testbed: TestBed, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle lives in a folder only the login node sees (each node has an empty tmpfs there) and each
    node has its own node-local TMPDIR: fleet create stages the bundle onto every node, installs the same
    records everywhere and leaves no staged copy behind."""
    login = tmp_path / "login-only"
    bundle = login / "bundle"
    with ChannelServer(testbed.root) as srv:
        result = CliRunner().invoke(cli, ["bundle", "dl", "--spec", "dl_train", "--cuda", "13.0", "--python", PY,
                                          "--mirror", srv.url, "-o", str(bundle)])
        assert result.exit_code == 0, result.output
    local = {n: tmp_path / f"{n}-local" for n in ("s1", "s2")}
    for folder in local.values():
        folder.mkdir()
    env = {n: {**DEAD_PROXY, "TMPDIR": str(local[n])} for n in local}
    with SlurmCluster(tmp_path / "slurm", nodes=("s1", "s2"), node_env=env, private_dirs=(login,)) as c:
        monkeypatch.setenv("SLURM_CONF", str(c.conf))
        for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
            monkeypatch.delenv(name, raising=False)
        # the nodes really cannot see it: without staging both fail on the missing bundle
        code, data = fleet_json("create", "dl", "--bundle", str(bundle), "--prefix", f"{tmp_path}/{{node}}/dl",
                                "--stage-bundle", "never")
        assert code == 1 and not any(n["ok"] for n in data["nodes"]), data
        assert all(str(bundle) in n["error"] for n in data["nodes"]), data["nodes"]
        assert not (tmp_path / "s1" / "dl").exists()
        code, data = fleet_json("create", "dl", "--bundle", str(bundle), "--prefix", f"{tmp_path}/{{node}}/dl")
    assert code == 0, data
    assert data["ok"] and data["identical"] and data["staged"] == ["s1", "s2"]
    assert all(n["staged"] and n["ok"] for n in data["nodes"])
    assert records(tmp_path / "s1" / "dl") == records(tmp_path / "s2" / "dl") != set()
    assert "tar" in data["phases_s"]
    # each node unpacked into its own TMPDIR and removed the staged copy afterwards
    assert [list(folder.iterdir()) for folder in local.values()] == [[], []]


@pytest.mark.skipif(private_dirs_reason() is not None, reason=f"nodes cannot get private folders: "
                    f"{private_dirs_reason()}")
def test_fleet_create_makes_the_bundle_while_nodes_wait_and_stages_it_to_them(testbed: TestBed, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle folder is the login node's alone. --stage-bundle always: the nodes start at once and the
    tar comes through their waiting gate; auto: each node probes after the go, answers that it cannot
    see the folder and gets a staged copy. Either way the same records everywhere, no copy left."""
    login = tmp_path / "login-only"
    local = {n: tmp_path / f"{n}-local" for n in ("s1", "s2")}
    for folder in local.values():
        folder.mkdir()
    env = {n: {**DEAD_PROXY, "TMPDIR": str(local[n])} for n in local}
    with ChannelServer(testbed.root) as srv, SlurmCluster(tmp_path / "slurm", nodes=("s1", "s2"), node_env=env,
                                                          private_dirs=(login,)) as c:
        monkeypatch.setenv("SLURM_CONF", str(c.conf))
        for name in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
            monkeypatch.delenv(name, raising=False)
        results = {}
        for mode in ("always", "auto"):
            results[mode] = fleet_json("create", f"mini-{mode}", "--spec", "minimal", "--cuda", "13.0", "--python",
                                       PY, "--mirror", srv.url, "--bundle-dir", str(login / mode), "--prefix",
                                       f"{tmp_path}/{{node}}/{mode}", "--stage-bundle", mode)
    for mode, (code, data) in results.items():
        assert code == 0 and data["ok"] and data["identical"] and data["staged"] == ["s1", "s2"], (mode, data)
        assert records(tmp_path / "s1" / mode) == records(tmp_path / "s2" / mode) != set()
    assert "tar" in results["always"][1]["phases_s"]
    assert [list(folder.iterdir()) for folder in local.values()] == [[], []]  # staged copies removed


def test_stage_bundle_always_on_a_shared_folder(slurm: SlurmCluster, testbed: TestBed, tmp_path: Path) -> None:
    """--stage-bundle always stages even where the folder is shared (e.g. a slow NFS), into --stage-dir
    with {node}; a shared folder with auto stages nothing."""
    bundle = tmp_path / "bundle"
    with ChannelServer(testbed.root) as srv:
        result = CliRunner().invoke(cli, ["bundle", "mini", "--spec", "minimal", "--cuda", "13.0", "--python", PY,
                                          "--mirror", srv.url, "-o", str(bundle)])
        assert result.exit_code == 0, result.output
    slurm.write_node_env({n: dict(DEAD_PROXY) for n in slurm.nodes})
    code, data = fleet_json("create", "mini", "--bundle", str(bundle), "--prefix", f"{tmp_path}/{{node}}/mini",
                            "--nodelist", "n[1-2]", "--stage-bundle", "always", "--stage-dir",
                            f"{tmp_path}/stage/{{node}}")
    assert code == 0 and data["staged"] == ["n1", "n2"], data
    assert sorted(p.name for p in (tmp_path / "stage").iterdir()) == ["n1", "n2"]
    assert not [p for p in (tmp_path / "stage").rglob("*") if p.is_file()]  # staged copies removed
    code, data = fleet_json("create", "mini2", "--bundle", str(bundle), "--prefix", f"{tmp_path}/{{node}}/mini2",
                            "--nodelist", "n[3-4]")
    assert code == 0 and data["staged"] == [] and data["identical"], data


def test_fleet_create_per_partition(slurm: SlurmCluster, testbed: TestBed, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """One build per partition: old (n1, CUDA 12.2 driver, V100s) and new (n2-n4, CUDA 13.0 drivers here):
    detected once, solved and bundled once per partition, each partition installed from its own bundle."""
    slurm.write_node_env(HETERO | {"n3": HETERO["n2"]})
    with ChannelServer(testbed.root) as srv:
        code, data = fleet_json("create", "pp", "--spec", "minimal", "--python", PY, "--mirror", srv.url,
                                "--per-partition", "-p", "old,new", "--prefix", f"{tmp_path}/{{partition}}/{{node}}",
                                "--bundle-dir", str(tmp_path / "bundles"))
    assert code == 0, data
    parts = {p["partition"]: p for p in data["partitions"]}
    assert sorted(parts) == ["new", "old"] and data["ok"]
    assert parts["old"]["fleet"]["cuda"] == "12.2" and parts["old"]["fleet"]["binding"] == ["n1"]
    assert parts["new"]["fleet"]["cuda"] == "13.0"
    assert [n["node"] for n in parts["old"]["nodes"]] == ["n1"]
    assert [n["node"] for n in parts["new"]["nodes"]] == ["n2", "n3", "n4"]
    for name, part in parts.items():
        assert part["bundle"] == str(tmp_path / "bundles" / name) and part["identical"]
    manifests = {name: json.loads((tmp_path / "bundles" / name / "bundle.json").read_text()) for name in parts}
    # old: CUDA 12.9 through minor version compatibility on its 535 driver; new: CUDA 13.0
    assert [manifests[p]["selection"]["cuda"] for p in ("old", "new")] == ["12.9", "13.0"]
    new = [records(tmp_path / "new" / n) for n in ("n2", "n3", "n4")]
    assert new[0] and new[0] == new[1] == new[2]
    old = records(tmp_path / "old" / "n1")
    assert any(r.startswith("pytorch-2.13.0-cuda129") for r in old)
    assert any(r.startswith("pytorch-2.13.0-cuda130") for r in new[0])

    code, _out, err = run_cli(capsys, "fleet", "create", "pp", "--per-partition", "-p", "old,new")
    assert code == 2 and "one shared prefix cannot hold them" in err and "{partition}" in err


def test_inside_an_allocation_a_timed_out_step_is_cancelled(slurm: SlurmCluster, tmp_path: Path) -> None:
    """Inside a job a slow node's srun is a step of that job: it is cancelled by its unique name
    (squeue --steps), the job itself keeps running; without that the step would hold on for 60 s."""
    import subprocess
    import sys

    slurm.set_delay("n3", 60)
    out, steps = tmp_path / "detect.json", tmp_path / "steps.txt"
    script = tmp_path / "job.sh"
    script.write_text(
        f"#!/bin/sh\n#SBATCH --nodes=2\n#SBATCH --nodelist=n2,n3\n"
        f"{sys.executable} -m envkit fleet detect --json --timeout 5 > {out}\n"
        # the step must be gone within a few seconds (cancelled), not after the node's 60 s
        f"for i in 1 2 3 4 5 6 7 8 9 10; do squeue -h -s -j $SLURM_JOB_ID -o '%i %j' | grep envkit-fleet "
        f"> {steps} || break; sleep 0.5; done\n"
        "echo job-still-running\n")
    done = subprocess.run(["sbatch", "--wait", "--output", str(tmp_path / "job.log"), str(script)],
                          env=slurm.env(), capture_output=True, text=True, timeout=120)
    log = (tmp_path / "job.log").read_text()
    assert done.returncode == 0, done.stderr + log
    data = json.loads(out.read_text())
    rows = {n["node"]: n for n in data["nodes"]}
    assert rows["n2"]["ok"]
    assert "no answer within 5 s" in rows["n3"]["error"] and "its step" in rows["n3"]["error"], rows["n3"]
    assert "cancelled" in rows["n3"]["error"]
    assert steps.read_text().strip() == "", steps.read_text()
    assert "job-still-running" in log


def test_flooding_endless_and_detaching_nodes_cost_bounded_memory_and_time(slurm: SlurmCluster, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Over srun: n1 prints 1 GiB, n2 prints forever, n3 answers but leaves a `sleep 600` in a session of its own
    holding its output, n4 is fine: envkit stays under 200 MB and returns within --timeout + 10 s with every row.
    (srun forwards output at a few MB/s here: the 1 GiB itself streams through envkit in test_fleet_local.)"""
    import os
    import subprocess
    import sys

    pidfile = fake_nodes(tmp_path, monkeypatch, {"n1": "flood", "n2": "endless", "n3": "detach"})
    timeout = 12
    try:
        done = subprocess.run([sys.executable, "-c", RSS_PROBE, sys.executable, "-m", "envkit", "fleet", "detect",
                               "--json", "--timeout", str(timeout)], capture_output=True, text=True,
                              env=slurm.env(os.environ), timeout=120)
    finally:  # the node's leftover is out of envkit's reach on a Slurm node (and of proctrack/linuxproc's)
        left = pidfile.with_name(pidfile.name + ".n3")
        if left.exists() and alive(int(left.read_text())):
            os.kill(int(left.read_text()), 9)
    rss_kib, seconds = (float(x) for x in done.stderr.strip().splitlines()[-1].split())
    data = json.loads(done.stdout)
    rows = {n["node"]: n for n in data["nodes"]}
    assert done.returncode == 1
    assert rss_kib < 200 * 1024, f"envkit peaked at {rss_kib / 1024:.0f} MiB"
    assert seconds < timeout + 10, f"returned after {seconds:.1f} s"
    assert "more than 8 MiB on stdout" in rows["n1"]["error"] or f"no answer within {timeout} s" in rows["n1"]["error"]
    assert f"no answer within {timeout} s" in rows["n2"]["error"], rows["n2"]
    assert not rows["n3"]["ok"] and "kept its output open" in rows["n3"]["error"], rows["n3"]
    assert rows["n4"]["ok"], rows["n4"]


def test_bad_node_json_is_one_failed_row_and_node_escapes_never_reach_the_terminal(
        slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """n1 prints JSON nested 100000 deep, n2 a GPU name with an OSC 52 clipboard write and a screen clear, n3 a
    driver version that is a number; n4 is fine. Every node gets its row; no raw escape is printed."""
    fake_nodes(tmp_path, monkeypatch, {"n1": "deep", "n2": "escapes", "n3": "wrongtype"})
    code, data = fleet_json("detect")
    rows = {n["node"]: n for n in data["nodes"]}
    assert code == 1 and sorted(rows) == ["n1", "n2", "n3", "n4"]
    assert not rows["n1"]["ok"] and "malformed JSON" in rows["n1"]["error"], rows["n1"]
    assert not rows["n3"]["ok"] and "field driver.version is a number, not a string" in rows["n3"]["error"]
    assert rows["n4"]["ok"] and rows["n2"]["ok"]
    assert rows["n2"]["machine"]["gpus"][0]["name"].startswith("H100\x1b]52")  # --json: escaped by json.dumps
    code, out, err = run_cli(capsys, "fleet", "detect")
    assert code == 1 and "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J" in out and "\\x1b[8mhidden" in out
    assert "2 of 4 node(s) answered" in out


def test_a_nodelist_too_large_or_naming_nothing_is_a_usage_error(slurm: SlurmCluster,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = run_cli(capsys, "fleet", "detect", "--nodelist", "n[1-99999999]")
    assert code == 2 and "names 99,999,999 nodes; envkit fleet takes at most 16,384" in err, err
    code, _out, err = run_cli(capsys, "fleet", "detect", "--nodelist", ",")
    assert code == 2 and "names no node" in err, err
    code, _out, err = run_cli(capsys, "fleet", "verify", "--python", "/usr/bin/python3", "--timeout", "nan")
    assert code == 2 and "--timeout" in err and "Traceback" not in err
