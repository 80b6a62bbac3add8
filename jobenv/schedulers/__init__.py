"""Scheduler detection and capture: one module per scheduler, chosen from the environment.

Detection looks only at each scheduler's own job variables, so launcher variables (PALS,
PMI) and Slurm's PBS-compatibility PBS_JOBID never decide it.  When a shell carries
variables of two schedulers (one set left over from another job), the one with live
evidence wins: a PBS nodefile that still exists.
"""
from __future__ import annotations

import os

from ..errors import BadInput

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Dict, Mapping, Optional, Sequence, Tuple

    from .base import Capture

NAMES = ("pbs", "slurm", "cobalt", "local")
# Environment variable holding each scheduler's job id.
JOBID_VARS = {"pbs": ("PBS_JOBID",), "slurm": ("SLURM_JOB_ID", "SLURM_JOBID"), "cobalt": ("COBALT_JOBID",)}
# The prefix of each scheduler's variables (its module captures by it; a restore sets and clears by it).
PREFIXES = {"pbs": ("PBS_",), "slurm": ("SLURM_",), "cobalt": ("COBALT_",)}
# Variables that only a job of that scheduler sets (its id, its host list or nodefile; the
# ones each module's detect() reads, and more): a shell where one is non-empty holds a job's
# variables, so a restore of another job clears that scheduler's (jobenv.plan), and
# getjobenv's cached snippet, computed for a shell in no job, is not for it (shell/jobenv.sh).
JOB_MARKERS = {name: JOBID_VARS[name] + more for name, more in (
    ("pbs", ("PBS_NODEFILE",)), ("slurm", ("SLURM_JOB_NODELIST", "SLURM_NODELIST")), ("cobalt", ("COBALT_NODEFILE",)))}
# Variables that each scheduler's own commands read as the name of a program to run as the
# user (srun's --prolog, --epilog, --task-prolog, --task-epilog), a configuration file or
# directory (which names plugins and more programs: slurm.conf's SrunProlog and PluginDir,
# pbs.conf's PBS_EXEC), the tasks' working directory, the files their stdio goes to, the
# path --bcast writes the executable to, or srun's --export list (`ALL,LD_PRELOAD=...`):
# whoever sets them chooses what runs.  `jobenv import` never takes them from a file; a
# restore sets only the site configuration among them (plan.SITE_VARS, where the shell has
# none), never the others: they come from the shell that runs srun (jobenv.plan).
PROGRAM_VARS = {
    "slurm": ("SLURM_CONF", "SLURM_CONFIG_DIR", "SLURM_PROLOG", "SLURM_EPILOG", "SLURM_TASK_PROLOG",
              "SLURM_TASK_EPILOG", "SLURM_EXPORT_ENV", "SLURM_WORKING_DIR", "SLURM_REMOTE_CWD", "SLURM_BCAST",
              "SLURM_STDINMODE", "SLURM_STDOUTMODE", "SLURM_STDERRMODE"),
    "pbs": ("PBS_CONF_FILE", "PBS_EXEC", "PBS_HOME"),
    "cobalt": ("COBALT_CONFIG_FILES",),
}


def module(name: str) -> ModuleType:
    """A scheduler's module, imported on first use: `jobenv get` in a shell in no job, with
    its verdict cached, needs none of them (five imports, ~1.5 ms of every new shell)."""
    if name not in NAMES:
        raise KeyError(name)
    return __import__(f"{__name__}.{name}", fromlist=["detect"])


def detect(env: Mapping[str, str]) -> str:
    """The scheduler this environment belongs to: pbs, slurm, cobalt or local."""
    if not any(env.get(v) for names in JOB_MARKERS.values() for v in names):
        return "local"  # what every detect() below would say, without importing them
    found = [name for name in ("pbs", "slurm", "cobalt") if module(name).detect(env)]
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
    if name not in NAMES:
        raise BadInput(f"unknown scheduler {name!r} (pbs, slurm, cobalt, local)")
    if name != "local" and not module(name).detect(env):
        raise BadInput(f"--scheduler {name}: this shell has no {name} job variables")
    return module(name).capture(env)


def job_state(scheduler: str, jobid: str, env: Optional[Mapping[str, str]] = None,
              timeout: float = 5.0) -> Optional[Tuple[str, str]]:
    """('live'|'ended', reason) from the scheduler's CLI, None when it cannot tell."""
    return module(scheduler).job_state(jobid, env, timeout)


def job_states(scheduler: str, jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
               timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One query for many jobs of one scheduler; jobs it cannot tell about are left out."""
    return module(scheduler).job_states(jobids, env, timeout)
