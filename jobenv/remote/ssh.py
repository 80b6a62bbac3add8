"""One ssh connection per remote: the master, the calls through it, and ssh's failures in one line.

The user's own ssh does everything that matters for security: their ~/.ssh/config (jump
hosts, keys, agents), their known_hosts (host keys checked as they always are: no option
here turns that off), their MFA prompt.  jobenv only adds a master connection
(ControlMaster) with its socket in a 0700 directory of the user's own, so that a prompt is
answered once and every later call of the session rides on it; without a terminal
(BatchMode=yes) ssh never waits on a prompt, and the failure says to log in first.

The remote command line holds only characters every login shell reads as themselves (the
checked jobenv path, `remote exec`, and the call itself as hex), so it means the same in
sh, bash, zsh, fish and csh: no quoting rule to get wrong.  The remote jobenv writes MARKER
on stderr before anything else; what came before it is ssh's or the login shell's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any, Callable, Dict, List, Mapping, Optional

from jobenv.core.errors import RemoteFailed, visible
from jobenv.remote.remotes import Remote

MARKER = b"jobenv-remote: started\n"
PERSIST = "15m"  # how long the master outlives its last call (ssh's ControlPersist)
SSH_LOST = 255  # ssh's own failure; a jobenv there never exits 255 (remote exec maps signals to 128+N)


def ssh_program(env: Mapping[str, str]) -> str:
    """JOBENV_SSH (one program, as GIT_SSH: a wrapper that adds -F, say), else ssh."""
    return env.get("JOBENV_SSH") or "ssh"


def control_dir(env: Mapping[str, str]) -> str:
    """The master sockets' directory: 0700 and the user's own (a socket there lets anyone
    who can reach it run commands as the user on the cluster)."""
    from jobenv.store.paths import own_dir

    base = env.get("XDG_RUNTIME_DIR") or ""
    base = base if os.path.isabs(base) else tempfile.gettempdir()
    d = os.path.join(base, f"jobenv-ssh-{os.getuid()}")
    own_dir(d, "ssh control directory", "set XDG_RUNTIME_DIR to a directory of your own")
    os.chmod(d, 0o700)
    return d


def base_argv(env: Mapping[str, str], batch: bool) -> List[str]:
    argv = [ssh_program(env), "-o", f"ControlPath={control_dir(env)}/%C"]
    return argv + (["-o", "BatchMode=yes"] if batch else [])


def is_batch() -> bool:
    """No terminal to answer a prompt on."""
    try:
        return not os.isatty(0)
    except (OSError, ValueError):
        return True


def _ssh(env: Mapping[str, str], argv: List[str], timeout: float, **kw: Any) -> "subprocess.CompletedProcess[bytes]":
    """Run ssh (a control command, or the master's start); a missing ssh or one that hangs is one line."""
    try:
        return subprocess.run(argv, timeout=timeout, **kw)
    except FileNotFoundError:
        raise RemoteFailed(f"no ssh program {visible(argv[0])!r}: install OpenSSH's client, or set JOBENV_SSH") \
            from None
    except subprocess.TimeoutExpired:
        raise RemoteFailed(f"{visible(argv[0])} did not answer within {timeout:.0f} s") from None


def master_up(env: Mapping[str, str], r: Remote) -> bool:
    p = _ssh(env, [*base_argv(env, True), "-O", "check", "--", r.dest], 30, stdin=subprocess.DEVNULL,
             capture_output=True)
    return p.returncode == 0


def connect(env: Mapping[str, str], r: Remote, batch: Optional[bool] = None) -> bool:
    """The master connection up (started here, prompting on the terminal if ssh must);
    True if this call started it.  Fails with one line (RemoteFailed)."""
    if master_up(env, r):
        return False
    batch = is_batch() if batch is None else batch
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: the master keeps no end of it open
        p = _ssh(env, [*base_argv(env, batch), "-o", "ControlMaster=yes", "-o", f"ControlPersist={PERSIST}",
                       "-f", "-N", "--", r.dest], 600, stdout=subprocess.DEVNULL, stderr=err,
                 stdin=subprocess.DEVNULL if batch else None)
        err.seek(0)
        said = err.read().decode("utf-8", "replace")
    if p.returncode != 0:
        raise explain(r, said, batch)
    return True


def logout(env: Mapping[str, str], r: Remote) -> bool:
    """End the master connection; False if none was up."""
    p = _ssh(env, [*base_argv(env, True), "-O", "exit", "--", r.dest], 30, stdin=subprocess.DEVNULL,
             capture_output=True)
    return p.returncode == 0


def explain(r: Remote, said: str, batch: bool) -> RemoteFailed:
    """ssh's failure (its stderr) as one line that says what to do."""
    lines = [ln.strip() for ln in said.splitlines() if ln.strip() and not set(ln.strip()) <= set("@")]
    last = visible(lines[-1][:200]) if lines else "no message"
    who = f"remote {r.name} ({visible(r.dest)})"
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in said:
        return RemoteFailed(f"{who}: its host key has CHANGED since your ssh last saw it (a reinstalled host, or "
                            "someone in between): check with the site, then update ~/.ssh/known_hosts (ssh-keygen -R)")
    if "Host key verification failed" in said or "No ED25519 host key is known" in said \
            or "host key is known" in said:
        return RemoteFailed(f"{who}: its host key is not known to your ssh yet: run `jobenv remote login {r.name}` "
                            "in a terminal (or ssh there once) to check and accept it")
    if "Permission denied" in said:
        methods = said.rsplit("Permission denied", 1)[1].split(")")[0]
        if batch and ("keyboard-interactive" in methods or "password" in methods):
            return RemoteFailed(f"{who} needs a login first (a password or MFA prompt, and no terminal here): "
                                f"run `jobenv remote login {r.name}` in a terminal")
        return RemoteFailed(f"{who} refused the login (Permission denied{visible(methods)})): is your key loaded (ssh-add) and in "
                            "~/.ssh/authorized_keys there?")
    for why in ("Connection refused", "Could not resolve hostname", "No route to host", "timed out",
                "Network is unreachable", "Connection closed", "Connection reset"):
        if why in said:
            return RemoteFailed(f"cannot reach {who}: {last}")
    return RemoteFailed(f"ssh to {who} failed: {last}")


def command_line(r: Remote, verb: str, payload: Dict[str, Any]) -> str:
    """`JOBENV remote VERB HEX`: bare words only (module docstring)."""
    data = json.dumps(payload, ensure_ascii=True).encode("ascii")
    return f"{r.jobenv} remote {verb} {data.hex()}"


def decode(hexed: str) -> Dict[str, Any]:
    """The payload of command_line (the remote side)."""
    try:
        data = json.loads(bytes.fromhex(hexed).decode("ascii"))
    except ValueError:
        raise RemoteFailed("remote: the call is not one a jobenv wrote (bad hex or JSON)") from None
    if not isinstance(data, dict):
        raise RemoteFailed("remote: the call is not one a jobenv wrote")
    return data


class _Stderr:
    """The remote stderr: held until MARKER (what came before is ssh's), then passed on as it comes."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.pipe, self.before, self.started = pipe, b"", False
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        out = sys.stderr.buffer if sys.stderr is not None else None
        while True:
            chunk = os.read(self.pipe.fileno(), 65536)
            if not chunk:
                return
            if not self.started:
                self.before += chunk
                if MARKER not in self.before:
                    continue
                self.started = True
                head, chunk = self.before.split(MARKER, 1)
                self.before = head
                chunk = head + chunk
            if out is not None and chunk:
                out.write(chunk)
                out.flush()


def call(env: Mapping[str, str], r: Remote, verb: str, payload: Dict[str, Any],
         feed: Optional[Callable[[IO[bytes]], None]] = None, keep: Optional[bytearray] = None) -> int:
    """Run `remote VERB` there through the master: its stdout straight to ours, its stderr
    after MARKER, its exit code back.  Our stdin to it stays open until it ends (the remote
    side ends its command when that stdin closes: ^C or kill here), or `feed` writes it.
    `keep`: its stdout goes there instead."""
    batch = is_batch()
    connect(env, r, batch)
    argv = [*base_argv(env, batch), "-o", "ControlMaster=no", "--", r.dest, command_line(r, verb, payload)]
    sys.stdout.flush()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdout=None if keep is None else subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    err = _Stderr(proc.stderr)
    try:
        if keep is not None and proc.stdout is not None:
            keep += proc.stdout.read()
        if feed is not None:
            try:
                feed(proc.stdin)
            finally:
                proc.stdin.close()
        rc = proc.wait()
    finally:
        if proc.poll() is None:  # ^C here: ssh had it too; closing its stdin ends the remote side
            proc.stdin.close()
            proc.wait()
    err.thread.join()
    if err.started:
        if rc == SSH_LOST:
            raise RemoteFailed(f"remote {r.name} ({visible(r.dest)}): the connection was lost")
        return rc
    said = err.before.decode("utf-8", "replace")
    tail = (said.strip().splitlines() or [""])[-1][:160]
    if rc == SSH_LOST:
        raise explain(r, said, batch)
    if rc in (126, 127):
        raise RemoteFailed(f"remote {r.name}: no jobenv at {visible(r.jobenv)} there ({visible(tail) or f'exit {rc}'}); "
                           f"install it, or give its path: `jobenv remote add {r.name} {visible(r.dest)} --jobenv PATH`")
    raise RemoteFailed(f"remote {r.name}: the jobenv at {visible(r.jobenv)} cannot take --remote calls (exit {rc}: "
                       f"{visible(tail)}); install this version ({_version()}) there")


def _version() -> str:
    from jobenv import __version__

    return __version__
