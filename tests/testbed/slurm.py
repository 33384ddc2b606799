"""A real multi-node Slurm cluster on one machine, for tests and benchmarks.

Debian builds Slurm with multiple-slurmd support, so N `slurmd -N nX` daemons, one `slurmctld` and
a private `munged` run side by side in a temp dir (facts and timings: slurm-local.md). Each node
gets its own environment through a TaskProlog (Slurm prints `export NAME=value` lines of the
prolog into the task's environment: slurm.conf(5) "TaskProlog"), which is how simulated nodes get
different drivers and GPUs (ENVKIT_DRIVER_VERSION / ENVKIT_COMPUTE_CAPABILITY). Shutdown stops
exactly the processes this module started, by PID, never by name.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "munged")
CLIENTS = ("srun", "sinfo", "squeue", "scancel", "scontrol")


def missing_reason(install_root: Path | None = None) -> str | None:
    """Why a local cluster cannot run here (None when it can)."""
    for tool in DAEMONS:
        if not Path(_exe(tool, install_root)).exists():
            return f"{tool} is not installed (apt-get install slurmctld slurmd slurm-client munge)"
    for tool in CLIENTS:
        if install_root is not None and (install_root / "usr" / "bin" / tool).exists():
            continue
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install slurm-client)"
    if os.geteuid() != 0:
        return "slurmd must run as root to start job steps (run the suite as root, as .ci/run does)"
    return None


def private_dirs_reason() -> str | None:
    """Why nodes cannot get folders of their own here (None when they can): each slurmd then runs in its own
    mount namespace (unshare(1) -m) with an empty tmpfs over the folders the login node alone may see."""
    if shutil.which("unshare") is None:
        return "unshare is not installed (util-linux)"
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, text=True)
    if done.returncode != 0:
        return f"cannot create a mount namespace here: {done.stderr.strip()[-200:]}"
    return None


# In the slurmd's own mount namespace: an empty tmpfs over each private folder, then the daemon itself.
_PRIVATE = ('n="$1"; shift; i=0; while [ "$i" -lt "$n" ]; do '
            'mount -t tmpfs envkit-private "$1" || exit 1; shift; i=$((i + 1)); done; exec "$@"')


def _exe(name: str, install_root: Path | None = None) -> str:
    if install_root is not None:
        sbin = install_root / "usr" / "sbin"
        # Debian ships slurmctld-wlm etc. and links the plain names through update-alternatives at install
        return str(sbin / name) if (sbin / name).exists() or not (sbin / f"{name}-wlm").exists() \
            else str(sbin / f"{name}-wlm")
    return shutil.which(name) or f"/usr/sbin/{name}"


def unpack_debs(debs: Path, root: Path) -> Path | None:
    """Slurm and munge unpacked (dpkg-deb -x) from the .deb files in `debs` into `root`, nothing installed
    into /; None when `debs` holds none. For hosts that can borrow the packages but not install them."""
    files = sorted(debs.glob("*.deb")) if debs.is_dir() else []
    if not files:
        return None
    root.mkdir(parents=True, exist_ok=True)
    for deb in files:
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root


def relocated_env(install_root: Path) -> dict[str, str]:
    """PATH and LD_LIBRARY_PATH for Slurm unpacked from its .deb files (dpkg-deb -x) into a folder
    instead of installed: no root file system change on a host that only borrows it."""
    lib = install_root / "usr" / "lib" / "x86_64-linux-gnu"
    return {"PATH": f"{install_root / 'usr' / 'bin'}:{install_root / 'usr' / 'sbin'}:{os.environ.get('PATH', '')}",
            # usrmerge-era debs (libdbus-1-3, needed by the cgroup/v2 plugin) install into /lib, not /usr/lib
            "LD_LIBRARY_PATH": ":".join(p for p in (str(lib), str(lib / "slurm-wlm"),
                                                    str(install_root / "lib" / "x86_64-linux-gnu"),
                                                    os.environ.get("LD_LIBRARY_PATH", "")) if p)}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _only_loopback() -> bool:
    """No global IPv4 address: a loopback-only network namespace (`unshare -n`)."""
    if shutil.which("ip") is None:
        return False
    done = subprocess.run(["ip", "-o", "-4", "addr", "show", "scope", "global"], capture_output=True, text=True)
    return done.returncode == 0 and not done.stdout.strip()


def ensure_loopback_resolves() -> None:
    """In a loopback-only network namespace (scripts/test) Slurm cannot resolve 127.0.0.1 because it
    asks with AI_ADDRCONFIG; a second loopback address fixes it (slurm-local.md, pitfalls).
    Only done where lo is the only interface, i.e. inside such a private namespace."""
    if not _only_loopback():
        return
    subprocess.run(["ip", "addr", "add", "127.0.0.2/8", "dev", "lo"], check=False, capture_output=True)


@dataclass
class SlurmCluster:
    """Start with `start()` (or `with`), stop with `stop()`; node environments via `node_env`."""

    root: Path
    nodes: tuple[str, ...] = ("n1", "n2", "n3", "n4")
    node_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    partitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    gpus_per_node: int = 2
    cpus_per_node: int = 4
    install_root: Path | None = None  # Slurm and munge unpacked from their .deb files (None: installed)
    # folders the nodes must not see (nodes without the login node's filesystem): each slurmd, and so every
    # task it starts, sees an empty tmpfs there (see private_dirs_reason)
    private_dirs: tuple[Path, ...] = ()
    pids: dict[str, int] = field(default_factory=dict)
    killed: set[str] = field(default_factory=set)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """An environment whose Slurm clients talk to this cluster."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf)
        if self.install_root is not None:
            env.update(relocated_env(self.install_root))
        for name in [k for k in env if k.startswith(("SLURM_JOB", "SLURM_NODELIST", "SLURM_STEP"))]:
            env.pop(name)
        return env

    # -- configuration ----------------------------------------------------------------------
    def _write_config(self) -> None:
        root = self.root
        for sub in ("state", "spool", "log", "run", "gpus", "nodes", "munge"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(root / "munge", 0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        for i in range(self.gpus_per_node):
            dev = root / "gpus" / f"nvidia{i}"
            if not dev.exists():
                dev.symlink_to("/dev/null")  # gres wants a device whose name ends in the index
        self.write_node_env(self.node_env)
        prolog = root / "taskprolog.sh"
        prolog.write_text("#!/bin/sh\n"
                          f'f="{root}/nodes/$SLURMD_NODENAME.env"\n'
                          '[ -f "$f" ] && cat "$f"\n'
                          f'd="{root}/nodes/$SLURMD_NODENAME.delay"\n'
                          '[ -f "$d" ] && sleep "$(cat "$d")"\n'
                          "exit 0\n")
        prolog.chmod(0o755)
        ctld_port = _free_port()
        gres = ",".join(self.nodes)
        lines = [
            "ClusterName=envkit-test",
            "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={root / 'munge' / 'munge.sock'}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={root / 'state'}",
            f"SlurmdSpoolDir={root / 'spool'}/%n",
            f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={root / 'run'}/slurmd.%n.pid",
            f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={root / 'log'}/slurmd.%n.log",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "ReturnToService=2",
            "MinJobAge=4",
            "SlurmdTimeout=300",
            "InactiveLimit=0",
            "KillWait=2",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "GresTypes=gpu",
            f"TaskProlog={prolog}",
        ]
        if self.install_root is not None:
            lines.append(f"PluginDir={self.install_root / 'usr' / 'lib' / 'x86_64-linux-gnu' / 'slurm-wlm'}")
        for node in self.nodes:
            lines.append(f"NodeName={node} NodeHostname=localhost NodeAddr=127.0.0.1 Port={_free_port()} "
                         f"CPUs={self.cpus_per_node} RealMemory=1000 Gres=gpu:{self.gpus_per_node} State=UNKNOWN")
        lines.append(f"PartitionName=all Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE State=UP")
        for name, members in self.partitions.items():
            lines.append(f"PartitionName={name} Nodes={','.join(members)} MaxTime=INFINITE State=UP")
        self.conf.write_text("\n".join(lines) + "\n")
        last = self.gpus_per_node - 1
        (root / "gres.conf").write_text(
            "AutoDetect=off\n" + f"NodeName={gres} Name=gpu File={root / 'gpus'}/nvidia[0-{last}]\n")

    def write_node_env(self, node_env: Mapping[str, Mapping[str, str]]) -> None:
        """Set (replace) what each node's tasks see in their environment, e.g. a simulated driver."""
        for node in self.nodes:
            path = self.root / "nodes" / f"{node}.env"
            values = node_env.get(node) or {}
            path.write_text("".join(f"export {k}={v}\n" for k, v in values.items()))

    def set_delay(self, node: str, seconds: float | None) -> None:
        """Make a node slow: its tasks start `seconds` late (a TaskProlog sleep)."""
        path = self.root / "nodes" / f"{node}.delay"
        if seconds is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(f"{seconds:g}\n")

    # -- lifecycle --------------------------------------------------------------------------
    def _spawn(self, key: str, argv: list[str]) -> None:
        log = open(self.root / "log" / f"{key}.stdout", "ab")  # noqa: SIM115 - kept open for the daemon
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=self.env(), start_new_session=True)
        log.close()
        self._procs[key] = proc
        self.pids[key] = proc.pid

    def start(self, timeout: float = 20.0) -> SlurmCluster:
        ensure_loopback_resolves()
        self.root.mkdir(parents=True, exist_ok=True)
        self._write_config()
        munge = self.root / "munge"
        self._spawn("munged", [_exe("munged", self.install_root), "-F", "-f", f"--socket={munge / 'munge.sock'}",
                               f"--key-file={munge / 'munge.key'}", f"--pid-file={munge / 'munged.pid'}",
                               f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"])
        self._wait(lambda: (munge / "munge.sock").exists(), timeout, "munged did not create its socket")
        self._spawn("slurmctld", [_exe("slurmctld", self.install_root), "-D", "-c", "-i", "-f", str(self.conf)])
        stepd = ["-d", _exe("slurmstepd", self.install_root)] if self.install_root is not None else []
        hide: list[str] = []
        if self.private_dirs:
            hide = ["unshare", "-m", "--propagation", "private", "sh", "-c", _PRIVATE, "envkit-private",
                    str(len(self.private_dirs)), *(str(d) for d in self.private_dirs)]
            for folder in self.private_dirs:
                folder.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            # unshare and sh exec into slurmd: the recorded PID is the daemon's own
            self._spawn(f"slurmd:{node}", [*hide, _exe("slurmd", self.install_root), "-D", "-N", node, "-f",
                                           str(self.conf), *stepd])
        try:
            self._wait(self._all_idle, timeout, "the nodes did not become idle")
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, ready: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():  # type: ignore[operator]
                return
            dead = [k for k, p in self._procs.items() if p.poll() is not None and not k.startswith("slurmd:")]
            if dead:
                break
            time.sleep(0.05)
        raise RuntimeError(f"local Slurm: {what} within {timeout:g} s; logs in {self.root / 'log'}:\n"
                           + self.log_tail())

    def log_tail(self) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")):
            lines = path.read_text(errors="replace").splitlines()[-5:]
            out.append(f"== {path.name}\n" + "\n".join(lines))
        return "\n".join(out)

    def _all_idle(self) -> bool:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env(), capture_output=True,
                              text=True, timeout=10)
        if done.returncode != 0:
            return False
        states = {}
        for line in done.stdout.splitlines():
            name, _, state = line.partition(" ")
            states[name] = state
        return all(states.get(n, "").startswith("idle") for n in self.nodes)

    def kill_node(self, node: str) -> None:
        """Kill one node's slurmd (a dead node, as far as its jobs are concerned)."""
        proc = self._procs.pop(f"slurmd:{node}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.pids.pop(f"slurmd:{node}", None)
        self.killed.add(node)

    def stop(self) -> None:
        """Cancel jobs and let the queue drain while slurmd still runs (else slurmstepd lingers),
        then TERM exactly the recorded PIDs, then KILL what is left."""
        if "slurmctld" in self._procs and self._procs["slurmctld"].poll() is None:
            env = self.env()
            jobs = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True,
                                  timeout=10).stdout.split()
            if jobs:
                subprocess.run(["scancel", *jobs], env=env, capture_output=True, timeout=10)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    rows = subprocess.run(["squeue", "-h", "-o", "%i %N"], env=env, capture_output=True,
                                          text=True, timeout=10).stdout.splitlines()
                    # a job on a killed node never completes: only live nodes' jobs are waited for
                    if not [r for r in rows if not any(f" {n}" in r for n in self.killed)]:
                        break
                    time.sleep(0.1)
        order = [k for k in self._procs if k.startswith("slurmd:")] + ["slurmctld", "munged"]
        for key in order:
            proc = self._procs.get(key)
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for key in order:
            proc = self._procs.pop(key, None)
            if proc is None:
                continue
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.pids.clear()

    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()
