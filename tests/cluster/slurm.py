"""A real Slurm cluster on this machine: munge, slurmctld, and one slurmd per node, each
node in its own network namespace with its own host name and address.

Debian's Slurm 22.05 + munge; systemd is not running, so the daemons are started by hand
and stopped by the PIDs and names created here (also when a test fails).  The nodes'
addresses are a private /24 on a bridge that has no route anywhere: traffic stays between
these namespaces and the host.  Needs root (namespaces, /etc/hosts, munge).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from cluster.netns import edit_hosts

HOSTS_MARK = "# jobenv-test-cluster"


def available() -> Optional[str]:
    """None when a cluster can be started here, else the reason it cannot."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (network namespaces, munge, /etc/hosts)"
    for prog in ("slurmctld", "slurmd", "sbatch", "munged", "ip", "nsenter", "unshare"):
        if shutil.which(prog) is None and not Path(f"/usr/sbin/{prog}").exists():
            return f"{prog} is not installed (apt-get install slurmctld slurmd slurm-client munge iproute2)"
    return None


def _kill(pid: int, sig: int, group: bool = False) -> None:
    """Signal a process (or its process group) we started; gone already is fine."""
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except ProcessLookupError:
        pass


def sweep_stale(tag: str) -> None:
    """What a killed session's Slurm cluster left (its clusters start only under the machine's
    cluster lock, which this one holds: any other is stale): its nodes' namespaces and what runs
    in them, its bridge, its /etc/hosts lines (a stale `node1` line would shadow ours)."""
    import re

    names = _run("ip", "netns", "list", check=False).stdout.split()
    for ns in [n for n in names if re.fullmatch(r"je\d{4}-node\d+", n) and not n.startswith(f"je{tag}-")]:
        for pid in _run("ip", "netns", "pids", ns, check=False).stdout.split():
            _kill(int(pid), signal.SIGKILL)
        _run("ip", "netns", "del", ns, check=False)
    links = _run("ip", "-br", "link", check=False).stdout.split("\n")
    for name in [ln.split()[0].split("@")[0] for ln in links if ln.strip()]:
        if re.fullmatch(r"jebr\d{4}", name) and name != f"jebr{tag}":
            _run("ip", "link", "del", name, check=False)
    edit_hosts(lambda ln: HOSTS_MARK not in ln or ln.endswith(f"{HOSTS_MARK} {tag}"), [])


