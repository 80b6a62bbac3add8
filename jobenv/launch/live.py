"""Naming a failure the moment the ledgers show it, while the launch runs.

The supervisor polls the run directory's ledgers every POLL_S (a scan of the directory,
a stat per file, a read of what was appended: jobenv.launch.ranks.Ledgers) and
- the first rank that ends with a failure (non-zero exit, signal, or the agent's `lost`)
  is named at once on one line ("rank 3 on node2 failed: signal 9 (SIGKILL)") while other
  ranks still run; when none runs any more (a missing script: every rank failed at once) the
  launch is ending anyway and its failure summary (jobenv.launch.report) names it, once;
- a host whose beat has not moved for LOST_S while ranks there have no end is named lost
  ("host node2 lost: ranks 2,3 stopped reporting at 12:00:01"): every process there was
  killed, or the host died.  The beat's age is measured on this host's clock, from when
  the supervisor last saw its mtime change (no clock of two hosts is compared);
and the supervisor then ends the launch after FAIL_GRACE_S if the launcher has not (srun
without --kill-on-bad-exit, mpiexec with a lost host, leave the other ranks waiting in a
collective for ever), as torchrun ends the other workers of a failed one.
"""
from __future__ import annotations

from . import ranks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, Optional, Tuple

POLL_S = 1.0
LOST_S = 10.0
FAIL_GRACE_S = 3.0


class Live:
    """One attempt's live watch: `poll(now)` says whether to end the launch now."""

    def __init__(self, run_dir: str, say: Callable[[str], None]) -> None:
        self.ledgers = ranks.Ledgers(run_dir)
        self.say = say
        self.named: Optional[str] = None
        self.end_at: Optional[float] = None
        self._beats: Dict[str, Tuple[Optional[float], float]] = {}  # host -> (beat mtime, when it moved)
        self._next = 0.0

    def poll(self, now: float) -> bool:
        """Read the ledgers (at most every POLL_S, `now` monotonic); True once the grace after
        the first named failure has run out."""
        if now >= self._next and self.named is None:
            self._next = now + POLL_S
            state = self.ledgers.poll()
            msg = self._first(state, now)
            if msg:
                self.named, self.end_at = msg, now + FAIL_GRACE_S
                if _running(state):
                    self.say(msg)
        return self.end_at is not None and now >= self.end_at

    def _first(self, state: ranks.RunState, now: float) -> Optional[str]:
        first = ranks.first_failure(state)
        if first is not None:
            return f"rank {first.rank} on {first.host} failed: {ranks.describe_exit(first.exit or '')}"
        for name, host in state.hosts.items():
            beat, moved = self._beats.get(name, (None, now))
            if host.beat != beat:
                beat, moved = host.beat, now
            self._beats[name] = (beat, moved)
            running = sorted(n for n in host.ranks if state.ranks[n].started is not None
                             and state.ranks[n].exit is None)
            if running and now - moved >= LOST_S:
                return ranks.host_lost(name, running, beat)
        return None


def _running(state: ranks.RunState) -> bool:
    """Some rank started and has no end yet."""
    return any(r.started is not None and r.exit is None for r in state.ranks.values())
