"""`jobenv watch`: one small detached daemon per job that keeps the record's status true.

Every `interval` seconds it refreshes `status.heartbeat`.  It marks the record ended only
on evidence of the job's end: the scheduler says so, or the scheduler's nodefile vanished
(PBS and Cobalt delete it at job end; checked only on the node that saved it).  Being
stopped (SIGTERM, SIGHUP, Ctrl-C) is not such evidence: the watcher then asks the
scheduler once more and, without an answer, leaves the job's state unknown.  A watcher
that is killed or stopped outright simply goes silent, which readers (jobenv.store.liveness)
also take as unknown.

One daemon per job: each watcher holds an exclusive flock on `<key>.watch.lock` for its
whole life, so of any number of concurrent starts exactly one runs; a pid file is only
a label for people.  `start` returns only after the daemon holds the lock and has written
its first heartbeat, so a store it cannot write is an error, not a pid that dies.
"""
from __future__ import annotations

import os
import signal
import time

from jobenv.store import files as store
from jobenv.core import atomic
from jobenv.core.errors import BadInput, BadRecord, JobenvError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional, Tuple

    from jobenv.store.record import JobRecord

MIN_INTERVAL, MAX_INTERVAL = 0.1, 86400.0


def check_interval(interval: float) -> float:
    """A finite number of seconds in [0.1, 86400] (NaN and inf would spin or never beat)."""
    if not (isinstance(interval, (int, float)) and MIN_INTERVAL <= interval <= MAX_INTERVAL):
        raise BadInput(f"--interval must be a number of seconds from {MIN_INTERVAL:g} to {MAX_INTERVAL:g}, "
                       f"not {interval!r}")
    return float(interval)


def pid_path(json_path: str) -> str:
    return json_path[: -len(".json")] + ".pid"


def lock_path(json_path: str) -> str:
    return json_path[: -len(".json")] + ".watch.lock"


def running(json_path: str) -> Optional[int]:
    """The pid of this job's live watcher (on this host), or None.  Judged by the lock,
    never by a pid file that may be stale or name a reused pid."""
    import fcntl

    try:
        fd = os.open(lock_path(json_path), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        try:
            with open(pid_path(json_path)) as f:
                first = f.read(64).split()[0]
            return int(first) if first.isascii() and first.isdigit() else -1
        except (OSError, IndexError):
            return -1  # held, pid file not written yet
    finally:
        os.close(fd)
    return None


def _take_lock(json_path: str) -> Optional[int]:
    """The watcher lock's fd, or None when another watcher holds it."""
    return atomic.flock_current(lock_path(json_path))


def _ended(rec: JobRecord, host: str, env: Mapping[str, str], timeout: float = 10.0) -> Tuple[bool, str]:
    """(True, reason) on evidence of the job's end: the scheduler, or its vanished nodefile.

    The nodefile exists only on the node where the job's first shell ran (the one that
    saved the record): a watcher elsewhere must not read its absence as the job's end.
    """
    from jobenv import schedulers
    from jobenv.core.hostlist import host_index
    from jobenv.store.liveness import query_env

    nodefile = rec.status.get("nodefile")
    if nodefile and host_index([rec.created_on], host) is not None and not os.path.exists(nodefile):
        return True, f"the scheduler's nodefile {nodefile} is gone"
    state = schedulers.query_states(rec.scheduler, [rec.jobid], query_env(rec, env), timeout).get(rec.jobid)
    if state and state[0] == "ended":
        return True, state[1]
    return False, ""


def _stopped(json_path: str, rec: JobRecord, host: str, signame: str, env: Mapping[str, str]) -> None:
    over, why = _ended(rec, host, env)
    if over:
        store.update_status(json_path, {"state": "ended", "ended_at": time.time(), "reason": why}, env)
    else:
        store.update_status(json_path, {"state": "unknown", "reason": f"jobenv watch on {host} stopped "
                                        f"({signame}); the job may still run"}, env,
                            drop=("heartbeat", "interval", "watcher"))


def run(json_path: str, interval: float, env: Mapping[str, str], ready_fd: Optional[int] = None) -> int:
    """The watcher (foreground).  Returns when the job ends, the record goes, or a signal
    stops it.  `ready_fd` gets "OK <pid>", "BUSY" or "ERR <message>" once known."""
    interval = check_interval(interval)
    got = {}

    def on_signal(signum: int, frame: object) -> None:
        got["signal"] = signal.Signals(signum).name

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)
    from jobenv.core.hostlist import this_host

    host = this_host(env)
    lock = _take_lock(json_path)
    if lock is None:
        if ready_fd is not None:
            os.write(ready_fd, b"BUSY")
            return 0
        raise JobenvError(f"another `jobenv watch` (pid {running(json_path)}) already watches this job")
    try:
        store.write_atomic(pid_path(json_path), f"{os.getpid()} {host}\n".encode())
        first = True
        while True:
            try:
                rec = store.load(json_path)
            except BadRecord:
                return 0  # removed (jobenv rm/clean) or replaced by garbage: nothing to watch
            if "signal" in got:
                _stopped(json_path, rec, host, got["signal"], env)
                return 0
            over, why = _ended(rec, host, env)
            if over:
                store.update_status(json_path, {"state": "ended", "ended_at": time.time(), "reason": why}, env)
                if ready_fd is not None:
                    os.write(ready_fd, f"ERR job {rec.jobid} has ended ({why})".encode("utf-8", "replace"))
                return 0
            store.update_status(json_path, {"state": "live", "heartbeat": time.time(), "interval": interval,
                                            "reason": f"heartbeat from jobenv watch on {host}",
                                            "watcher": {"host": host, "pid": os.getpid()}}, env)
            if first and ready_fd is not None:
                os.write(ready_fd, f"OK {os.getpid()}".encode())
                os.close(ready_fd)
                ready_fd = None
            first = False
            deadline = time.monotonic() + interval
            while "signal" not in got and time.monotonic() < deadline:
                time.sleep(min(0.2, interval))
    finally:
        for p in (pid_path(json_path), lock_path(json_path)):
            try:
                os.unlink(p)
            except OSError:
                pass
        os.close(lock)


