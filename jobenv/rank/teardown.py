"""The exit-code policy for an attempt whose programs all finished, then died in interpreter teardown.

The ranks' Python hook (jobenv/rankhook) records `clean` at the program's last atexit callback,
and only when its main finished without an unhandled exception or a non-zero sys.exit.  A rank
that is clean and then ends by a signal (torch 2.13's gloo teardown abort, SIGABRT; or the
launcher killing the others after it) or is lost, did all its work: when every rank of the
attempt is like that or exited 0, `jobenv launch` exits 0 and names those ranks as warnings.
Any rank without `clean` (a program that failed, used os._exit, or ran without the hook), or
ending with a non-zero exit code, keeps the launcher's failure: the policy never hides a failure
the program itself reported.  `clean` counts only from the process that ended: the Python whose
`hook` line names the pid the rank keeper started (`python3 prep.py && exec ./solver` whose solver
dies of SIGSEGV has a clean prep.py, a different process: a failure).
"""
from __future__ import annotations

from .ends import words

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional

    from .ledger import RankState, RunState


def _after_clean(r: RankState) -> bool:
    """Ended after its program finished cleanly: the Python that wrote `clean` is the process the
    keeper saw end, by a signal, or with no end recorded (the launcher ended its keeper after
    another rank's abort)."""
    return r.clean and r.clean_pid is not None and r.clean_pid == r.pid and \
        r.how in (None, "signal", "lost", "vanished")


def excused(state: RunState, nranks: int) -> Optional[List[RankState]]:
    """The ranks that died after finishing cleanly, when every rank that did not exit 0 is one of
    them (some are); None otherwise."""
    rows = [state.ranks.get(r) for r in range(nranks)]
    if not rows or any(r is None or not r.clean for r in rows):
        return None
    late = [r for r in rows if r is not None and not (r.how == "exit" and r.code == 0)]
    if not late or not all(_after_clean(r) for r in late):
        return None
    return late


def warning(r: RankState) -> str:
    """The line that names an excused rank."""
    return (f"warning: rank {r.rank} on {r.host or '?'} finished (atexit ran), then ended during interpreter "
            f"teardown: {words(r)}; counted as a success (docs/hangs.md: teardown aborts)")
