"""A real OpenSSH server playing a cluster's login node, for the `--remote` tests.

It runs in a network namespace it is given (a netns.Hosts host, or a node of the Slurm test
cluster) with a config of its own in a temporary directory: its own host key, the test
user's key (made here, per test session) in its own authorized_keys, no PAM, a non-default
port (PORT; PASSWORD_PORT also offers password logins: the prompt a batch call must not
wait on).  The client side is the real ssh too, with an ssh_config of its own (JOBENV_SSH
points at a wrapper that adds `-F`): the user's ~/.ssh is never read or written.

Aliases in that ssh_config: `login` (the key, the right host key), `nokey` (a key the server
does not know), `changed` (a host key other than the server's on record), `prompt` (the
password port, a key it refuses), `down` (a port nobody listens on), `unknown` (no host key on
record yet).
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import List

PORT, PASSWORD_PORT, DOWN_PORT = 22022, 22023, 22029


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "jobenv-test", "-f", str(path)],
                   check=True, capture_output=True)
    return (path.parent / (path.name + ".pub")).read_text().strip()


class Sshd:
    """`start()` runs sshd through the argv prefix `enter` (a namespace) on `address`;
    `stop()` ends it and every session it started."""

    def __init__(self, workdir: Path, enter: List[str], address: str) -> None:
        self.dir, self.enter, self.address = Path(workdir), list(enter), address
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc: "subprocess.Popen[bytes] | None" = None
        # the master sockets' directory: short (a socket path has ~104 bytes), ours alone
        self.runtime = tempfile.mkdtemp(prefix="jessh")

    def start(self) -> "Sshd":
        d = self.dir
        host_pub = _keygen(d / "host_key")
        other_pub = _keygen(d / "other_host_key")
        user_pub = _keygen(d / "user_key")
        _keygen(d / "stranger_key")
        (d / "authorized_keys").write_text(user_pub + "\n")
        (d / "authorized_keys").chmod(0o600)
        (d / "sshd_config").write_text("\n".join([
            f"ListenAddress {self.address}:{PORT}", f"ListenAddress {self.address}:{PASSWORD_PORT}",
            f"HostKey {d}/host_key", f"PidFile {d}/sshd.pid", f"AuthorizedKeysFile {d}/authorized_keys",
            "UsePAM no", "StrictModes no", "PermitRootLogin yes", "PubkeyAuthentication yes",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "X11Forwarding no",
            "AllowTcpForwarding no", "PrintMotd no", "MaxSessions 20",
            f"Match LocalPort {PASSWORD_PORT}", "  PasswordAuthentication yes", ""]))
        def host(alias: str, port: int, key: str, host_key_alias: str) -> List[str]:
            return [f"Host {alias}", f"  HostName {self.address}", f"  Port {port}", "  User root",
                    f"  IdentityFile {d}/{key}", "  IdentitiesOnly yes", f"  HostKeyAlias {host_key_alias}",
                    f"  UserKnownHostsFile {d}/known_hosts", "  GlobalKnownHostsFile /dev/null",
                    "  StrictHostKeyChecking yes", "  CheckHostIP no", "  ConnectTimeout 10"]
        (d / "ssh_config").write_text("\n".join(
            host("login", PORT, "user_key", "jobenv-login") + host("nokey", PORT, "stranger_key", "jobenv-login")
            + host("changed", PORT, "user_key", "jobenv-changed")
            + host("prompt", PASSWORD_PORT, "stranger_key", "jobenv-login")
            + host("down", DOWN_PORT, "user_key", "jobenv-login")
            + host("unknown", PORT, "user_key", "jobenv-unknown")) + "\n")
        (d / "known_hosts").write_text(f"jobenv-login {' '.join(host_pub.split()[:2])}\n"
                                       f"jobenv-changed {' '.join(other_pub.split()[:2])}\n")
        self.ssh = d / "ssh"
        self.ssh.write_text(f"#!/bin/sh\nexec ssh -F {d}/ssh_config \"$@\"\n")
        self.ssh.chmod(0o755)
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
        self.proc = subprocess.Popen([*self.enter, "/usr/sbin/sshd", "-D", "-f", f"{d}/sshd_config",
                                      "-E", f"{d}/sshd.log"], start_new_session=True)
        deadline = time.time() + 20
        while time.time() < deadline:
            p = subprocess.run([str(self.ssh), "-o", "BatchMode=yes", "login", "true"], capture_output=True,
                               stdin=subprocess.DEVNULL, timeout=30)
            if p.returncode == 0:
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited ({self.proc.returncode}): {(d / 'sshd.log').read_text()}")
            time.sleep(0.2)
        raise RuntimeError(f"sshd did not answer: {p.stderr!r}")

    def env(self) -> dict:
        """What the laptop's jobenv needs: this ssh, and the sockets' directory."""
        return {"JOBENV_SSH": str(self.ssh), "XDG_RUNTIME_DIR": self.runtime}

    def sessions(self) -> List[int]:
        """sshd's children: the sessions still open (a master's, a command's)."""
        if self.proc is None or self.proc.poll() is not None:
            return []
        p = subprocess.run(["pgrep", "-P", str(self._pid())], capture_output=True, text=True)
        return [int(x) for x in p.stdout.split()]

    def _pid(self) -> int:
        """sshd's own pid (the nsenter in front of it execs it: the same process)."""
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        for pid in self.sessions():
            os.kill(pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", self.runtime])
