"""How a rank ended, read from its run's ledger state (jobenv.rank.ledger): an exit's words
("exit code 137 (128+9: SIGKILL?)"), the exit code it stands for, and the failure that came
first.  Read by the launch's summaries (jobenv.launch.ranks re-exports them) and by run
history (jobenv.history), which sits below launch.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import List, Optional, Set, Tuple

    from .ledger import RankState, RunState

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
            9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}


_GONE = {"lost": "lost: its wrapper vanished without recording an end (killed with SIGKILL?)",
         "vanished": "vanished: neither it nor its host's agent recorded an end (killed with SIGKILL, or the "
                     "host lost)"}


def exit_parts(text: str) -> Tuple[Optional[int], Optional[int]]:
    """(exit code, signal number) of an exit as the ledger and the launchers spell it: "3",
    "-1", "signal 11", "SIG11", "signal:11"; (None, None) for anything else ("lost")."""
    if text.lstrip("-").isdigit() and len(text) < 12:
        return int(text), None
    num = text.lower().replace("signal", "").replace("sig", "").strip(" :")
    return (None, int(num)) if num.isdigit() and len(num) < 4 else (None, None)


def exit_code(text: str) -> Optional[int]:
    """The exit code a rank's end stands for, as a shell or torchrun reports it: N for an exit, 128+S
    for signal S; None for an end that has none ("lost", "vanished")."""
    code, sig = exit_parts(text)
    return code % 256 if code is not None else 128 + sig if sig is not None and 0 < sig < 128 else None


def describe_exit(text: str) -> str:
    """'exit code 3', 'signal 11 (SIGSEGV)', 'exit code 137 (128+9: SIGKILL?)'."""
    if text in _GONE:
        return _GONE[text]
    code, sig = exit_parts(text)
    if code is not None:
        if code > 128 and code - 128 in _SIGNALS:
            return f"exit code {code} (128+{code - 128}: {_SIGNALS[code - 128]}?)"
        return f"exit code {code}"
    if sig is not None:
        return f"signal {sig}" + (f" ({_SIGNALS[sig]})" if sig in _SIGNALS else "")
    return f"signal {text}" if not text.lower().startswith("signal") else text


def first_failure(state: RunState) -> Optional[RankState]:
    """The failure that came first.  A recorded one (an `end` or the agent's `lost`) goes
    before a vanished rank unless it came more than BEAT_S after that rank's last beat: the
    rank died after its last beat, but may have died only because of the recorded failure."""
    from .agent import BEAT_S

    def key(r: RankState) -> Tuple[float, int]:
        return (r.ended if r.ended is not None else float("inf"), r.rank)

    failed = [r for r in state.ranks.values() if r.failed]
    recorded = min((r for r in failed if r.exit != "vanished"), key=key, default=None)
    # a rank that vanished on a host where another rank recorded its failure died with the
    # launcher's teardown, not with its host: that host was alive to record
    alive = recording_hosts(failed)
    silent = min((r for r in failed if r.exit == "vanished" and r.host not in alive), key=key, default=None)
    if silent is None or recorded is not None and key(recorded)[0] <= key(silent)[0] + BEAT_S:
        return recorded
    return silent


def recording_hosts(failed: List[RankState]) -> Set[Optional[str]]:
    """The hosts where a failure was recorded (a wrapper's `end`, the agent's `lost`): alive
    then, so a rank that vanished there went with the launcher's teardown, not its host."""
    return {r.host for r in failed if r.exit != "vanished"}
