"""Hosts in network and UTS namespaces on one machine, for the real PBS and Flux clusters.

Each host is a network namespace with its own address on a private bridge (no route
anywhere: traffic stays between the namespaces and this machine) and a UTS namespace with
its own host name, held by one `sleep` whose pid `run` enters.  The names go into
/etc/hosts, marked, and come out again at `stop` (the only edit outside this module's own
directories).  Every process left in a namespace is ended by pid at `stop`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

HOSTS_MARK = "# jobenv-test-hosts"


def sh(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True, **kw)


def edit_hosts(keep: Callable[[str], bool], add: List[str]) -> None:
    """/etc/hosts less the lines `keep` refuses, plus `add`: one edit at a time on this machine.
    The Slurm cluster (serial pass) and the ssh host of the --remote tests (parallel pass) edit
    it at once; unlocked, one's read-modify-write could drop the other's lines (a node that no
    longer resolves).  Written in place: /etc/hosts may be a bind mount, which a rename breaks."""
    import fcntl

    with open("/run/jobenv-test-hosts.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        hosts = Path("/etc/hosts")
        lines = [ln for ln in hosts.read_text().splitlines() if keep(ln)] + add
        hosts.write_text("\n".join(lines) + "\n")


def kill(pid: int, sig: int) -> None:
    """Signal a process we started (or one left in our namespace); gone already is fine."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


class Hosts:
    """`names` as hosts: `start()` makes them, `run(host, argv)` runs there, `stop()` undoes."""

    def __init__(self, names: List[str], kind: str) -> None:
        tag = f"{os.getpid() % 10000:04d}"
        self.tag, self.kind, self.names = tag, kind, list(names)
        base = {"pbs": 150, "flux": 100}.get(kind, 50)  # apart from the Slurm cluster's 10.200-249
        self.subnet = f"10.{base + int(tag) % 50}.{int(tag) % 250}"
        self.bridge = f"je{kind[:2]}{tag}"
        self.addr = {n: f"{self.subnet}.{11 + i}" for i, n in enumerate(self.names)}
        self.ns = {n: f"je{tag}-{n}" for n in self.names}
        self.holders: Dict[str, subprocess.Popen] = {}

    def start(self) -> "Hosts":
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, n in enumerate(self.names):
            ns, outer, inner = self.ns[n], f"j{self.kind[0]}v{self.tag}{i}", f"j{self.kind[0]}p{self.tag}{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", outer, "master", self.bridge)
            sh("ip", "link", "set", outer, "up")
            sh("ip", "-n", ns, "link", "set", inner, "name", "eth0")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[n]}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            self.holders[n] = subprocess.Popen(
                ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "sh", "-c",
                 f"hostname {n} && exec sleep 100000"], start_new_session=True)
        self._hosts_file(add=True)
        for n in self.names:  # the holder has set its host name
            deadline = time.time() + 10
            while self.run(n, ["hostname"], check=False).stdout.strip() != n:
                if time.time() > deadline:
                    raise RuntimeError(f"host {n} did not come up")
                time.sleep(0.05)
        return self

    def enter(self, host: str) -> List[str]:
        """The argv prefix that runs a command on `host` (its network and host name)."""
        return ["nsenter", "--target", str(self.holders[host].pid), "--net", "--uts", "--"]

    def run(self, host: str, argv: List[str], check: bool = True, env: Optional[Dict[str, str]] = None,
            timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(self.enter(host) + argv, env=env, capture_output=True, text=True, check=check,
                              timeout=timeout, **kw)

    def _hosts_file(self, add: bool) -> None:
        mark = f"{HOSTS_MARK} {self.kind} {self.tag}"
        edit_hosts(lambda ln: not ln.endswith(mark), [f"{self.addr[n]} {n} {mark}" for n in self.names] if add else [])

    def pids(self) -> List[int]:
        out: List[int] = []
        for n in self.names:
            out += [int(p) for p in sh("ip", "netns", "pids", self.ns[n], check=False).stdout.split()]
        return out

    def stop(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.pids():
                kill(pid, sig)
            deadline = time.time() + 5
            while self.pids() and time.time() < deadline:
                time.sleep(0.1)
        for p in self.holders.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for i, n in enumerate(self.names):
            sh("ip", "netns", "del", self.ns[n], check=False)
            sh("ip", "link", "del", f"j{self.kind[0]}v{self.tag}{i}", check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        self._hosts_file(add=False)
