"""A real OpenPBS on this machine: server, scheduler, comm and PostgreSQL data service on
pbs1, one pbs_mom on each of pbs1, pbs2, pbs3, every host in its own network and UTS
namespace (tests/cluster/netns.py).

OpenPBS is not a Debian package: it is found, built from source, at $JOBENV_OPENPBS or
/root/.cache/jobenv-ci/openpbs (the PBS_EXEC of a `make install`); without it the tests
skip, saying so in one line.  What a working PBS here needs (each learnt by failing):
- a host name that resolves to an address other than 127.0.0.1 ("Could not find any
  usable IP address"): hence the namespaces;
- PBS_HOME outside any world-writable directory (pbs_mom's chk_file_sec refuses /tmp),
  and where the data service's user (postgres) can reach it: /var/lib/jobenv-test/pbs-TAG;
- PBS_CONF_FILE exported (the scripts read `${PBS_CONF_FILE:-/etc/pbs.conf}`; /etc is
  never written);
- root's jobs: `acl_roots = root@*`; `qstat -x`: `job_history_enable`; output copied
  between hosts by `$usecp *:/ /` (no scp); `place=scatter` for one chunk per host.
Daemons are started by PBS's own init script in each host's namespaces and ended by pid
(every process left in those namespaces) at `stop`.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Dict, List, Optional

from .netns import Hosts

CACHE = Path("/root/.cache/jobenv-ci")


def pbs_exec() -> Optional[Path]:
    found = os.environ.get("JOBENV_OPENPBS") or str(CACHE / "openpbs")
    return Path(found) if Path(found, "sbin", "pbs_server").exists() else None


def available() -> Optional[str]:
    """None when a PBS cluster can be started here, else the one-line reason it cannot."""
    if os.geteuid() != 0:
        return "the OpenPBS test cluster needs root (network namespaces, PBS daemons)"
    if pbs_exec() is None:
        return ("OpenPBS is not built: set JOBENV_OPENPBS to its PBS_EXEC (or install it into "
                f"{CACHE}/openpbs) to run the real-PBS tests")
    for prog in ("ip", "nsenter", "unshare", "pg_config"):
        if shutil.which(prog) is None:
            return f"{prog} is not installed (apt-get install iproute2 util-linux postgresql postgresql-server-dev-all)"
    return None


class PBSCluster:
    def __init__(self, names: Optional[List[str]] = None, ncpus: int = 4) -> None:
        exe = pbs_exec()
        assert exe is not None
        self.exec = exe
        self.names = names or ["pbs1", "pbs2", "pbs3"]
        self.server = self.names[0]
        self.hosts = Hosts(self.names, "pbs")
        self.root = Path("/var/lib/jobenv-test") / f"pbs-{self.hosts.tag}"
        self.ncpus = ncpus
        self.startup_seconds = 0.0

    def conf(self, host: str) -> Path:
        return self.root / f"{host}.conf"

    def home(self, host: str) -> Path:
        return self.root / host

    # ---------------------------------------------------------------- bring-up
    def start(self) -> "PBSCluster":
        t = time.time()
        try:
            for d in (self.root.parent, self.root):
                d.mkdir(mode=0o755, exist_ok=True)
                d.chmod(0o755)
            self.hosts.start()
            for h in self.names:
                self._install(h)
            self._init(self.server)
            self.qmgr("set server acl_roots = root@*", "set server flatuid = True",
                      "set server job_history_enable = True", "set server scheduler_iteration = 5",
                      *[f"create node {h}" for h in self.names if h != self.server],
                      *[f"set node {h} resources_available.ncpus = {self.ncpus}" for h in self.names])
            for h in self.names[1:]:
                self._init(h)
            self.wait_nodes_free(timeout=90)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.time() - t
        return self

    def _install(self, host: str) -> None:
        server = host == self.server
        on = "1" if server else "0"
        self.conf(host).write_text("".join(f"{k}={v}\n" for k, v in (
            ("PBS_EXEC", self.exec), ("PBS_HOME", self.home(host)), ("PBS_SERVER", self.server),
            ("PBS_START_SERVER", on), ("PBS_START_SCHED", on), ("PBS_START_COMM", on), ("PBS_START_MOM", "1"),
            ("PBS_CORE_LIMIT", "0"), ("PBS_SCP", "/bin/false"))))
        version = self.run(host, ["qstat", "--version"]).stdout.split("=")[-1].strip()
        argv = ([str(self.exec / "libexec" / "pbs_postinstall"), "server", version, str(self.exec), str(self.home(host)),
                 "postgres", "sameconf"] if server else
                [str(self.exec / "libexec" / "pbs_postinstall"), "execution", version, str(self.exec),
                 str(self.home(host)), "sameconf"])
        self.run(host, argv)
        # the job's output files go back by cp on shared paths, never by scp/rcp
        (self.home(host) / "mom_priv" / "config").write_text(f"$clienthost {self.server}\n$usecp *:/ /\n")

    def _init(self, host: str) -> None:
        p = self.run(host, [str(self.exec / "libexec" / "pbs_init.d"), "start"], check=False, timeout=180)
        if p.returncode != 0:
            raise RuntimeError(f"PBS did not start on {host}: {p.stdout[-2000:]}{p.stderr[-2000:]}")

    def wait_nodes_free(self, timeout: float) -> None:
        deadline = time.time() + timeout
        states: Dict[str, str] = {}
        while time.time() < deadline:
            out = self.run(self.server, ["pbsnodes", "-a", "-F", "dsv"], check=False).stdout
            states = {}
            for line in out.splitlines():
                f = dict(kv.split("=", 1) for kv in line.split("|") if "=" in kv)
                if "Mom" in f:
                    states[f.get("vnode", f["Mom"])] = f.get("state", "")
            if len(states) == len(self.names) and all(s == "free" for s in states.values()):
                return
            time.sleep(0.5)
        raise RuntimeError(f"PBS nodes not free after {timeout} s: {states}; logs in {self.root}")

    # ---------------------------------------------------------------- use
    def env(self, host: Optional[str] = None, **extra: str) -> Dict[str, str]:
        """A shell's environment on `host` with PBS's commands on PATH and its pbs.conf."""
        host = host or self.server
        path = f"{self.exec}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return {**os.environ, "PATH": path, "PBS_CONF_FILE": str(self.conf(host)), **extra}

    def run(self, host: str, argv: List[str], check: bool = True, env: Optional[Dict[str, str]] = None,
            timeout: float = 120, **kw):
        p = self.hosts.run(host, argv, check=False, env=env or self.env(host), timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} on {host}: exit {p.returncode}: {p.stderr.strip()[-1000:]}")
        return p

    def qmgr(self, *commands: str) -> None:
        for c in commands:
            self.run(self.server, ["qmgr", "-c", c])

    def qsub(self, *args: str, env: Optional[Dict[str, str]] = None) -> str:
        return self.run(self.server, ["qsub", *args], env=env).stdout.strip()

    def job(self, jobid: str) -> Dict[str, object]:
        import json

        out = self.run(self.server, ["qstat", "-x", "-f", "-F", "json", jobid]).stdout
        return next(iter(json.loads(out)["Jobs"].values()))

    def wait_state(self, jobid: str, want, timeout: float = 60) -> str:
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            state = str(self.job(jobid).get("job_state", ""))
            if state in want:
                return state
            time.sleep(0.3)
        raise TimeoutError(f"job {jobid} is {state!r}, not {want}, after {timeout} s")

    # ---------------------------------------------------------------- tear-down
    def stop(self) -> None:
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        self.hosts.stop()
        shutil.rmtree(self.root, ignore_errors=True)
