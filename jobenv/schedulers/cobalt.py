"""Cobalt (ALCF ThetaGPU; retired, but still in users' scripts).

An interactive ssh forwards only COBALT_NODEFILE and COBALT_JOBID; COBALT_JOBSIZE counts
processes, not nodes, so hosts come from the nodefile alone, in the scheduler's order.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below

from ..errors import BadInput
from .base import Capture, parse_nodefile, pick_env, read_text, run_query

if TYPE_CHECKING:
    from typing import Mapping, Optional, Tuple

    from .base import Reader

NAME = "cobalt"
PREFIXES = ("COBALT_",)


def detect(env: Mapping[str, str]) -> bool:
    return bool(env.get("COBALT_JOBID") or env.get("COBALT_NODEFILE"))


def capture(env: Mapping[str, str], read: Reader = read_text) -> Capture:
    jobid = env.get("COBALT_JOBID", "")
    path = env.get("COBALT_NODEFILE") or (f"/var/tmp/cobalt.{jobid}" if jobid else "")
    if not jobid:
        import re

        m = re.search(r"cobalt\.(\d+)$", path)
        if not m:
            raise BadInput("COBALT_JOBID is not set and COBALT_NODEFILE does not name the job")
        jobid = m.group(1)
    hosts, _ = parse_nodefile(read(path), path)
    return Capture(scheduler=NAME, jobid=jobid, hosts=hosts, env=pick_env(env, PREFIXES),
                   nodefile=path)


def job_state(jobid: str, env: Optional[Mapping[str, str]] = None,
              timeout: float = 5.0) -> Optional[Tuple[str, str]]:
    res = run_query(["qstat", jobid], env, timeout)
    if res is None:
        return None
    import re

    rc, out = res
    if rc == 0 and re.search(rf"^\s*{re.escape(jobid)}\b", out, re.M):
        return "live", "qstat lists the job"
    if rc == 0:
        return "ended", "qstat does not list the job"
    return None
