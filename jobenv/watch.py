"""`jobenv watch`: a small detached daemon per job that keeps the record's status true.

Every `interval` seconds it refreshes `status.heartbeat`; it marks the record ended and
exits when the scheduler says the job ended, when the scheduler's nodefile vanishes
(PBS and Cobalt delete it at job end), or when it receives SIGTERM/SIGHUP (what the
scheduler sends a job's processes at its end).  `jobenv get` on a node without
`squeue`/`qstat` judges liveness from the heartbeat: older than three intervals = ended.
"""
from __future__ import annotations

import os
import signal
import time

from . import store
from .errors import BadRecord, JobenvError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional

    from .record import JobRecord


def pid_path(json_path: str) -> str:
    return json_path[: -len(".json")] + ".pid"


def running(json_path: str) -> Optional[int]:
    """The pid of this job's live watcher, if any (a stale pid file does not count)."""
    try:
        with open(pid_path(json_path)) as f:
            pid = int(f.read().split()[0])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"jobenv" not in f.read():
                return None  # the pid was reused by something else
        return pid
    except (OSError, ValueError, IndexError):
        return None


def _ended(rec: JobRecord, host: str, env: Mapping[str, str]):
    """(True, reason) when the job is over, from the scheduler or the vanished nodefile.

    The nodefile exists only on the node where the job's first shell ran (the one that
    saved the record): a watcher elsewhere must not read its absence as the job's end.
    """
    from . import schedulers
    from .hostlist import host_index

    nodefile = rec.status.get("nodefile")
    if nodefile and host_index([rec.created_on], host) is not None and not os.path.exists(nodefile):
        return True, f"the scheduler's nodefile {nodefile} is gone"
    state = schedulers.job_state(rec.scheduler, rec.jobid, env)
    if state and state[0] == "ended":
        return True, state[1]
    return False, ""


def run(json_path: str, interval: float, env: Mapping[str, str]) -> int:
    """The watcher's loop (foreground).  Returns when the job ends or the record goes."""
    got = {}

    def on_signal(signum, frame):
        got["signal"] = signal.Signals(signum).name

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    from .hostlist import this_host

    host = this_host(env)
    try:
        with open(pid_path(json_path), "w") as f:
            f.write(f"{os.getpid()} {host}\n")
        while True:
            try:
                rec = store.load(json_path)
            except BadRecord:
                return 0  # removed (jobenv rm/clean) or replaced by garbage: nothing to watch
            if "signal" in got:
                store.update_status(json_path, {"state": "ended", "ended_at": time.time(),
                                                "reason": f"jobenv watch got {got['signal']} (job end)"}, env)
                return 0
            over, why = _ended(rec, host, env)
            if over:
                store.update_status(json_path, {"state": "ended", "ended_at": time.time(), "reason": why}, env)
                return 0
            store.update_status(json_path, {"state": "live", "heartbeat": time.time(), "interval": interval,
                                            "reason": f"heartbeat from jobenv watch on {host}",
                                            "watcher": {"host": host, "pid": os.getpid()}}, env)
            deadline = time.time() + interval
            while "signal" not in got and time.time() < deadline:
                time.sleep(min(0.2, interval))
    finally:
        try:
            if running(json_path) == os.getpid():
                os.unlink(pid_path(json_path))
        except OSError:
            pass


def start(json_path: str, interval: float, env: Mapping[str, str]) -> Optional[int]:
    """Start a detached watcher for the job; None when one is already running (no-op)."""
    if interval <= 0:
        raise JobenvError("--interval must be more than 0 seconds")
    if running(json_path):
        return None
    r, w = os.pipe()
    pid = os.fork()
    if pid:  # parent: learn the daemon's pid from the pipe, then return
        os.close(w)
        os.waitpid(pid, 0)
        data = os.read(r, 32)
        os.close(r)
        return int(data or b"0")
    os.close(r)  # first child: new session, fork again so the daemon has no controlling tty
    os.setsid()
    if os.fork():
        os._exit(0)
    os.write(w, str(os.getpid()).encode())
    os.close(w)
    devnull = os.open(os.devnull, os.O_RDWR)
    log = os.open(json_path[: -len(".json")] + ".watch.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = 1
    try:
        code = run(json_path, interval, env)
    except BaseException as exc:  # a daemon has nobody to show a traceback to: log one line
        os.write(2, f"jobenv watch: {type(exc).__name__}: {exc}\n".encode())
    finally:
        os._exit(code)
