"""Slurm (NERSC Perlmutter, OLCF Frontier, most clusters).

Job-level variables describe the allocation; a step (`srun`, an interactive `srun --pty`)
carries step-level twins describing a subset, plus per-task variables that would fool a
later `srun` or rank detection if restored.  We capture the job and drop the rest.
Heterogeneous jobs: the allocation is the union of SLURM_JOB_NODELIST_HET_GROUP_<n>.
"""
from __future__ import annotations

import os

from jobenv.core.errors import BadInput
from jobenv.core.numparse import MAX_PER_HOST, is_uint, parse_uint
from .base import Batch, Capture, Outside, Requeue, Scheduler, run_parsed
from .parse import pick_env
from .slurm_scontrol import NAME, batch_script, expand_nodes, parse_job, parse_show_job

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

PREFIXES = ("SLURM_",)
# Per-task and per-step variables: meaningless (or harmful) in another shell.
TASK_VARS = (
    "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_TASK_PID", "SLURM_GTIDS",
    "SLURM_STEPID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES",
    "SLURM_STEP_NUM_TASKS", "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_LAUNCHER_PORT",
    "SLURM_STEP_RESV_PORTS", "SLURM_SRUN_COMM_HOST", "SLURM_SRUN_COMM_PORT",
    "SLURM_LAUNCH_NODE_IPADDR", "SLURM_PRIO_PROCESS", "SLURM_UMASK", "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN", "SLURM_CPU_BIND", "SLURM_CPU_BIND_LIST",
    "SLURM_CPU_BIND_TYPE", "SLURM_CPU_BIND_VERBOSE", "SLURM_DISTRIBUTION", "SLURM_PTY_PORT",
    "SLURM_PTY_WIN_COL", "SLURM_PTY_WIN_ROW", "SLURM_CPUS_ON_NODE", "SLURMD_NODENAME",
    "SLURM_MPI_TYPE", "SLURM_PMIX_MAPPING_SERV", "SLURM_PMI2_PROC_MAPPING", "SLURM_OVERLAP",
    "SLURM_SPANK_JOB_ID",
)
# Describe the current step when inside one, the job otherwise.
STEP_TWINS = ("SLURM_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NPROCS",
              "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE_STEP")


