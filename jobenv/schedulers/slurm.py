"""Slurm (NERSC Perlmutter, OLCF Frontier, most clusters).

Job-level variables describe the allocation; a step (`srun`, an interactive `srun --pty`)
carries step-level twins describing a subset, plus per-task variables that would fool a
later `srun` or rank detection if restored.  We capture the job and drop the rest.
Heterogeneous jobs: the allocation is the union of SLURM_JOB_NODELIST_HET_GROUP_<n>.
"""
from __future__ import annotations

import os

from ..errors import BadInput
from ..numparse import MAX_PER_HOST, is_uint, parse_uint
from .base import Batch, Capture, JobFacts, Outside, Requeue, Scheduler, pick_env, run_parsed

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

NAME = "slurm"
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


def _expand(text: str) -> List[str]:
    from ..hostlist import HostlistError, expand

    try:
        return expand(text)
    except HostlistError as exc:
        raise HostlistError(f"Slurm nodelist: {exc}") from None


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
        if not job or len(_expand(other)) > len(_expand(job)):
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
        hosts.extend(_expand(text))
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
    from ..hostlist import parse_counts

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
    from ..hostlist import host_index, this_host

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


def _records(text: str) -> List[Tuple[Dict[str, str], List[Tuple[str, str]]]]:
    """`scontrol show job -d` text as records (one per job or het component, blank-line
    separated): the job's `Key=Value` fields (first one wins; a word without `=` belongs
    to the value before it, as in `JobName=my job`) and its per-node detail lines
    (`Nodes=... CPU_IDs=... GRES=gpu:4(IDX:0-3)`) as (nodes, gres)."""
    out: List[Tuple[Dict[str, str], List[Tuple[str, str]]]] = []
    fields: Dict[str, str] = {}
    details: List[Tuple[str, str]] = []
    for line in text.splitlines() + [""]:
        words = line.split()
        if not words:
            if fields:
                out.append((fields, details))
            fields, details = {}, []
            continue
        if words[0].startswith("Nodes="):
            kv = dict(w.split("=", 1) for w in words if "=" in w)
            details.append((kv.get("Nodes", ""), kv.get("GRES", "")))
            continue
        last = ""
        for w in words:
            key, eq, val = w.partition("=")
            if eq and key and key.replace("/", "").replace(":", "").replace("_", "").isalnum():
                last = key
                fields.setdefault(key, val)
            elif last and fields.get(last) is not None:
                fields[last] += " " + w
    return out


def _gres_gpus(gres: str) -> Optional[int]:
    """GPUs in a detail line's GRES: `gpu:4(IDX:0-3)`, `gpu:a100:4(IDX:0-3),nic:1` -> 4, `nic:1`
    -> 0; None for a gpu entry in a form it does not know (it then says nothing)."""
    import re

    items = [i for i in re.split(r",(?![^(]*\))", gres) if i.split(":")[0] == "gpu"]
    counts = [re.fullmatch(r"gpu(?::[A-Za-z0-9_.-]+)?:([0-9]{1,6})(?:\(.*\))?", i) for i in items]
    if not all(counts):
        return None
    return sum(int(m.group(1)) for m in counts if m)


