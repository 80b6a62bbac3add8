"""Scheduler detection and capture: one module per scheduler, chosen from the environment.

Detection looks only at each scheduler's own job variables, so launcher variables (PALS,
PMI) and Slurm's PBS-compatibility PBS_JOBID never decide it.  When a shell carries
variables of two schedulers (one set left over from another job), the one with live
evidence wins: a PBS nodefile that still exists.
"""
from __future__ import annotations

import os

from ..errors import BadInput
from . import cobalt, local, pbs, slurm

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Sequence, Tuple

    from .base import Capture

MODULES = {"pbs": pbs, "slurm": slurm, "cobalt": cobalt, "local": local}
# Environment variable holding each scheduler's job id.
JOBID_VARS = {"pbs": ("PBS_JOBID",), "slurm": ("SLURM_JOB_ID", "SLURM_JOBID"), "cobalt": ("COBALT_JOBID",)}
PREFIXES = {"pbs": pbs.PREFIXES, "slurm": slurm.PREFIXES, "cobalt": cobalt.PREFIXES}
# Variables that only a job of that scheduler sets (its id, its host list or nodefile; the
# ones each module's detect() reads, and more): a shell where one is non-empty holds a job's
# variables, so a restore of another job clears that scheduler's (jobenv.plan), and
# getjobenv's cached snippet, computed for a shell in no job, is not for it (shell/jobenv.sh).
JOB_MARKERS = {"pbs": ("PBS_JOBID", "PBS_NODEFILE"),
               "slurm": ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"),
               "cobalt": ("COBALT_JOBID", "COBALT_NODEFILE")}


def detect(env: Mapping[str, str]) -> str:
    """The scheduler this environment belongs to: pbs, slurm, cobalt or local."""
    found = [name for name in ("pbs", "slurm", "cobalt") if MODULES[name].detect(env)]
    if len(found) > 1 and "pbs" in found and not os.path.exists(env.get("PBS_NODEFILE", "")):
        found.remove("pbs")
    return found[0] if found else "local"


def env_jobid(env: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(scheduler, jobid) of the scheduler job this shell lives in, if any."""
    name = detect(env)
    if name == "local":
        return None
    for var in JOBID_VARS[name]:
        if env.get(var):
            return name, env[var]
    return None


def capture(env: Mapping[str, str], scheduler: Optional[str] = None) -> Capture:
    name = scheduler or detect(env)
    if name not in MODULES:
        raise BadInput(f"unknown scheduler {name!r} (pbs, slurm, cobalt, local)")
    if name != "local" and not MODULES[name].detect(env):
        raise BadInput(f"--scheduler {name}: this shell has no {name} job variables")
    return MODULES[name].capture(env)


def job_state(scheduler: str, jobid: str, env: Optional[Mapping[str, str]] = None,
              timeout: float = 5.0) -> Optional[Tuple[str, str]]:
    """('live'|'ended', reason) from the scheduler's CLI, None when it cannot tell."""
    return MODULES[scheduler].job_state(jobid, env, timeout)


def job_states(scheduler: str, jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
               timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One query for many jobs of one scheduler; jobs it cannot tell about are left out."""
    return MODULES[scheduler].job_states(jobids, env, timeout)
