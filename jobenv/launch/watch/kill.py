"""`jobenv kill [-j JOB] [--run RUN]`: end one launch's ranks on every host, from any shell,
and say what was ended.

A launch's ranks live on many hosts, and only some of the ways to reach them work from
a given shell, so all that apply are used: the host agents' `kill` request (every host,
when the run has agents: the run directory's `request`), the step's cancel by name under
srun or flux run (every attempt's step is `jobenv-<run directory>`; the launcher family's
`cancel`), SIGTERM to `jobenv launch` itself when its `supervisor` file names this host
(it ends its launcher's group and what left it), and this host's processes marked with the
run directory.  What ended is read back from the ranks' records.
"""
from __future__ import annotations

import os
import signal
import time

from jobenv.launch.watch import current

from jobenv.launch import ranks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional, Tuple

WAIT_S = 30.0  # how long kill waits for the ranks' records to say they ended
TERM_S = 5.0  # then the step is cancelled outright (SIGKILL), as the host agents do


def started_before(pid: int, epoch: float) -> bool:
    """Is `pid` our process and older than `epoch`?  A pid reused since the supervisor wrote
    its file started after it, so it is never signalled."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
        with open(f"/proc/{pid}/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as f:
            boot = next(int(ln.split()[1]) for ln in f if ln.startswith(b"btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return boot + ticks / os.sysconf("SC_CLK_TCK") <= epoch + 1.0


def running(run_dir: str, host: str) -> Dict[int, Optional[str]]:
    """Rank -> host of every rank that started and has no end in the ledgers, less those of
    this host whose wrapper is gone (a wrapper killed outright writes no end; elsewhere its
    host agent's `lost` says so)."""
    state = ranks.read(run_dir)
    out = {}
    for r in state.ranks.values():
        if r.started is None or r.how is not None:
            continue
        pid = r.wrapper_pid
        if r.host == host and pid and r.started and not started_before(pid, r.started):
            continue
        out[r.rank] = r.host
    return out


def report(before: Dict[int, Optional[str]], after: Dict[int, Optional[str]]) -> Tuple[List[str], int]:
    """The lines kill prints and its exit code: 0 when nothing it found running is left."""
    from jobenv.core.errors import visible

    ended = sorted(set(before) - set(after))
    lines = []
    if ended:  # host names come from the ledgers' file names: escaped for the terminal
        hosts = sorted({visible(before[r] or "?") for r in ended})
        lines.append(f"ended {len(ended)} rank(s) ({ranks.compact([str(r) for r in ended])}) on "
                     f"{len(hosts)} host(s): {ranks.compact(hosts)}")
    if after:
        left = [f"rank {r} on {visible(h or '?')}" for r, h in sorted(after.items())]
        lines.append(f"still running after {WAIT_S:.0f} s: {ranks.compact(left)}")
    if not before:
        lines.append("no rank of this run was running")
    return lines, 1 if after else 0


def kill(run_dir: str, cancel: str, env: Mapping[str, str], host: str, say: Callable[[str], None],
         wait_s: float = WAIT_S) -> int:
    """End the run's ranks every way that applies here; the exit code of `report`."""
    from jobenv.launch.watch import reaper
    from jobenv.launch.watch.requests import has_agent
    from jobenv.launch.watch.supervise import cancel_step

    before = running(run_dir, host)
    # the launch first (written by ranks.make_run_dir at each attempt's start): told before any rank
    # ends, it records the kill as its user's signal (interrupted), never as ranks failing of SIGTERM
    sup = current.supervisor(run_dir)
    if sup and sup[0] == host and started_before(sup[1], sup[2]):
        try:
            os.kill(sup[1], signal.SIGTERM)
        except OSError:
            pass
    if has_agent(run_dir):
        from jobenv.launch.watch import requests

        requests.send(run_dir, "kill")
    step = f"jobenv-{os.path.basename(run_dir)}"
    if cancel:  # SIGTERM first: the wrappers pass it on and record the end (a bare cancel is SIGKILL)
        cancel_step(cancel, env, step, "TERM")
    if not cancel:  # the step's cancel reaches every host; else this host's marked processes
        reaper.signal_marked(reaper.marker(run_dir), signal.SIGTERM)
    start = time.monotonic()
    after, hard = before, not cancel
    while after and time.monotonic() < start + wait_s:
        time.sleep(0.2)
        after = {r: h for r, h in running(run_dir, host).items() if r in before}
        if not hard and time.monotonic() > start + TERM_S:
            cancel_step(cancel, env, step)  # what outlived SIGTERM
            hard = True
    lines, code = report(before, after)
    for line in lines:
        say(line)
    return code