def _job_gpus(fields: Dict[str, str], details: List[Tuple[str, str]], hosts: List[str]) -> Tuple[Optional[int], str]:
    """GPUs per node: from the per-node GRES lines (the fewest on any node), else the
    job's TRES `gres/gpu=N` shared evenly over its nodes."""
    per: Dict[str, int] = {}
    for nodes, gres in details:
        n = _gres_gpus(gres) if nodes and gres else None
        if n is not None:
            for h in _expand(nodes):
                per[h] = per.get(h, 0) + n
    if per and hosts:
        return min(min(per.get(h, 0) for h in hosts), MAX_PER_HOST), "scontrol -d GRES per node"
    for item in (fields.get("AllocTRES") or fields.get("TRES", "")).split(","):  # AllocTRES from 23.02
        key, _, val = item.partition("=")
        if key == "gres/gpu" and is_uint(val) and len(val) <= 12 and hosts and int(val) % len(hosts) == 0:
            return min(int(val) // len(hosts), MAX_PER_HOST), "scontrol TRES gres/gpu"
    return None, ""


def _job_slots(fields: Dict[str, str], nhosts: int) -> Tuple[Optional[List[int]], str]:
    """Tasks per node: NtasksPerN when the job asked for it, else NumTasks over NumNodes
    when it divides evenly."""
    per = fields.get("NtasksPerN:B:S:C", "").split(":")[0]
    if is_uint(per) and len(per) <= 9 and 0 < int(per) <= MAX_PER_HOST:
        return [int(per)] * nhosts, "scontrol NtasksPerN"
    tasks = fields.get("NumTasks", "")
    if is_uint(tasks) and len(tasks) <= 12 and nhosts and int(tasks) % nhosts == 0 and 0 < int(tasks) // nhosts <= MAX_PER_HOST:
        return [int(tasks) // nhosts] * nhosts, "scontrol NumTasks/NumNodes"
    return None, ""


def parse_job(text: str, jobid: str) -> Capture:
    """The job `jobid` as `scontrol show job -d ID` describes it (Slurm 20.11-24.05 print
    the same fields): NodeList, NumNodes, NumTasks, NtasksPerN, per-node GRES or TRES
    gres/gpu, BatchHost, UserId and JobState.  A het job prints one record per component
    (HetJobId=ID): its hosts are their union.  BadInput when the text holds no such job."""
    recs = [(f, d) for f, d in _records(text) if jobid in (f.get("JobId"), f.get("HetJobId"))]
    if not recs:
        raise BadInput(f"scontrol's answer does not describe job {jobid}")
    fields, details = recs[0]
    hosts: List[str] = []
    for f, _ in recs:
        nodelist = f.get("NodeList", "")
        if nodelist and nodelist != "(null)":
            hosts.extend(_expand(nodelist))
    hosts = list(dict.fromkeys(hosts))
    state = fields.get("JobState", "")
    gpus, gpu_src = _job_gpus(fields, [d for _, ds in recs for d in ds], hosts)
    slots, slot_src = _job_slots(fields, len(hosts)) if len(recs) == 1 else (None, "")
    env = {"SLURM_JOB_ID": jobid, "SLURM_JOBID": jobid}
    if hosts:
        env.update(SLURM_JOB_NODELIST=fields["NodeList"] if len(recs) == 1 else ",".join(hosts),
                   SLURM_JOB_NUM_NODES=str(len(hosts)))
    for key, var in (("JobName", "SLURM_JOB_NAME"), ("Partition", "SLURM_JOB_PARTITION"),
                     ("Account", "SLURM_JOB_ACCOUNT"), ("WorkDir", "SLURM_SUBMIT_DIR")):
        val = fields.get(key, "")
        if val and val != "(null)":
            env[var] = val
    sources = {"hosts": "scontrol NodeList", "state": "scontrol JobState", "owner": "scontrol UserId"}
    if gpu_src:
        sources["gpus_per_host"] = gpu_src
    if slot_src:
        sources["slots"] = slot_src
    cap = Capture(scheduler=NAME, jobid=jobid, jobname=env.get("SLURM_JOB_NAME"), hosts=hosts, env=env,
                  slots=slots, gpus_hint=gpus, state=state, owner=fields.get("UserId", ""), sources=sources)
    batch = fields.get("BatchHost", "")
    if batch and hosts and batch not in hosts:
        cap.warnings.append(f"scontrol names BatchHost {batch!r}, which is not in NodeList")
    return cap


def find_argv(host: str, user: str) -> List[str]:
    return ["squeue", "-h", "-w", host, "-u", user, "-t", "running", "-o", "%A"]


def parse_found(text: str, host: str, user: str) -> List[str]:
    """Job ids from `squeue -h -w HOST -u USER -t running -o %A` (already filtered)."""
    return list(dict.fromkeys(w for w in text.split() if _query_safe(w)))


OUTSIDE = Outside(show=("scontrol", "show", "job", "-d"), parse=parse_job, find=find_argv, found=parse_found,
                  id_ok=lambda j: _query_safe(j) and "_" not in j and "+" not in j, running=("RUNNING",), ended=tuple(sorted(_ENDED)))

# `scontrol show job` fields a resubmission passes on, as sbatch flags; "(null)", "N/A" and
# "UNLIMITED" say nothing.  StdOut/StdErr are the paths the first job expanded: with
# --open-mode=append the resubmitted job adds to them instead of truncating its predecessor's.
_RESUBMIT_FLAGS = (("NumNodes", "--nodes"), ("NumTasks", "--ntasks"), ("Partition", "--partition"),
                   ("TimeLimit", "--time"), ("JobName", "--job-name"), ("Account", "--account"),
                   ("QOS", "--qos"), ("WorkDir", "--chdir"), ("StdOut", "--output"), ("StdErr", "--error"))
_NOTHING = ("", "(null)", "N/A", "UNLIMITED", "Partition_Limit")


def parse_show_job(out: str) -> JobFacts:
    """The facts of `scontrol show job ID` (`Key=Value` words; Command is the script's path,
    "(null)" for a script given on stdin, which `scontrol write batch_script` then recovers)."""
    recs = _records(out)  # the one reader of `scontrol show job` text (as `save --job` reads it)
    fields: Dict[str, str] = recs[0][0] if recs else {}
    flags = [f"{flag}={fields[key]}" for key, flag in _RESUBMIT_FLAGS if fields.get(key, "") not in _NOTHING]
    per_node = fields.get("NtasksPerN:B:S:C", "").split(":")[0]
    if per_node.isdigit() and per_node != "0":
        flags.append(f"--ntasks-per-node={per_node}")
    flags += ["--requeue" if fields.get("Requeue") == "1" else "--no-requeue", "--open-mode=append"]
    command = fields.get("Command", "")
    restarts = fields.get("Restarts", "")
    return JobFacts(state=fields.get("JobState", ""), script="" if command in _NOTHING else command,
                    workdir=fields.get("WorkDir", ""), submit=tuple(flags),
                    requeueable={"1": True, "0": False}.get(fields.get("Requeue", "")),
                    restarts=int(restarts) if restarts.isdigit() else None)


REQUEUE = Requeue(
    ("scontrol", "requeue", "{jobid}"), ("scontrol", "show", "job", "{jobid}"), parse_show_job,
    dump=("scontrol", "write", "batch_script", "{jobid}", "{path}"), submit="sbatch",
    restart_var="SLURM_RESTART_COUNT", running=("RUNNING", "COMPLETING"), cancelled=("CANCELLED",),
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
