"""Run one launch attempt under supervision: pass output through, watch the clocks, kill.

The launcher runs in its own session (so it is one process group we can kill whole, and
a terminal's job control cannot stop it); SIGINT, SIGTERM and SIGHUP sent to `jobenv
launch` (Ctrl-C, `timeout`, a closing terminal) are forwarded to it.  On --timeout or
--idle-timeout the group gets SIGTERM, then SIGKILL after a grace period; under srun the
step is also cancelled with scancel, since tasks on other nodes are not in our group.

Output is copied byte for byte (a rank may print anything, UTF-8 or not); the last lines
are kept for the failure summary when the ranks left no logs.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections import deque
TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Callable, Deque, Dict, List, Mapping, Optional

GRACE_S = 5.0
TIMEOUT_EXIT = 124  # as timeout(1)


class Limits:
    def __init__(self, timeout: Optional[float] = None, idle_timeout: Optional[float] = None) -> None:
        self.timeout, self.idle_timeout = timeout, idle_timeout


class Outcome:
    def __init__(self, returncode: int, expired: Optional[str] = None, signalled: Optional[int] = None,
                 last_lines: Optional[List[bytes]] = None, seconds: float = 0.0) -> None:
        self.returncode = returncode
        self.expired = expired  # "timeout" | "idle-timeout"
        self.signalled = signalled  # a signal we forwarded (Ctrl-C, timeout(1))
        self.last_lines = last_lines or []
        self.seconds = seconds


def _newest_mtime(log_dir: Optional[str]) -> float:
    """When any rank last wrote to its log (ranks may log there instead of the pipe)."""
    newest = 0.0
    if not log_dir:
        return newest
    try:
        with os.scandir(log_dir) as it:
            for e in it:
                try:
                    newest = max(newest, e.stat().st_mtime)
                except OSError:
                    pass
    except OSError:
        pass
    return newest


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(argv: List[str], env: Mapping[str, str], limits: Limits, log_dir: Optional[str] = None,
        on_expire: Optional[Callable[[], None]] = None, before_kill: Optional[Callable[[], None]] = None,
        keep_lines: int = 20,
        stdout_fd: int = 1, stderr_fd: int = 2) -> Outcome:
    """Start argv, copy its output, enforce the limits; OSError if it cannot start."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    pgid = proc.pid
    forwarded: Dict[str, int] = {}

    def forward(signum, _frame):
        forwarded["sig"] = signum
        _kill_group(pgid, signum)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: keep ignoring SIGHUP
            old[sig] = signal.signal(sig, forward)
    last: Deque[bytes] = deque(maxlen=keep_lines)
    partial = {proc.stdout.fileno(): b"", proc.stderr.fileno(): b""}  # type: ignore[union-attr]
    out_for = {proc.stdout.fileno(): stdout_fd, proc.stderr.fileno(): stderr_fd}  # type: ignore[union-attr]
    sel = selectors.DefaultSelector()
    for fd in partial:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    last_output = start
    expired: Optional[str] = None
    kill_at: Optional[float] = None
    try:
        while partial:
            now = time.monotonic()
            wait = 1.0
            if limits.timeout is not None and expired is None:
                wait = min(wait, max(0.0, start + limits.timeout - now))
            for key, _ in sel.select(timeout=wait):
                fd = int(key.fd)
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not data:
                    sel.unregister(fd)
                    if partial[fd]:
                        last.append(partial[fd])
                    del partial[fd]
                    continue
                last_output = time.monotonic()
                _write_all(out_for[fd], data)
                lines = (partial[fd] + data).split(b"\n")
                partial[fd] = lines.pop()[-4096:]
                last.extend(lines[-keep_lines:])
            now = time.monotonic()
            if expired is None:
                if limits.timeout is not None and now - start >= limits.timeout:
                    expired = "timeout"
                elif limits.idle_timeout is not None and now - last_output >= limits.idle_timeout:
                    logged = _newest_mtime(log_dir)
                    if logged and time.time() - logged < limits.idle_timeout:
                        last_output = now - (time.time() - logged)
                    else:
                        expired = "idle-timeout"
                if expired:
                    if before_kill:  # what the ranks had done when time ran out, before we kill them
                        before_kill()
                    _kill_group(pgid, signal.SIGTERM)
                    if on_expire:
                        on_expire()
                    kill_at = now + GRACE_S
            if kill_at is not None and now >= kill_at:
                _kill_group(pgid, signal.SIGKILL)
                kill_at = None
    finally:
        sel.close()
        rc = proc.wait()
        if expired:
            _kill_group(pgid, signal.SIGKILL)  # stragglers that closed their output
        for sig, handler in old.items():
            signal.signal(sig, handler)
    code = TIMEOUT_EXIT if expired else (128 - rc if rc < 0 else rc)
    return Outcome(returncode=code, expired=expired, signalled=forwarded.get("sig"),
                   last_lines=list(last), seconds=time.monotonic() - start)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        except BrokenPipeError:
            return  # our reader went away (`| head`): keep supervising, drop output
        view = view[n:]


def scancel_step(env: Mapping[str, str], step_name: str) -> None:
    """Cancel the Slurm step(s) named `step_name` in this job (tasks on other nodes)."""
    jobid = env.get("SLURM_JOB_ID")
    if not jobid:
        return
    try:
        out = subprocess.run(["squeue", "-h", "-s", "-j", jobid, "-o", "%i %j"], env=dict(env),
                             capture_output=True, text=True, timeout=20).stdout
        for line in out.splitlines():
            step, _, name = line.partition(" ")
            if name.strip() == step_name:
                subprocess.run(["scancel", step], env=dict(env), capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        pass
