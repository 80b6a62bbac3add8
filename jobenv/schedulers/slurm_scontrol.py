"""Slurm read from outside a job: `scontrol show job [-d]` text.

Two commands read it: `save --job ID` (the job as a Capture, from a login node) and a
pre-empted launch's requeue (the facts a resubmission passes on to sbatch).  Its records,
GRES and TRES forms are a parser of their own, apart from slurm.py's reading of the job's
environment variables and squeue; slurm.py builds its Outside and Requeue descriptors
from the two parsers here.
"""
from __future__ import annotations

from ..errors import BadInput
from ..numparse import MAX_PER_HOST, is_uint
from .base import Capture, JobFacts

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

NAME = "slurm"  # the scheduler's name (slurm.py takes it from here: this file loads first)


def expand_nodes(text: str) -> List[str]:
    """A Slurm nodelist's hosts; a bad one is named as Slurm's."""
    from ..hostlist import HostlistError, expand

    try:
        return expand(text)
    except HostlistError as exc:
        raise HostlistError(f"Slurm nodelist: {exc}") from None


def records(text: str) -> List[Tuple[Dict[str, str], List[Tuple[str, str]]]]:
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
            for h in expand_nodes(nodes):
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
    recs = [(f, d) for f, d in records(text) if jobid in (f.get("JobId"), f.get("HetJobId"))]
    if not recs:
        raise BadInput(f"scontrol's answer does not describe job {jobid}")
    fields, details = recs[0]
    hosts: List[str] = []
    for f, _ in recs:
        nodelist = f.get("NodeList", "")
        if nodelist and nodelist != "(null)":
            hosts.extend(expand_nodes(nodelist))
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
    recs = records(out)  # the one reader of `scontrol show job` text (as `save --job` reads it)
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