def in_step(env: Mapping[str, str]) -> bool:
    return bool(env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID"))


def _het_groups(env: Mapping[str, str]) -> List[str]:
    prefix = "SLURM_JOB_NODELIST_HET_GROUP_"
    found: Dict[int, str] = {}
    for k, v in env.items():
        if k.startswith(prefix) and is_uint(k[len(prefix):]) and len(k) < len(prefix) + 6:
            found[int(k[len(prefix):])] = v
    return [found[i] for i in sorted(found)]



def job_nodelist(env: Mapping[str, str]) -> str:
    """The job's nodelist text, never a step's.

    Outside a step SLURM_JOB_NODELIST is the job.  Inside one, Slurm sets SLURM_JOB_NODELIST
    and SLURM_NODELIST differently depending on how the step was started (an `srun --jobid
    J -N1` step gets the step's node in SLURM_JOB_NODELIST and the job's in SLURM_NODELIST,
    measured on Slurm 22.05); the job contains the step, so the longer list is the job.
    """
    job = env.get("SLURM_JOB_NODELIST", "")
    if in_step(env) and env.get("SLURM_NODELIST"):
        other = env["SLURM_NODELIST"]
        if not job or len(expand_nodes(other)) > len(expand_nodes(job)):
            return other
    return job or ("" if in_step(env) else env.get("SLURM_NODELIST", ""))


def job_hosts(env: Mapping[str, str]) -> List[str]:
    """The allocation's hosts: het-group union, else the job nodelist (never a step's)."""
    lists = _het_groups(env)
    if not lists:
        text = job_nodelist(env)
        if not text:
            raise BadInput("SLURM_JOB_ID is set but SLURM_JOB_NODELIST is not: cannot tell the job's nodes")
        lists = [text]
    hosts: List[str] = []
    for text in lists:
        hosts.extend(expand_nodes(text))
    return list(dict.fromkeys(hosts))  # unique, first-seen order


def gpus_hint(env: Mapping[str, str]) -> Optional[int]:
    """GPUs per node from gres variables: SLURM_GPUS_ON_NODE, _GPUS_PER_NODE, _JOB_GPUS."""
    v = env.get("SLURM_GPUS_ON_NODE", "").strip()
    if v:
        return parse_uint(v, "SLURM_GPUS_ON_NODE", MAX_PER_HOST)
    v = env.get("SLURM_GPUS_PER_NODE", "").strip()
    import re

    m = re.fullmatch(r"(?:[A-Za-z0-9_-]+:)?([0-9]+)", v)  # `4`, `a100:4`; other forms say nothing
    if m:
        return parse_uint(m.group(1), "SLURM_GPUS_PER_NODE", MAX_PER_HOST)
    v = env.get("SLURM_JOB_GPUS", "").strip()
    if v:
        return len([x for x in v.split(",") if x])
    return None


def slots(env: Mapping[str, str], nhosts: int) -> Optional[List[int]]:
    """Tasks per node for the job, when the job (not a step) says so."""
    from jobenv.core.hostlist import parse_counts

    text = "" if in_step(env) else env.get("SLURM_TASKS_PER_NODE", "")
    if text:
        counts = parse_counts(text)
        if len(counts) == nhosts:
            return counts
    per = env.get("SLURM_NTASKS_PER_NODE", "").strip()
    if per:
        return [parse_uint(per, "SLURM_NTASKS_PER_NODE", MAX_PER_HOST)] * nhosts
    return None


def capture(env: Mapping[str, str], hostname: Optional[str] = None) -> Capture:
    jobid = env.get("SLURM_JOB_ID") or env["SLURM_JOBID"]
    hosts = job_hosts(env)
    drop = TASK_VARS + (STEP_TWINS if in_step(env) else ())
    cap = Capture(
        scheduler=NAME, jobid=jobid, jobname=env.get("SLURM_JOB_NAME"), hosts=hosts,
        env=pick_env(env, PREFIXES, drop), slots=slots(env, len(hosts)), gpus_hint=gpus_hint(env),
    )
    if in_step(env) and not _het_groups(env):  # restore the job's view, not the step's
        cap.env["SLURM_JOB_NODELIST"] = job_nodelist(env)
        cap.env["SLURM_JOB_NUM_NODES"] = str(len(hosts))
    from jobenv.core.hostlist import host_index, this_host

    hostname = hostname or this_host(env)
    if host_index(hosts, hostname) is None:
        cap.warnings.append(
            f"this shell is on {hostname}, outside job {jobid}'s nodes (an salloc shell on a "
            "login node?); saved anyway: `launch` still runs inside the allocation"
        )
    return cap


_ENDED = {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
          "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"}
FORMAT = "%A %i %T"  # raw job id, display id (123_4 array task, 123+1 het component), state


def parse_squeue(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `squeue -h -t all -o '%A %i %T' -j ID,...`.

    A record's id is SLURM_JOB_ID: the raw id (`%A`), which for a het job's leader is the
    display id before `+`.  A job squeue no longer lists has left slurmctld's memory
    (MinJobAge after its end): ended, but only when squeue itself succeeded.
    """
    found: Dict[str, List[str]] = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) == 1 and len(jobids) == 1 and cols[0].isalpha() and cols[0].isupper():
            cols = [jobids[0], jobids[0], cols[0]]  # a state alone (a site wrapper, `-o %T`): the one job asked
        if len(cols) != 3 or not cols[2].isupper():
            continue
        raw, shown, state = cols
        for key in {raw, shown, shown.split("+")[0]}:
            found.setdefault(key, []).append(state)
    verdicts: Dict[str, Tuple[str, str]] = {}
    invalid = rc != 0 and "Invalid job id" in out
    for j in jobids:
        states = found.get(j)
        if states:
            if all(s in _ENDED for s in states):
                verdicts[j] = ("ended", f"squeue says {states[0]}")
            else:
                verdicts[j] = ("live", f"squeue says {next(s for s in states if s not in _ENDED)}")
        elif rc == 0 or (invalid and len(jobids) == 1):
            verdicts[j] = ("ended", "squeue no longer lists the job")
    return verdicts


def _query_safe(jobid: str) -> bool:
    """Only ids shaped like this scheduler's go on its command line (never an option)."""
    return 0 < len(jobid) <= 40 and jobid[0] in "0123456789" and set(jobid) <= set("0123456789_+")


def query(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
          timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One squeue for all `jobids`; jobs it does not answer for are left out.

    squeue retries for 60 s when SLURM_CONF names a missing file (a record restored on
    another cluster or a node without the config): skip it then.
    """
    conf = (env or os.environ).get("SLURM_CONF")
    jobids = [j for j in jobids if _query_safe(j)]
    if not jobids or (conf and not os.path.exists(conf)):
        return {}
    return run_parsed(["squeue", "-h", "-t", "all", "-o", FORMAT, "-j", ",".join(jobids)], jobids,
                      parse_squeue, env, timeout)


def find_argv(host: str, user: str) -> List[str]:
    return ["squeue", "-h", "-w", host, "-u", user, "-t", "running", "-o", "%A"]


def parse_found(text: str, host: str, user: str) -> List[str]:
    """Job ids from `squeue -h -w HOST -u USER -t running -o %A` (already filtered)."""
    return list(dict.fromkeys(w for w in text.split() if _query_safe(w)))


OUTSIDE = Outside(show=("scontrol", "show", "job", "-d"), parse=parse_job, find=find_argv, found=parse_found,
                  id_ok=lambda j: _query_safe(j) and "_" not in j and "+" not in j, running=("RUNNING",), ended=tuple(sorted(_ENDED)))

REQUEUE = Requeue(
    ("scontrol", "requeue", "{jobid}"), ("scontrol", "show", "job", "{jobid}"), parse_show_job,
    script=batch_script, submit="sbatch",
    restart_var="SLURM_RESTART_COUNT", running=("RUNNING",),  # scancel, a time limit: COMPLETING at once (tests/test_launch_requeue_preempt_slurm.py)
    needs="Slurm's client commands (scontrol, sbatch) on PATH, slurm.conf (SLURM_CONF) and munge's socket "
          "(/run/munge) inside the container (pyxis/enroot: mount them; Apptainer: --bind them)")

SCHEDULER = Scheduler(
    NAME, jobid_vars=("SLURM_JOB_ID", "SLURM_JOBID"), prefixes=PREFIXES,
    detect_any=("SLURM_JOB_ID", "SLURM_JOBID"), marks=("SLURM_JOB_NODELIST", "SLURM_NODELIST"),
    site_vars=("SLURM_CONF", "SLURM_TIME_FORMAT", "SLURM_CLUSTERS", "SLURM_CONFIG_DIR"),
    query_vars=("SLURM_CONF",),
    # srun(1)/sbatch(1) input variables: --prolog/--epilog/--task-prolog/--task-epilog
    # programs, slurm.conf (SrunProlog, PluginDir), the tasks' directory and stdio files,
    # the --bcast destination and the --export list (`ALL,LD_PRELOAD=...`)
    program_vars=("SLURM_CONF", "SLURM_CONFIG_DIR", "SLURM_PROLOG", "SLURM_EPILOG", "SLURM_TASK_PROLOG",
                  "SLURM_TASK_EPILOG", "SLURM_EXPORT_ENV", "SLURM_WORKING_DIR", "SLURM_REMOTE_CWD",
                  "SLURM_BCAST", "SLURM_STDINMODE", "SLURM_STDOUTMODE", "SLURM_STDERRMODE"),
    hosts="SLURM_JOB_NODELIST (a hostlist expression; het jobs: the union of SLURM_JOB_NODELIST_HET_GROUP_<n>)",
    priority=30, profile="slurm", capture=capture, query=query, parse=parse_squeue, outside=OUTSIDE, requeue=REQUEUE,
    # sbatch(1): --parsable prints `ID` or `ID;cluster`
    batch=Batch("#SBATCH", output=("-o {output}",), name="-J {jobname}", submit=("sbatch", "--parsable", "{script}"),
                jobid=r"^([0-9]+)(?:;\S*)?\s*$", cancel=("scancel",), id_ok=_query_safe),
)
