"""Schedulers: one file each (`jobenv/schedulers/<name>.py`, a `base.Scheduler`), and the
tables of their facts that everything else reads.

The tables between the BEGIN/END lines below are written from the scheduler files by
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

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Mapping, Optional, Sequence, Tuple

    from .base import Capture, Scheduler

# BEGIN tables: written by `python -m jobenv.schedulers.render`; edit the scheduler files instead
NAMES = ("flux", "pbs", "slurm", "lsf", "cobalt", "local")
JOBID_VARS = {"flux": ("FLUX_ENCLOSING_ID", "FLUX_JOB_ID"), "pbs": ("PBS_JOBID",), "slurm": ("SLURM_JOB_ID", "SLURM_JOBID"), "lsf": ("LSB_JOBID",), "cobalt": ("COBALT_JOBID",)}
PREFIXES = {"flux": ("FLUX_",), "pbs": ("PBS_",), "slurm": ("SLURM_",), "lsf": ("LSB_", "LSF_"), "cobalt": ("COBALT_",)}
JOB_MARKERS = {"flux": ("FLUX_ENCLOSING_ID", "FLUX_JOB_ID"), "pbs": ("PBS_JOBID", "PBS_NODEFILE"), "slurm": ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"), "lsf": ("LSB_JOBID", "LSB_MCPU_HOSTS", "LSB_DJOB_HOSTFILE", "LSB_HOSTS"), "cobalt": ("COBALT_JOBID", "COBALT_NODEFILE")}
DETECT = {"flux": (("FLUX_ENCLOSING_ID", "FLUX_JOB_ID"), ("FLUX_URI",)), "pbs": (("PBS_JOBID",), ("PBS_NODEFILE",)), "slurm": (("SLURM_JOB_ID", "SLURM_JOBID"), ()), "lsf": (("LSB_JOBID",), ()), "cobalt": (("COBALT_JOBID", "COBALT_NODEFILE"), ())}
NODEFILE_VARS = {"pbs": "PBS_NODEFILE", "lsf": "LSB_DJOB_HOSTFILE", "cobalt": "COBALT_NODEFILE"}
SITE_VARS = frozenset(("PBS_SERVER", "PBS_CONF_FILE", "PBS_EXEC", "PBS_HOME", "PBS_DEFAULT", "PBS_SERVER_NAME", "SLURM_CONF", "SLURM_TIME_FORMAT", "SLURM_CLUSTERS", "SLURM_CONFIG_DIR", "LSF_ENVDIR", "LSF_BINDIR", "LSF_LIBDIR", "LSF_SERVERDIR", "LSF_VERSION", "COBALT_CONFIG_FILES"))
QUERY_VARS = ("PBS_CONF_FILE", "PBS_SERVER", "SLURM_CONF", "LSF_ENVDIR")
SECRETS = frozenset(("PBS_JOBCOOKIE",))
PROGRAM_VARS = {"flux": ("FLUX_EXEC_PATH", "FLUX_CONNECTOR_PATH", "FLUX_MODULE_PATH", "FLUX_PMI_LIBRARY_PATH", "FLUX_RC_EXTRA", "FLUX_SHELL_RC_PATH"), "pbs": ("PBS_CONF_FILE", "PBS_EXEC", "PBS_HOME"), "slurm": ("SLURM_CONF", "SLURM_CONFIG_DIR", "SLURM_PROLOG", "SLURM_EPILOG", "SLURM_TASK_PROLOG", "SLURM_TASK_EPILOG", "SLURM_EXPORT_ENV", "SLURM_WORKING_DIR", "SLURM_REMOTE_CWD", "SLURM_BCAST", "SLURM_STDINMODE", "SLURM_STDOUTMODE", "SLURM_STDERRMODE"), "lsf": ("LSF_ENVDIR", "LSF_BINDIR", "LSF_LIBDIR", "LSF_SERVERDIR"), "cobalt": ("COBALT_CONFIG_FILES",)}
PROFILES = {"flux": "elcapitan", "pbs": "pbs", "slurm": "slurm", "lsf": "lassen", "cobalt": "cobalt", "local": "local"}
ALLOCATES = frozenset(("flux", "pbs", "slurm", "lsf", "cobalt"))
ASKS_COMMAND = frozenset(("flux", "pbs", "slurm", "lsf", "cobalt"))
THIS_HOST_ONLY = frozenset(("local",))
# END tables

# Never restored from a record (nor saved into one): they choose a program a scheduler command
# runs, its tasks' directory or environment (each scheduler file's `program_vars`), and no
# scheduler sets them in a job, so a record holds one only as a user's option or a foreign
# file's choice; a path in one names, on another node, whatever another user may have put
# there.  Site configuration among them is restored only where a shell has none (jobenv.restore.plan).
SHELL_ONLY = frozenset(n for names in PROGRAM_VARS.values() for n in names) - SITE_VARS

# Never persisted, whatever the scheduler: names that authenticate to the job's daemons.
SECRET_WORDS = ("COOKIE", "SECRET", "TOKEN", "PASSW", "CREDENTIAL")


def is_secret(name: str) -> bool:
    """A variable never saved nor restored: a scheduler's named secret, a name holding one
    of SECRET_WORDS, or one ending in _KEY (any case)."""
    up = name.upper()
    return name in SECRETS or up.endswith("_KEY") or any(w in up for w in SECRET_WORDS)


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
