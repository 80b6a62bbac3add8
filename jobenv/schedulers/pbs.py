"""PBS Pro (ALCF Polaris, Aurora, Sunspot; many university sites).

The nodefile has one line per MPI slot (`mpiprocs`), possibly uneven between chunks, and
names hosts by FQDN.  Slurm's PBS-compatibility plugin sets PBS_JOBID but never
PBS_NODEFILE, so both are required to call a job PBS.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below

from .base import Capture, parse_nodefile, pick_env, read_text, run_query

if TYPE_CHECKING:
    from typing import Mapping, Optional, Tuple

    from .base import Reader

NAME = "pbs"
PREFIXES = ("PBS_",)
DROP = ("PBS_JOBCOOKIE", "PBS_TASKNUM", "PBS_NODENUM", "PBS_MOMPORT")


def detect(env: Mapping[str, str]) -> bool:
    return bool(env.get("PBS_JOBID")) and bool(env.get("PBS_NODEFILE"))


def capture(env: Mapping[str, str], read: Reader = read_text) -> Capture:
    path = env["PBS_NODEFILE"]
    hosts, slots = parse_nodefile(read(path), path)
    return Capture(
        scheduler=NAME, jobid=env["PBS_JOBID"], jobname=env.get("PBS_JOBNAME"), hosts=hosts,
        slots=slots, env=pick_env(env, PREFIXES, DROP), nodefile=path,
    )


def job_state(jobid: str, env: Optional[Mapping[str, str]] = None,
              timeout: float = 5.0) -> Optional[Tuple[str, str]]:
    """('live'|'ended', reason) from qstat, or None where qstat is absent or silent."""
    res = run_query(["qstat", "-x", "-f", jobid], env, timeout / 2)
    if res is None:
        res = run_query(["qstat", "-f", jobid], env, timeout / 2)
    if res is None:
        return None
    rc, out = res
    for line in out.splitlines():
        key, _, val = line.strip().partition(" = ")
        if key == "job_state":
            state = val.strip()
            if state in ("F", "X", "E"):
                return "ended", f"qstat says job_state {state}"
            return "live", f"qstat says job_state {state}"
    if rc != 0 and ("Unknown Job Id" in out or "has finished" in out):
        return "ended", "qstat does not know the job"
    return None
