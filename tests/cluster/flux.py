"""A real 3-host Flux instance on this machine: one flux-broker on each of flux1, flux2,
flux3, each host in its own network and UTS namespace (tests/cluster/netns.py),
bootstrapped from a TOML config (`bootstrap.hosts`, tcp, a CURVE certificate) as a
site's system instance is, with no initial program (`broker.rc2_none`).

flux-core is not a Debian package here: it is found, built from source, at
$JOBENV_FLUX (the prefix of a `make install`) or /root/.cache/jobenv-ci/flux; without it
the tests skip, saying so in one line.  `flux start --test-size=N` would be quicker but
every broker reports this machine's host name; these report their own.  The brokers and
everything they start are ended by pid (every process in the namespaces) at `stop`.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

from .netns import Hosts

CACHE = Path("/root/.cache/jobenv-ci")
PORT = 8050


def prefix() -> Optional[Path]:
    found = os.environ.get("JOBENV_FLUX") or str(CACHE / "flux")
    return Path(found) if Path(found, "bin", "flux").exists() else None


def available() -> Optional[str]:
    """None when a Flux instance can be started here, else the one-line reason it cannot."""
    if os.geteuid() != 0:
        return "the Flux test cluster needs root (network namespaces)"
    if prefix() is None:
        return (f"flux-core is not built: set JOBENV_FLUX to its install prefix (or install it into {CACHE}/flux) "
                "to run the real-Flux tests")
    for prog in ("ip", "nsenter", "unshare"):
        if shutil.which(prog) is None:
            return f"{prog} is not installed (apt-get install iproute2 util-linux)"
    return None


class FluxCluster:
    def __init__(self, names: Optional[List[str]] = None) -> None:
        found = prefix()
        assert found is not None
        self.prefix = found
        self.flux = str(found / "bin" / "flux")
        self.names = names or ["flux1", "flux2", "flux3"]
        self.hosts = Hosts(self.names, "flux")
        self.root = Path("/var/lib/jobenv-test") / f"flux-{self.hosts.tag}"
        self.brokers: Dict[str, subprocess.Popen] = {}
        self.startup_seconds = 0.0

    def uri(self, host: Optional[str] = None) -> str:
        return f"local://{self.root / (host or self.names[0]) / 'local'}"

    # ---------------------------------------------------------------- bring-up
    def start(self) -> "FluxCluster":
        t = time.time()
        try:
            for d in (self.root.parent, self.root):
                d.mkdir(mode=0o755, exist_ok=True)
                d.chmod(0o755)
            self.hosts.start()
            cert = self.root / "curve.cert"
            subprocess.run([self.flux, "keygen", str(cert)], check=True, capture_output=True)
            conf = self.root / "conf"
            conf.mkdir()
            first, last = self.names[0], self.names[-1]
            stem = first.rstrip("0123456789")
            hostlist = f"{stem}[{first[len(stem):]}-{last[len(stem):]}]"
            (conf / "bootstrap.toml").write_text(
                f'[bootstrap]\ncurve_cert = "{cert}"\ndefault_port = {PORT}\n'
                'default_bind = "tcp://eth0:%p"\ndefault_connect = "tcp://%h:%p"\n'
                f'hosts = [ {{ host = "{hostlist}" }} ]\n')
            log = open(self.root / "brokers.log", "ab")
            for h in self.names:
                rundir = self.root / h
                rundir.mkdir(mode=0o700)
                argv = [self.flux, "broker", f"--config-path={conf}", f"-Srundir={rundir}",
                        f"-Sstatedir={rundir}", f"-Slocal-uri={self.uri(h)}", "-Sbroker.rc2_none=1", "-Sbroker.quorum=" + str(len(self.names)),
                        "-Slog-stderr-level=5", "-Sbroker.shutdown-timeout=10"]
                self.brokers[h] = subprocess.Popen(self.hosts.enter(h) + argv, stdout=log, stderr=log,
                                                   env=self.env(h), start_new_session=True)
            self.wait_online(timeout=120)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.time() - t
        return self

    def wait_online(self, timeout: float) -> None:
        deadline = time.time() + timeout
        out = ""
        while time.time() < deadline:
            for h, p in self.brokers.items():
                if p.poll() is not None:
                    raise RuntimeError(f"flux broker on {h} exited ({p.returncode}); see {self.root}/brokers.log")
            p = self.run(self.names[0], [self.flux, "resource", "list", "-n", "-s", "free", "-o", "{nnodes}"],
                         check=False, timeout=20)
            out = p.stdout.strip()
            if out == str(len(self.names)):
                return
            time.sleep(0.5)
        raise RuntimeError(f"flux: {out!r} of {len(self.names)} nodes free after {timeout} s; see {self.root}")

    # ---------------------------------------------------------------- use
    def env(self, host: Optional[str] = None, **extra: str) -> Dict[str, str]:
        """A login shell's environment on `host`: flux on PATH, FLUX_URI its broker."""
        path = f"{self.prefix}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}"
        return {**os.environ, "PATH": path, "FLUX_URI": self.uri(host), **extra}

    def run(self, host: str, argv: List[str], check: bool = True, env: Optional[Dict[str, str]] = None,
            timeout: float = 120, **kw) -> subprocess.CompletedProcess:
        p = self.hosts.run(host, argv, check=False, env=env or self.env(host), timeout=timeout, **kw)
        if check and p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} on {host}: exit {p.returncode}: {p.stderr.strip()[-1000:]}")
        return p

    def wait_inactive(self, jobid: str, timeout: float = 60) -> str:
        deadline = time.time() + timeout
        state = ""
        while time.time() < deadline:
            state = self.run(self.names[0], [self.flux, "jobs", "-n", "-o", "{state}", jobid], check=False).stdout.strip()
            if state == "INACTIVE":
                return state
            time.sleep(0.3)
        raise TimeoutError(f"flux job {jobid} is {state!r} after {timeout} s")

    # ---------------------------------------------------------------- tear-down
    def stop(self) -> None:
        if getattr(self, "_stopped", False):
            return
        self._stopped = True
        if self.brokers:
            try:
                self.run(self.names[0], [self.flux, "shutdown", "--quiet"], check=False, timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self.hosts.stop()
        for p in self.brokers.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
