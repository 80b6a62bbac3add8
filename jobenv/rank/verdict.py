"""A launch attempt's verdict: how it ended, decided once, as one typed value.

Torch elastic gathers each failed worker into one `ProcessFailure` and the run into one
`RunResult`; the first failure is picked once and formatted once.  This is that value for a
`jobenv launch` attempt.  `decide` takes the ranks' ledger state, read once after the launch
settled (after a time limit: the snapshot taken before the kill, whose exits the kill did not
cause), and what the supervisor saw (the launcher's own exit code, a limit, the user's signal, a
pre-emption), infers the vanished ranks once, picks the first failure once, and says:

- `outcome`: "ok", "failed" (the program or a rank did: any rank's own exit or signal,
  SIGTERM and SIGKILL from the OOM killer included), or "interrupted" (stopped from outside the
  program: ^C or a signal to the launch, `jobenv kill`, --timeout, --idle-timeout, pre-emption);
- `cause`: "none", "rank", "launcher" (it failed and no rank recorded a failure), "timeout",
  "idle-timeout", "signal" (the user's, in `signal`), "preempted" (the signal, in `signal`);
- `exit_code`: the launch's exit code: the first failed rank's own (N, or 128+S for its signal
  S: torchrun's root cause), the launcher's only when no rank recorded one, 124 after a limit,
  128+S after the user's signal or a pre-emption, 0 when every program finished (teardown aborts
  after a clean finish excused: jobenv.rank.teardown);
- `first` (the RankState of the first failure, its end as integers), `stopped` (the ranks only
  stopped after it), `lost_hosts`, `excused`, and `state` itself.

The exit code, the printed summary, the failover and retry verdict, the run history and the
report all take this value: none reads a ledger again, and none parses words back.
"""
from __future__ import annotations

from .ends import first_failure, host_silent, infer_vanished, signal_words, stopped_after, words

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    from .ledger import RankState, RunState

OUTCOMES = ("ok", "failed", "interrupted")
CAUSES = ("none", "rank", "launcher", "timeout", "idle-timeout", "signal", "preempted")
TIMEOUT_EXIT = 124  # as timeout(1)


class Verdict:
    """One attempt's end (module docstring).  Built by `decide`; read, never re-derived."""

    __slots__ = ("outcome", "cause", "exit_code", "signal", "launcher_exit", "nranks", "first", "stopped",
                 "lost_hosts", "excused", "state")

    def __init__(self, outcome: str, cause: str, exit_code: int, launcher_exit: int, nranks: int, state: RunState,
                 signal: Optional[int] = None, first: Optional[RankState] = None, stopped: Optional[List[int]] = None,
                 lost_hosts: Optional[List[str]] = None, excused: Optional[List[RankState]] = None) -> None:
        self.outcome, self.cause, self.exit_code, self.signal = outcome, cause, exit_code, signal
        self.launcher_exit, self.nranks, self.state = launcher_exit, nranks, state
        self.first = first
        self.stopped: List[int] = stopped or []
        self.lost_hosts: List[str] = lost_hosts or []
        self.excused: List[RankState] = excused or []

    def __repr__(self) -> str:
        first = None if self.first is None else (self.first.rank, self.first.how, self.first.code, self.first.signal)
        return f"Verdict({self.outcome}, {self.cause}, exit {self.exit_code}, signal {self.signal}, first {first})"

    def failed_count(self) -> int:
        """Ranks that failed on their own (those stopped after the first are not counted)."""
        return sum(1 for r in self.state.ranks.values() if r.failed) - len(self.stopped)

    def to_json(self) -> Dict[str, Any]:
        """The verdict's fields in run history (summary.json, version 2; jobenv.history)."""
        f = self.first
        return {"outcome": self.outcome, "cause": self.cause, "exit": self.exit_code, "signal": self.signal,
                "launcher_exit": self.launcher_exit, "lost_hosts": self.lost_hosts,
                "first_failure": None if f is None else {
                    "rank": f.rank, "host": f.host, "how": f.how, "exit": f.code, "signal": f.signal,
                    "status": f.status, "at": f.ended, "description": words(f)}}


def decide(state: RunState, nranks: int, launcher_exit: int, expired: Optional[str] = None,
           signalled: Optional[int] = None, preempted: Optional[int] = None) -> Verdict:
    """The verdict of an attempt whose launcher ended with `launcher_exit` (a signal as 128+N),
    from `state` (read once, after the settle; after a limit, the snapshot before the kill);
    `expired` ("timeout" | "idle-timeout"), `signalled` (a signal forwarded to the launch: the
    user's, `jobenv kill`'s, a closed reader's SIGPIPE), `preempted` (the pre-emption signal
    under --requeue).  Marks the ranks that vanished (only once the launch is over: not after a
    limit, whose snapshot was taken while it ran)."""
    from .teardown import excused

    if preempted is not None:
        return Verdict("interrupted", "preempted", 128 + preempted, launcher_exit, nranks, state, preempted)
    if signalled is not None:
        return Verdict("interrupted", "signal", 128 + signalled, launcher_exit, nranks, state, signalled)
    if expired is None:
        infer_vanished(state)
    first = first_failure(state)
    stopped = stopped_after(state, first) if first is not None else []
    lost = sorted(h for h in state.hosts if host_silent(state, h))
    if expired is not None:
        return Verdict("interrupted", expired, TIMEOUT_EXIT, launcher_exit, nranks, state, None, first, stopped, lost)
    if launcher_exit == 0:
        return Verdict("ok", "none", 0, 0, nranks, state)
    late = excused(state, nranks)
    if late is not None:  # every program finished; some died in interpreter teardown after
        return Verdict("ok", "none", 0, launcher_exit, nranks, state, excused=late)
    if first is None:
        return Verdict("failed", "launcher", launcher_exit, launcher_exit, nranks, state, lost_hosts=lost)
    status = first.status  # none for a lost or vanished rank: then the launcher's
    return Verdict("failed", "rank", launcher_exit if status is None else status, launcher_exit, nranks, state,
                   None, first, stopped, lost)


def label(outcome: str, cause: str, exit_code: Optional[int], signal: Optional[int]) -> str:
    """The one short phrase for an ending, in `runs list`, `runs show` and the report's badge:
    'ok', 'failed: exit 3', 'failed: the launcher exited 1', 'interrupted: timeout',
    'interrupted: signal 2 (SIGINT)', 'interrupted: pre-empted by signal 10 (SIGUSR1)'."""
    if outcome == "ok":
        return "ok"
    if cause in ("timeout", "idle-timeout"):
        return f"interrupted: {cause}"
    if cause == "signal" and signal is not None:
        return f"interrupted: {signal_words(signal)}"
    if cause == "preempted" and signal is not None:
        return f"interrupted: pre-empted by {signal_words(signal)}"
    if cause == "launcher":
        return f"failed: the launcher exited {exit_code}"
    return f"{outcome}: exit {exit_code}" if exit_code is not None else outcome
