"""Nothing a launch started outlives it here, whatever ends `jobenv launch`.

Three pieces, for three ways the supervisor can go:
- `parent_death_signal()`: the launcher gets SIGTERM the moment the supervisor dies, of
  anything, SIGKILL included (Linux PR_SET_PDEATHSIG, set in the child between fork and
  exec).  SIGTERM, not SIGKILL: the launcher's contract is to end its ranks on every host
  (mpiexec, mpirun and srun all do on SIGTERM), which nothing local can do for it.
- `Watchdog`: a forked process in a session of its own (so Ctrl-\\ at the terminal,
  `timeout -s KILL` on our group or the OOM killer taking us do not take it too) that
  blocks reading a pipe only the supervisor writes.  End of file without the supervisor's
  "done" means the supervisor died: it ends the launcher's group and every marked
  process, SIGTERM then SIGKILL after GRACE_S, and cancels the Slurm step when told how.
- `signal_marked()`: every process of this user on this host whose environment carries
  the launch's marker (`JOBENV_RUN_DIR=<this attempt's run directory>`, which the
  launcher, its proxies, the wrappers and the programs inherit).  It finds what left the
  launcher's process group: Open MPI's ranks (each in a group of its own), a daemon a rank
  started with `setsid`.  A process that cleared its environment, or runs on another
  host, is the launcher's (or the scheduler's) to end.  Never the run's host agents (each
  names itself, pid and start time, in the run directory's `agent-<H>`): an agent ends by
  itself with its host's last rank keeper, and it is the one that writes `lost` for a keeper
  the launcher kills outright, as Hydra does to the ranks left after one failed; reaped
  first, those ranks would have no end at all.
"""
from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Optional, Set

GRACE_S = 3.0
_PR_SET_PDEATHSIG = 1
_DONE = b"done"


_MARK = b"JOBENV_RUN_DIR="


def marker(run_dir: str) -> bytes:
    """What marks the launch's processes (nothing without a run directory)."""
    return _MARK + os.fsencode(run_dir) if run_dir else b""


def _has_mark(name: str, needle: bytes, uid: int) -> bool:
    """Whether /proc/<name> is this user's process with `needle` in its environment."""
    try:
        if os.stat(f"/proc/{name}").st_uid != uid:
            return False
        with open(f"/proc/{name}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return needle in b"\0" + env + b"\0"


def agents(mark: bytes) -> Set[int]:
    """The pids of the marked run's host agents (each named by its `agent-<H>` lock, read by
    the keeper's one reader of it)."""
    from jobenv.rank.keeper import agent_pid

    run_dir = mark[len(_MARK):]
    try:
        names = [n for n in os.listdir(run_dir) if n.startswith(b"agent-")]
    except OSError:
        return set()
    return {pid for pid in (agent_pid(os.fsdecode(os.path.join(run_dir, n))) for n in names) if pid}


def marked(mark: bytes) -> List[int]:
    """Pids of this user's processes (not us, not the run's host agents) whose environment
    holds `mark` exactly."""
    me, uid = os.getpid(), os.getuid()
    if not mark:
        return []
    needle = b"\0" + mark + b"\0"
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = [int(n) for n in names if n.isdigit() and int(n) != me and _has_mark(n, needle, uid)]
    spare = agents(mark) if found else set()
    return [p for p in found if p not in spare]


def signal_marked(mark: bytes, sig: int) -> int:
    """Send `sig` to every marked process; how many there were.  A pid found by the scan
    may have ended and been reused since: each is pinned with a pidfd (Linux 5.3, Python
    3.9), checked again, and signalled through the pidfd, never by a number that could
    now name another process of the user's."""
    pids = marked(mark)
    needle, uid = b"\0" + mark + b"\0", os.getuid()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except AttributeError:  # older Python: by pid, as the scan found it
            fd = -1
        except OSError:  # gone (ESRCH), or no pidfds in this kernel (ENOSYS)
            fd = -1
            if not _has_mark(str(pid), needle, uid):
                continue
        try:
            if fd < 0:
                os.kill(pid, sig)
            elif _has_mark(str(pid), needle, uid):
                signal.pidfd_send_signal(fd, sig)
        except OSError:
            pass
        finally:
            if fd >= 0:
                os.close(fd)
    return len(pids)


def kill_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def end_launch(pgid: int, mark: bytes, cancel: Optional[Callable[[], None]] = None, grace: float = GRACE_S) -> None:
    """SIGTERM to the group and the marked processes, the step cancelled, SIGKILL to what
    is left after `grace` seconds."""
    kill_group(pgid, signal.SIGTERM)
    signal_marked(mark, signal.SIGTERM)
    if cancel is not None:
        cancel()
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        time.sleep(0.1)
        alive = kill_group(pgid, 0)
        if not alive and not marked(mark):
            return
    kill_group(pgid, signal.SIGKILL)
    signal_marked(mark, signal.SIGKILL)


def parent_death_signal() -> Optional[Callable[[], None]]:
    """A preexec_fn giving the child SIGTERM when we die (None off Linux or without libc).
    The libc function is looked up here, before the fork: the child only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # we died before it was armed
            os.kill(os.getpid(), signal.SIGTERM)
    return arm


class Watchdog:
    """The process that ends the launch if the supervisor dies (see the module docstring)."""

    def __init__(self, pgid: int, mark: bytes, cancel: Optional[Callable[[], None]] = None) -> None:
        r, self.w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover (runs in the forked child)
            try:
                self._watch(r, pgid, mark, cancel)
            finally:
                os._exit(0)
        os.close(r)

    def _watch(self, r: int, pgid: int, mark: bytes, cancel: Optional[Callable[[], None]]) -> None:
        os.setsid()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # not the supervisor's forwarding
            signal.signal(sig, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # never hold the supervisor's output open (`| tee` would wait)
            os.dup2(null, fd)
        try:  # nor the launcher's pipes (listed: SC_OPEN_MAX can be 2**30 in a container)
            fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
        except OSError:
            fds = list(range(3, 1024))
        for fd in fds:
            if fd > 2 and fd != r:
                try:
                    os.close(fd)
                except OSError:
                    pass
        data = b""
        while True:
            chunk = os.read(r, 64)
            if not chunk:
                break
            data += chunk
        if _DONE not in data:
            end_launch(pgid, mark, cancel)

    def done(self) -> None:
        """The supervisor has ended the launch itself: the watchdog leaves quietly."""
        try:
            os.write(self.w, _DONE)
        except OSError:
            pass
        os.close(self.w)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
