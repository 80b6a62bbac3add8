"""Schedulers: one file each (`jobenv/schedulers/<name>.py`, a `base.Scheduler`), and the
tables of their facts that everything else reads.

The tables (tables.py, with the rules drawn from them) are written from the scheduler files by
`python -m jobenv.schedulers.render` (tests/test_schedulers.py proves they are that
rendering), so a shell in no job, which needs only the facts, loads no scheduler file
(about 5 ms of every new shell).  Detection looks only at each scheduler's own job
variables, so launcher variables (PALS, PMI) and Slurm's PBS-compatibility PBS_JOBID never
decide it.  When a shell carries variables of two schedulers (one set left over from
another job), the one with live evidence wins: a nodefile that still exists.
"""
from __future__ import annotations

import os

from jobenv.core.errors import BadInput
from .tables import (NAMES, JOBID_VARS, PREFIXES, JOB_MARKERS, DETECT, NODEFILE_VARS, SITE_VARS, QUERY_VARS, SECRETS,
                     PROGRAM_VARS, PROFILES, ALLOCATES, ASKS_COMMAND, THIS_HOST_ONLY, SHELL_ONLY, SECRET_WORDS, is_secret)

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Sequence, Tuple

    from .base import Capture, Scheduler

__all__ = ["NAMES", "JOBID_VARS", "PREFIXES", "JOB_MARKERS", "DETECT", "NODEFILE_VARS", "SITE_VARS", "QUERY_VARS",
           "SECRETS", "PROGRAM_VARS", "PROFILES", "ALLOCATES", "ASKS_COMMAND", "THIS_HOST_ONLY", "SHELL_ONLY",
           "SECRET_WORDS", "is_secret", "all_jobid_vars", "job_id_vars", "all_prefixes", "descriptor", "holds", "which_scheduler", "job_scheduler", "env_jobid",
           "capture", "query_states"]  # the tables (tables.py) and the functions below


def all_jobid_vars() -> Tuple[str, ...]:
    """Every scheduler's job-id variables, in detection order."""
    return tuple(v for name in NAMES for v in JOBID_VARS.get(name, ()))


def job_id_vars() -> Tuple[str, ...]:
    """Where a rank finds its job id: a restored shell's JOBENV_JOBID, then every scheduler's
    job-id variables (runtime.discovery.job_id and the wrapper's port seed read this list)."""
    return ("JOBENV_JOBID",) + all_jobid_vars()


def all_prefixes() -> Tuple[str, ...]:
    """Every scheduler's variable prefixes, in detection order."""
    return tuple(p for name in NAMES for p in PREFIXES.get(name, ()))


def descriptor(name: str) -> Scheduler:
    """A scheduler's file, imported on first use: `jobenv get` in a shell in no job, with
    its verdict cached, needs only the tables above."""
    if name not in NAMES:
        raise KeyError(name)
    scheduler: Scheduler = __import__(f"{__name__}.{name}", fromlist=["SCHEDULER"]).SCHEDULER
    return scheduler


def holds(env: Mapping[str, str], name: str) -> bool:
    """Does this environment hold a job of scheduler `name` (its DETECT rule)?"""
    if name not in DETECT:
        return name == "local"
    any_of, all_of = DETECT[name]
    return any(env.get(v) for v in any_of) and all(env.get(v) for v in all_of)


def which_scheduler(env: Mapping[str, str]) -> str:
    """The scheduler this environment belongs to: one of NAMES, `local` when none holds."""
    found = [name for name in NAMES if name in DETECT and holds(env, name)]
    if len(found) > 1:  # a left-over job's nodefile is gone
        alive = [n for n in found if not env.get(NODEFILE_VARS.get(n, "")) or os.path.exists(env[NODEFILE_VARS[n]])]
        found = alive or found
    return found[0] if found else "local"


def job_scheduler(env: Mapping[str, str]) -> str:
    """The scheduler of the job this environment names: detected, else (a rank's environment
    may lack the nodefile detection asks for) the first whose job-id variable is set."""
    name = which_scheduler(env)
    if name == "local":
        return next((n for n in NAMES if any(env.get(v) for v in JOBID_VARS.get(n, ()))), name)
    return name


def env_jobid(env: Mapping[str, str]) -> Optional[Tuple[str, str]]:
    """(scheduler, jobid) of the scheduler job this shell lives in, if any."""
    name = which_scheduler(env)
    for var in JOBID_VARS.get(name, ()):
        if env.get(var):
            return name, env[var]
    return None


def capture(env: Mapping[str, str], scheduler: Optional[str] = None) -> Capture:
    name = scheduler or which_scheduler(env)
    if name not in NAMES:
        raise BadInput(f"unknown scheduler {name!r} ({', '.join(NAMES)})")
    if not holds(env, name):
        raise BadInput(f"--scheduler {name}: this shell has no {name} job variables")
    return descriptor(name).capture(env)


def query_states(scheduler: str, jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
                 timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """('live'|'ended', reason) per job from one bounded query of the scheduler's CLI; jobs it
    cannot tell about are left out.  (liveness.job_state/job_states hold the whole rule.)"""
    return descriptor(scheduler).query(jobids, env, timeout)