def _under_the_cluster_lock() -> None:
    """Refuse to start where nobody holds the machine's cluster lock (tests/conftest.py's
    ClusterPool takes it): a cluster started beside another sweeps the other's nodes away as
    stale (a test's own cluster in the parallel pass did, and the serial pass's sbatch failed)."""
    import fcntl

    fd = os.open("/tmp/jobenv-cluster.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # taken: nobody held it, so not this session either
    except BlockingIOError:
        return
    finally:
        os.close(fd)
    raise RuntimeError("a Slurm test cluster starts only under /tmp/jobenv-cluster.lock: "
                       "ask for the `slurm_cluster` fixture (tests/conftest.py), not SlurmCluster")


def _run(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, **kw)


class SlurmCluster:
    def __init__(self, workdir: Path, nodes: int = 4, cpus: int = 4) -> None:
        self.dir = Path(workdir)
        tag = f"{os.getpid() % 10000:04d}"
        self.tag = tag
        self.bridge = f"jebr{tag}"
        self.subnet = f"10.{200 + int(tag) % 50}.{int(tag) % 250}"
        self.nodes = [f"node{i + 1}" for i in range(nodes)]
        self.addr = {n: f"{self.subnet}.{11 + i}" for i, n in enumerate(self.nodes)}
        self.ns = {n: f"je{tag}-{n}" for n in self.nodes}
        self.cpus = cpus
        self.conf = self.dir / "slurm.conf"
        self.ctld_port = 20000 + int(tag) % 5000 * 2
        self.procs: Dict[str, subprocess.Popen] = {}
        self.munged_pid: Optional[int] = None
        self.hostname = socket.gethostname()

    # ---------------------------------------------------------------- bring-up
    def start(self) -> "SlurmCluster":
        t = time.time()
        _under_the_cluster_lock()
        sweep_stale(self.tag)
        try:
            self._munge()
            self._network()
            self._write_conf()
            self._hosts_file(add=True)
            self._daemons()
            self._wait_idle(timeout=60)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.time() - t
        return self

    def _munge(self) -> None:
        key = Path("/etc/munge/munge.key")
        if not key.exists():
            _run("/usr/sbin/mungekey", "--create", "--keyfile", str(key))
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
        for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
            Path(d).mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "munge", "munge")
        if _run("munge", "-n", check=False).returncode == 0:
            return  # a munged is already serving this machine: use it, do not own it
        _run("runuser", "-u", "munge", "--", "/usr/sbin/munged", "--force")
        pidfile = Path("/run/munge/munged.pid")
        for _ in range(50):
            if _run("munge", "-n", check=False).returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("munged did not start")
        if pidfile.exists():
            self.munged_pid = int(pidfile.read_text().split()[0])

    def _network(self) -> None:
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")
        for i, node in enumerate(self.nodes):
            ns, host_end, ns_end = self.ns[node], f"jev{self.tag}{i}", f"jep{self.tag}{i}"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            _run("ip", "link", "set", ns_end, "netns", ns)
            _run("ip", "link", "set", host_end, "master", self.bridge)
            _run("ip", "link", "set", host_end, "up")
            _run("ip", "-n", ns, "link", "set", ns_end, "name", "eth0")
            _run("ip", "-n", ns, "addr", "add", f"{self.addr[node]}/24", "dev", "eth0")
            _run("ip", "-n", ns, "link", "set", "eth0", "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    def _write_conf(self) -> None:
        d = self.dir
        for sub in ("state", "spool", "log", "tmp"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            (d / "spool" / node).mkdir(exist_ok=True)
            (d / "tmp" / node).mkdir(exist_ok=True)
        lines = [
            "ClusterName=jobenvtest",
            f"SlurmctldHost={self.hostname}({self.subnet}.1)",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd.%n.log",
            "SlurmctldDebug=info", "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides", "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none", "JobCompType=jobcomp/none", "MpiDefault=none",
            "SwitchType=switch/none", "ReturnToService=2", f"TmpFS={d}/tmp/%n",
            "SchedulerType=sched/builtin", "MinJobAge=2", "KillWait=2", "InactiveLimit=0",
            # MessageTimeout 60 (default 10): daemons answer slowly on a loaded 2-core CI machine,
            # and Slurm's docs advise more for busy nodes
            "SlurmctldTimeout=30", "SlurmdTimeout=30", "MessageTimeout=60",
            "LaunchParameters=use_interactive_step",
            # a requeued job waits out its old credential's lifetime before it may start again
            # (default 120 s; a step's launch must still arrive within it on a loaded machine)
            "AuthInfo=cred_expire=30", "JobRequeue=1",
        ]
        for node in self.nodes:
            lines.append(f"NodeName={node} NodeAddr={self.addr[node]} NodeHostname={node} Port=6818 "
                         f"CPUs={self.cpus} State=UNKNOWN")
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO")
        self.conf.write_text("\n".join(lines) + "\n")

    def _hosts_file(self, add: bool) -> None:
        mark = f"{HOSTS_MARK} {self.tag}"
        edit_hosts(lambda ln: not ln.endswith(mark), [f"{self.addr[n]} {n} {mark}" for n in self.nodes] if add else [])

    def _daemons(self) -> None:
        env = {**os.environ, "SLURM_CONF": str(self.conf)}
        log = open(self.dir / "log" / "daemons.out", "ab")
        self.procs["slurmctld"] = subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(self.conf)], env=env,
                                                   stdout=log, stderr=log, start_new_session=True)
        for node in self.nodes:
            cmd = ["nsenter", f"--net=/run/netns/{self.ns[node]}", "unshare", "--uts", "sh", "-c",
                   f'hostname {node} && exec slurmd -D -N {node} -f "$SLURM_CONF"']
            self.procs[node] = subprocess.Popen(cmd, env=env, stdout=log, stderr=log, start_new_session=True)

    def _wait_idle(self, timeout: float) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for name, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited ({p.returncode}); see {self.dir}/log")
            out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout.split("\n")
            states = dict(ln.split() for ln in out if ln.strip())
            if len(states) == len(self.nodes) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.2)
        raise RuntimeError(f"nodes not idle after {timeout} s: {states}; see {self.dir}/log")

    # ---------------------------------------------------------------- use
    def env(self, **extra: str) -> Dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def run(self, argv: List[str], check: bool = True, env=None, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(argv, env=env or self.env(), capture_output=True, text=True, check=check,
                              timeout=kw.pop("timeout", 120), **kw)

    def on_node(self, node: str, argv: List[str]) -> List[str]:
        """argv prefix that runs inside `node` (its network and host name), as after `ssh node`."""
        pid = self.procs[node].pid
        return ["nsenter", "--target", str(pid), "--net", "--uts", "--", *argv]

    def sbatch(self, script: str, *args: str, env=None) -> str:
        p = self.run(["sbatch", "--parsable", *args], input=script, env=env, check=False)
        if p.returncode != 0:  # say why (a node down, a partition's limits), with the nodes' states
            nodes = self.run(["sinfo", "-N", "-h", "-o", "%N %T %E"], check=False).stdout
            raise AssertionError(f"sbatch {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}\n{nodes}")
        return p.stdout.strip().split(";")[0]

    def wait_state(self, jobid: str, want, timeout: float = 60) -> str:
        """Poll squeue (sbatch --wait backs off for seconds) until the job's state is in `want`."""
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            state = self.run(["squeue", "-h", "-j", jobid, "-o", "%T"], check=False).stdout.strip()
            if state in want:
                return state
            time.sleep(0.1)
        raise TimeoutError(f"job {jobid} is {state!r}, not {want}, after {timeout} s")

    def wait_gone(self, jobid: str, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            p = self.run(["squeue", "-h", "-j", jobid, "-o", "%T"], check=False)
            if p.returncode != 0 or not p.stdout.strip():
                return
            time.sleep(0.2)
        raise TimeoutError(f"job {jobid} still listed after {timeout} s")

    # a job in one of these states holds (or will hold) nodes
    ACTIVE = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                        "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED"})

    def wait_settled(self, jobid: str, timeout: float = 60) -> None:
        """Until the job holds no node: gone from squeue, or in a final state (a finished
        job stays listed for MinJobAge as COMPLETED/CANCELLED, nodes already free)."""
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            p = self.run(["squeue", "-h", "-j", jobid, "-o", "%T"], check=False)
            state = p.stdout.strip()
            if p.returncode != 0 or not (set(state.split()) & self.ACTIVE):
                return
            time.sleep(0.2)
        raise TimeoutError(f"job {jobid} still {state!r} after {timeout} s")

    # ---------------------------------------------------------------- tear-down
    def stop(self) -> None:
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        try:
            self.run(["scancel", "--full", "-u", "root"], check=False, timeout=10)
        except Exception:
            pass
        for p in reversed(list(self.procs.values())):
            if p.poll() is None:
                _kill(p.pid, signal.SIGTERM, group=True)
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _kill(p.pid, signal.SIGKILL, group=True)
                p.wait(timeout=5)
        if self.munged_pid:
            _kill(self.munged_pid, signal.SIGTERM)
        for node in self.nodes:
            for pid in _run("ip", "netns", "pids", self.ns[node], check=False).stdout.split():
                _kill(int(pid), signal.SIGKILL)
            _run("ip", "netns", "del", self.ns[node], check=False)
        for i, _ in enumerate(self.nodes):
            _run("ip", "link", "del", f"jev{self.tag}{i}", check=False)
        _run("ip", "link", "del", self.bridge, check=False)
        self._hosts_file(add=False)