def start(json_path: str, interval: float, env: Mapping[str, str], wait: float = 60.0) -> Optional[int]:
    """Start a detached watcher; its pid, or None when one already runs (no-op)."""
    interval = check_interval(interval)
    if running(json_path):
        return None
    r, w = os.pipe()
    pid = os.fork()
    if pid:  # parent: wait for the daemon's verdict
        os.close(w)
        os.waitpid(pid, 0)
        return _verdict(r, wait)
    os.close(r)  # first child: new session, fork again so the daemon has no controlling tty
    code = 1
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            log = os.open(json_path[: -len(".json")] + ".watch.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError:
            log = devnull
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        code = run(json_path, interval, env, ready_fd=w)
    except BaseException as exc:  # tell the parent; a daemon has nobody to show a traceback to
        if isinstance(exc, OSError):
            from jobenv.store.paths import write_error

            exc = write_error(exc, "the job's watcher files")
        msg = exc.message if isinstance(exc, JobenvError) else f"{type(exc).__name__}: {exc}"
        try:
            os.write(w, f"ERR {msg}".encode("utf-8", "replace")[:4000])
            os.write(2, f"jobenv watch: {msg}\n".encode("utf-8", "replace"))
        except OSError:
            pass
    finally:
        os._exit(code)


def _verdict(r: int, wait: float) -> Optional[int]:
    import select

    data = b""
    deadline = time.monotonic() + wait
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(r, 4096)
            if not chunk:
                break
            data += chunk
            if data.startswith((b"OK ", b"BUSY")):
                break
    finally:
        os.close(r)
    text = data.decode("utf-8", "replace")
    if text.startswith("OK "):
        return int(text.split()[1])
    if text.startswith("BUSY"):
        return None
    if text.startswith("ERR "):
        raise JobenvError(f"jobenv watch could not start: {text[4:]}")
    raise JobenvError("jobenv watch could not start (no word from the daemon)")
