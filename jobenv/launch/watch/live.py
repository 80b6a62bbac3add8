"""Naming a failure the moment the ledgers show it, while the launch runs.

The supervisor polls the run directory every POLL_S with jobenv.rank.ledger.Ledgers.step:
the ledgers of the hosts whose agents left news (`news/<H>`) are read, and the beats of
STEP_HOSTS hosts in turn are stat'ed, so a quiet poll costs the same at 10 hosts as at
10,000 (a look at every host every second was 20,000 stats a second at 10,000 hosts), and
- the first rank that ends with a failure (non-zero exit, signal, or the agent's `lost`)
  is named at once on one line ("rank 3 on node2 failed: signal 9 (SIGKILL)") while other
  ranks still run (its keeper's `end` wakes its host's agent, which leaves news at once, so
  within a poll or two); when none runs any more (a missing script: every rank failed at once)
  the launch is ending anyway and its failure summary (jobenv.launch.verdict.summary) names it, once;
- a host whose beat has not moved for LOST_S while ranks there have no end is named lost
  ("host node2 lost: ranks 2,3 stopped reporting at 12:00:01"): every process there was
  killed, or the host died.  The beat's age is measured on this host's clock, from when
  the supervisor last saw its mtime change (no clock of two hosts is compared); each host's
  beat is looked at every ceil(hosts / STEP_HOSTS) polls, so a lost host is named within
  LOST_S + ceil(hosts / STEP_HOSTS) * POLL_S: 11 s up to 100 hosts, 20 s at 1,000, 110 s at
  10,000 (a dead host's agent leaves no news: only looking finds it).  Before naming it,
  its ledger is read once more: a host whose agent alone died but whose ranks all recorded
  their end is not lost;
and the supervisor then ends the launch after FAIL_GRACE_S if the launcher has not (srun
without --kill-on-bad-exit, mpiexec with a lost host, leave the other ranks waiting in a
collective for ever), as torchrun ends the other workers of a failed one.
After a failed end, `settle` waits (at most SETTLE_S) for the agents still beating to write the
`lost` of ranks their launcher killed outright, so the verdict tells a silent host from its peers.
"""
from __future__ import annotations

from jobenv.rank.ends import first_failure, words
from jobenv.launch import ranks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Set, Tuple

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
            msg = self._first(self.ledgers.step(), now)
            if msg:
                self.named, self.end_at = msg, now + FAIL_GRACE_S
                if _any_running(self.ledgers.state):
                    self.say(msg)
        return self.end_at is not None and now >= self.end_at

    def _first(self, looked: List[str], now: float) -> Optional[str]:
        """The first failure, when a line came since the last poll; else a lost host among those
        whose beats this poll `looked` at."""
        failure = self._failure()
        if failure:
            return failure
        state = self.ledgers.state
        for name in looked:
            beat, moved = self._beats.get(name, (None, now))
            if state.hosts[name].beat != beat:
                beat, moved = state.hosts[name].beat, now
            self._beats[name] = (beat, moved)
            if now - moved >= LOST_S and self._running(name):
                self.ledgers.reread(name)  # its ends may have come without news (its agent died)
                failure = self._failure()
                if failure:
                    return failure
                running = self._running(name)
                if running:
                    return ranks.host_lost(name, running, beat)
        return None

    def _failure(self) -> Optional[str]:
        if not self.ledgers.changed:  # nothing new: no failure the last look did not see
            return None
        self.ledgers.changed = False
        first = first_failure(self.ledgers.state)
        if first is not None:
            return f"rank {first.rank} on {first.host} failed: {words(first)}"
        return None

    def _running(self, name: str) -> List[int]:
        state = self.ledgers.state
        return sorted(n for n in state.hosts[name].ranks if state.ranks[n].started is not None
                      and state.ranks[n].how is None)


def _any_running(state: ranks.RunState) -> bool:
    """Some rank started and has no end yet."""
    return any(r.started is not None and r.how is None for r in state.ranks.values())


SETTLE_S = 2.5  # a host agent writes `lost` two beats (BEAT_S 1 s) after its rank's keeper vanished
DEAD_AFTER_S = 1.5  # a beat that has not moved for 1.5 beats: that host's agent is gone


def settle(run_dir: str, clock: Callable[[], float], sleep: Callable[[float], None]) -> ranks.RunState:
    """After a launcher ended with a failure: wait, at most SETTLE_S, for the word of the agents
    still alive about their ranks with no end.  A launcher that ends its ranks by SIGKILL to
    their process groups (Hydra after a failed or lost host) leaves keepers that write no `end`;
    their host's agent, outside the group, writes `lost` two beats later.  Read before that,
    every host's ranks look alike (no end), and which host was lost would be a guess between
    beats a few milliseconds apart.  A host whose beat moves is alive (its agent will write);
    one whose beat stays still for DEAD_AFTER_S is gone (nobody will): waiting ends when no live
    host has a rank without an end.  Returns the state last read: the attempt's verdict is built
    from it (jobenv.rank.verdict), so the ledgers are not read again."""
    start = clock()
    first: Dict[str, Optional[float]] = {}
    alive: Set[str] = set()
    while True:
        state = ranks.read(run_dir)
        waiting = {r.host for r in state.ranks.values() if r.started is not None and r.how is None and r.host}
        for host in waiting:
            beat = state.hosts[host].beat if host in state.hosts else None
            if first.setdefault(host, beat) != beat:
                alive.add(host)
        took = clock() - start
        if not waiting or took >= SETTLE_S or (took >= DEAD_AFTER_S and not waiting & alive):
            return state
        sleep(0.25)
