"""Asking every host agent of a launch to act: `send` a verb, then read the `acks`.

The run directory's `request` file holds one line `<seq> <verb>`, replaced atomically (a
new private file renamed over it), so an agent reads either the old request or the new
one, never half of one.  Every host agent (jobenv.rankwrap's protocol) polls it each beat,
carries out a seq once and appends `ack <seq> <verb> <epoch>` to its host's ledger.
Verbs: `stacks` (the dump signal to every hooked running rank), `stacks:cont` (the same,
and SIGCONT: a stopped rank), `kill` (TERM to every running program and wrapper, KILL 5 s
later), `signal:<NAME>` with NAME in SIGNALS (to every running program).
"""
from __future__ import annotations

import os

from jobenv.launch import ranks

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict

SIGNALS = ("USR1", "USR2", "TERM", "INT", "HUP")
VERBS = ("stacks", "stacks:cont", "kill") + tuple(f"signal:{n}" for n in SIGNALS)


def _current(run_dir: str) -> int:
    """The seq of the request in place (0 for none or one that does not parse)."""
    from jobenv.core.readfile import read_bytes

    try:
        words = read_bytes(os.path.join(run_dir, "request"), 4096).split()
    except OSError:
        return 0
    return int(words[0]) if words and words[0].isdigit() and len(words[0]) <= 9 else 0


def send(run_dir: str, verb: str) -> int:
    """Ask every host agent of the launch in `run_dir` to carry out `verb`; its seq (one more
    than the request in place: a later request supersedes an earlier one not yet seen).
    ValueError for a verb the agents do not know."""
    if verb not in VERBS:
        raise ValueError(f"unknown request {verb!r}: expected one of {', '.join(VERBS)}")
    seq = _current(run_dir) + 1
    ranks.write_private(os.path.join(run_dir, "request"), f"{seq} {verb}\n")
    return seq


def acks(run_dir: str, seq: int) -> Dict[str, float]:
    """host -> when its agent carried out request `seq` (hosts that have not yet: absent)."""
    state = ranks.read(run_dir)
    return {name: h.acks[seq] for name, h in state.hosts.items() if seq in h.acks}


def has_agent(run_dir: str) -> bool:
    """A host agent beats in the run directory (jobenv.launch.watch.requests is its mailbox)."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        return False
    return any(n.startswith("host-") and n.endswith(".beat") for n in names)
