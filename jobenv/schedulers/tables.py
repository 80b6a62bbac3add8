"""The schedulers' facts as tables, and the rules drawn from them (which variables are never
saved nor restored): what a shell in no job reads, without loading any scheduler file.

The tables between the BEGIN/END lines are written from the scheduler files by
`python -m jobenv.schedulers.render` (tests/test_schedulers.py proves they are that
rendering).  A module of its own, under `jobenv/schedulers/__init__.py` (which takes its
names from here): the package's modules (parse.py) import them from here, never from the
package they sit in.
"""
from __future__ import annotations

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
