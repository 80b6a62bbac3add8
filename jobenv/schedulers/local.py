"""No scheduler: this host alone (a laptop, a workstation, a CI box).

The job id is the host name, so one record per host; it is live for as long as the host is.
"""
from __future__ import annotations

from .base import Capture, Scheduler

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Sequence, Tuple

NAME = "local"


def capture(env: Mapping[str, str], hostname: Optional[str] = None) -> Capture:
    from jobenv.core.hostlist import check_host, this_host

    host = check_host(hostname or this_host(env), "local host name")
    return Capture(scheduler=NAME, jobid=host.split(".")[0], hosts=[host], env={})


def query(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
          timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    return {j: ("live", "local records stay valid") for j in jobids}


# Detected when no other scheduler is (it has no variables of its own): always last.
SCHEDULER = Scheduler(NAME, jobid_vars=(), prefixes=(), detect_any=(), hosts="this host's name",
                      priority=1000, profile="local", capture=capture, query=query,
                      allocates=False, asks_command=False, this_host_only=True)
