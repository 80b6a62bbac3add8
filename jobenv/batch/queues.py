"""Which queue `jobenv submit` asks for: the profile's queue limits, as data, judged once.

A site's queues take so many nodes for so long (ALCF's Polaris `debug`: 1 to 2 nodes, at
most an hour); a request beyond them is refused by the scheduler at qsub, or sits queued
forever.  A profile lists its queues' limits under `submit: queues:` (profiles.submit.queues
checks them), in the order `submit` may choose them.  With no `-q`, the profile's default
queue is kept when the request fits it, else the first listed queue that fits is chosen,
said in one line; an explicit `-q` that does not fit, or a request no listed queue takes,
is refused with one line.  A queue the profile does not list is not judged (the site
knows it; jobenv does not).
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from jobenv.core.errors import BadInput


def _hms(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def describe(limits: Mapping[str, Any]) -> str:
    """`1-2 nodes, at most 1:00:00` (only the limits the profile gives)."""
    parts = []
    lo, hi = limits.get("min_nodes"), limits.get("max_nodes")
    if lo or hi:
        parts.append(f"{lo or 1}-{hi} nodes" if hi else f"at least {lo} nodes")
    if limits.get("max_minutes"):
        parts.append(f"at most {_hms(int(limits['max_minutes']))}")
    return ", ".join(parts) or "limits not in the profile"


def misfit(limits: Mapping[str, Any], nodes: int, seconds: int) -> Optional[str]:
    """Why `nodes` for `seconds` do not fit a queue of these limits; None when they do."""
    if limits.get("max_nodes") and nodes > int(limits["max_nodes"]):
        return f"{nodes} nodes is more than its {limits['max_nodes']}"
    if limits.get("min_nodes") and nodes < int(limits["min_nodes"]):
        return f"{nodes} nodes is fewer than its {limits['min_nodes']}"
    if limits.get("max_minutes") and seconds > int(limits["max_minutes"]) * 60:
        return f"{_hms(-(-seconds // 60))} is longer than its {_hms(int(limits['max_minutes']))}"
    return None


def choose(profile: str, queues: Dict[str, Dict[str, Any]], default: Optional[str], given: Optional[str],
           nodes: int, seconds: int) -> Tuple[Optional[str], str]:
    """(queue to ask for, a line to say or ''): `given` when it fits, else the default when it
    fits, else the first listed queue that fits.  BadInput (one line) when none does."""
    if given is not None:
        why = misfit(queues[given], nodes, seconds) if given in queues else None
        if why:
            raise BadInput(f"queue {given} of profile {profile} takes {describe(queues[given])}: {why}; "
                           f"{_others(queues, given, nodes, seconds)}")
        return given, ""
    if default is None or default not in queues:
        return default, ""
    why = misfit(queues[default], nodes, seconds)
    if why is None:
        return default, ""
    fits = next((q for q in queues if misfit(queues[q], nodes, seconds) is None), None)
    if fits is None:
        raise BadInput(f"no queue of profile {profile} takes {nodes} nodes for {_hms(-(-seconds // 60))} "
                       f"({'; '.join(f'{q}: {describe(v)}' for q, v in queues.items())}): ask for less, or pass -q")
    return fits, (f"queue {default} takes {describe(queues[default])} ({why}): asking for {fits} "
                  f"({describe(queues[fits])}); -q picks another")


def _others(queues: Dict[str, Dict[str, Any]], given: str, nodes: int, seconds: int) -> str:
    fits = [q for q in queues if q != given and misfit(queues[q], nodes, seconds) is None]
    return f"queue {fits[0]} takes it ({describe(queues[fits[0]])})" if fits else "ask for less"
