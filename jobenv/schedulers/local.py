"""No scheduler: this host alone (a laptop, a workstation, a CI box).

The job id is the host name, so one record per host; it is live for as long as the host is.
"""
from __future__ import annotations

from .base import Capture

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Sequence, Tuple

NAME = "local"


def detect(env: Mapping[str, str]) -> bool:
    return True


def capture(env: Mapping[str, str], hostname: Optional[str] = None) -> Capture:
    from ..hostlist import check_host, this_host

    host = check_host(hostname or this_host(env), "local host name")
    return Capture(scheduler=NAME, jobid=host.split(".")[0], hosts=[host], env={})


def job_states(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
               timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    return {j: ("live", "local records stay valid") for j in jobids}


def job_state(jobid: str, env: Optional[Mapping[str, str]] = None, timeout: float = 5.0) -> Optional[Tuple[str, str]]:
    return "live", "local records stay valid"
