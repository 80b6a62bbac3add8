"""Which attempt of a job's launches is running now: the run directory that `jobenv stacks`
(and any other command acting on a live launch from another shell) talks to.

Each attempt has a directory `<runs>/<stamp>-<pid>-a<N>/` whose `supervisor` file names the
`jobenv launch` that runs it: `<host> <pid> <epoch>`.  The attempt is live when that
process still exists (on this host), or, seen from another host, when a host agent's
heartbeat (`host-<H>.beat`) is fresh.  The newest live attempt wins.
"""
from __future__ import annotations

import os
import re
import time

from jobenv.core.errors import JobenvError
from jobenv.core.pids import pid_alive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Tuple

BEAT_FRESH_S = 10.0  # a heartbeat older than this is a dead host agent (it beats every second)
_ATTEMPT = re.compile(r"^\d{8}-\d{6}-\d+-a\d+$")


def supervisor(run_dir: str) -> Optional[Tuple[str, int, float]]:
    """(host, pid, epoch) from the run directory's `supervisor` file, or None."""
    from jobenv.core.readfile import read_bytes

    try:
        words = read_bytes(os.path.join(run_dir, "supervisor"), 4096).decode("utf-8", "replace").split()
        return words[0], int(words[1]), float(words[2])
    except (OSError, IndexError, ValueError):
        return None


def _same_host(a: str, b: str) -> bool:
    return a == b or a.split(".")[0] == b.split(".")[0]


def _beat_fresh(run_dir: str, now: float) -> bool:
    try:
        names = [n for n in os.listdir(run_dir) if n.startswith("host-") and n.endswith(".beat")]
    except OSError:
        return False
    for name in names:
        try:
            if now - os.lstat(os.path.join(run_dir, name)).st_mtime < BEAT_FRESH_S:
                return True
        except OSError:
            pass
    return False


def alive(run_dir: str, here: str, now: Optional[float] = None) -> bool:
    """Whether the attempt in `run_dir` is running, seen from host `here`."""
    sup = supervisor(run_dir)
    if sup is None:
        return False
    host, pid, _ = sup
    if _same_host(host, here):
        return pid_alive(pid, mine=True)  # a pid reused by another user's process: not our launch
    return _beat_fresh(run_dir, time.time() if now is None else now)


def attempts(runs: str) -> List[str]:
    """The attempts' directories under `runs`, newest first (by start, then attempt number)."""
    try:
        names = [n for n in os.listdir(runs) if _ATTEMPT.match(n)]
    except OSError:
        return []

    def key(name: str) -> Tuple[float, str, int]:
        sup = supervisor(os.path.join(runs, name))
        return (sup[2] if sup else 0.0, name[:15], int(name.rpartition("-a")[2]))
    return [os.path.join(runs, n) for n in sorted(names, key=key, reverse=True)]


def find(runs: str, run: Optional[str], env: Mapping[str, str], what: str) -> str:
    """The run directory to act on: `run` (a path, or an attempt's name under `runs`), else
    the newest live attempt; JobenvError naming `what` when there is none.  Whichever it
    is, it must be a directory of the user's own by the rule every run directory is made
    by (jobenv.store.paths.own_dir): its `supervisor` names a process to signal and it
    receives requests, so one that another user made or could change (a path handed
    around in /tmp) is refused for every command that acts on a launch (kill, stacks)."""
    from jobenv.store.paths import own_dir

    path = _named(runs, run) if run else _newest_live(runs, env, what)
    own_dir(path, "run directory", f"name a run directory of your own (attempts are under {runs})")
    return path


def _named(runs: str, run: str) -> str:
    """`run` as an attempt jobenv made: a directory named as make_run_dir names them, right under
    the job's runs directory.  Any other directory of the user's (kill and stacks write a
    `request` and `stacks/` into it) is refused."""
    from jobenv.core.errors import BadInput, visible

    path = os.path.abspath(run if "/" in run else os.path.join(runs, run))
    if run in (".", "..") or not (os.path.isdir(path) or os.path.islink(path)):  # a link: own_dir says why not
        raise BadInput(f"--run {visible(run)!r}: no such run directory (attempts are under {runs})")
    if not _ATTEMPT.match(os.path.basename(path)) or \
            os.path.realpath(os.path.dirname(path)) != os.path.realpath(runs):
        raise BadInput(f"--run {visible(run)!r}: not a launch attempt of this job (attempts are under {runs})")
    return path


def _newest_live(runs: str, env: Mapping[str, str], what: str) -> str:
    from jobenv.core.hostlist import this_host

    here = this_host(env)
    for path in attempts(runs):
        if alive(path, here):
            return path
    raise JobenvError(f"no running launch of {what} (no live attempt under {runs}); "
                      "pass --run to name one")
