"""How ranks ended, from their run's ledger state (jobenv.rank.ledger, which reads each end as
integers): the words for an end ("exit code 137 (128+9: SIGKILL?)"), the failure that came
first, the ranks only stopped after it, the ranks that vanished and the hosts lost with them.
Pure functions of a RunState: the launch's verdict (jobenv.rank.verdict) is built from them once,
and everything after it (the exit code, the summary, the failover, the history) reads that.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import List, Optional, Set, Tuple

    from .ledger import RankState, RunState

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}

_GONE = {"lost": "lost: its wrapper vanished without recording an end (killed with SIGKILL?)",
         "vanished": "vanished: neither it nor its host's agent recorded an end (killed with SIGKILL, or the "
                     "host lost)"}


def signal_words(sig: int) -> str:
    """'signal 11 (SIGSEGV)'."""
    return f"signal {sig}" + (f" ({SIGNALS[sig]})" if sig in SIGNALS else "")


def code_words(code: int) -> str:
    """'exit code 3', 'exit code 137 (128+9: SIGKILL?)' (a shell's or a launcher's code)."""
    if code > 128 and code - 128 in SIGNALS:
        return f"exit code {code} (128+{code - 128}: {SIGNALS[code - 128]}?)"
    return f"exit code {code}"


def describe(how: Optional[str], code: Optional[int] = None, sig: Optional[int] = None) -> str:
    """The words for an end: 'exit code 3', 'signal 11 (SIGSEGV)', the lost and vanished phrases."""
    if how == "exit" and code is not None:
        return code_words(code)
    if how == "signal" and sig is not None:
        return signal_words(sig)
    return _GONE.get(how or "", "no end recorded")


def words(r: RankState) -> str:
    """How rank `r` ended, in words."""
    return describe(r.how, r.code, r.signal)


def first_failure(state: RunState) -> Optional[RankState]:
    """The failure that came first.  A recorded one (an `end` or the agent's `lost`) goes
    before a vanished rank unless it came more than BEAT_S after that rank's last beat: the
    rank died after its last beat, but may have died only because of the recorded failure."""
    from .agent import BEAT_S

    def key(r: RankState) -> Tuple[float, int]:
        return (r.ended if r.ended is not None else float("inf"), r.rank)

    failed = [r for r in state.ranks.values() if r.failed]
    recorded = min((r for r in failed if r.how != "vanished"), key=key, default=None)
    # a rank that vanished on a host where another rank recorded its failure died with the
    # launcher's teardown, not with its host: that host was alive to record
    alive = recording_hosts(failed)
    silent = min((r for r in failed if r.how == "vanished" and r.host not in alive), key=key, default=None)
    if silent is None or recorded is not None and key(recorded)[0] <= key(silent)[0] + BEAT_S:
        return recorded
    return silent


def recording_hosts(failed: List[RankState]) -> Set[Optional[str]]:
    """The hosts where a failure was recorded (a wrapper's `end`, the agent's `lost`): alive
    then, so a rank that vanished there went with the launcher's teardown, not its host."""
    return {r.host for r in failed if r.how != "vanished"}


def infer_vanished(state: RunState) -> List[RankState]:
    """After the launch ended: the ranks that started and recorded no end, nor did any agent
    (the wrapper and its host's agent killed, e.g. every process of the host): each marked
    "vanished" at its host's last beat (when it was last known alive), and returned."""
    out = []
    for r in state.ranks.values():
        if r.started is not None and r.how is None:
            host = state.hosts.get(r.host or "")
            r.how, r.ended = "vanished", (host.beat if host is not None and host.beat else r.started)
            out.append(r)
    return out


def host_silent(state: RunState, host: str) -> List[int]:
    """The ranks of `host` when every one that started there vanished (the host lost), else []."""
    h = state.hosts.get(host)
    started = [state.ranks[n] for n in (h.ranks if h else []) if state.ranks[n].started is not None]
    return sorted(r.rank for r in started) if started and all(r.how == "vanished" for r in started) else []


_STOPS = {1, 2, 9, 15}  # SIGHUP, SIGINT, SIGKILL, SIGTERM: how launchers and jobenv end the rest


def stopped_after(state: RunState, first: RankState) -> List[int]:
    """The failed ranks that only ended because `first` did, after it: by a stop signal (or
    128 + one, as a shell reports it); lost (the launcher killed the wrapper too); or vanished
    where the host was alive to record a failure or beat within BEAT_S of it (the launcher
    killed the host's agent with the rest; a lost host's ranks stop beating long before).
    A summary counts them apart, so that one fault is not "8 of 8 ranks failed"."""
    from .agent import BEAT_S

    alive = recording_hosts([r for r in state.ranks.values() if r.failed])
    when = first.ended if first.ended is not None else float("-inf")
    out = []
    for r in state.ranks.values():
        if r is first or not r.failed:
            continue
        ended = r.ended if r.ended is not None else float("inf")
        if r.how == "vanished":
            lost_with = first.how == "vanished" and r.host == first.host  # the host died: theirs too
            late = not lost_with and (r.host in alive or ended >= when - BEAT_S)
        else:
            status = r.status
            late = ended >= when and (r.how == "lost" or status is not None and status - 128 in _STOPS)
        if late:
            out.append(r.rank)
    return sorted(out)
