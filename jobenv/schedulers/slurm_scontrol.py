"""Slurm read from outside a job: `scontrol show job [-d]` text.

Two commands read it: `save --job ID` (the job as a Capture, from a login node) and a
pre-empted launch's requeue (the facts a resubmission passes on to sbatch).  Its records,
GRES and TRES forms are a parser of their own, apart from slurm.py's reading of the job's
environment variables and squeue; slurm.py builds its Outside and Requeue descriptors
from the two parsers here.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput, visible
from jobenv.core.numparse import MAX_PER_HOST, is_uint
from .base import Capture, JobFacts

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Tuple

NAME = "slurm"  # the scheduler's name (slurm.py takes it from here: this file loads first)


def expand_nodes(text: str) -> List[str]:
    """A Slurm nodelist's hosts; a bad one is named as Slurm's."""
    from jobenv.core.hostlist import HostlistError, expand

    try:
        return expand(text)
    except HostlistError as exc:
        raise HostlistError(f"Slurm nodelist: {exc}") from None


# How `scontrol show job [-d]` prints a record (Slurm's src/api/job_info.c, 20.11-22.05, and
# src/scontrol/info_job.c since): a first line `JobId=N [ArrayJobId=.. ArrayTaskId=..
# [ArrayTaskThrottle=..] | HetJobId=.. HetJobOffset=..] JobName=<name>` whose name runs to the
# end of the line; then one field per line for these keys (free text: spaces, `=`), the value
# being the rest of the line; then lines of space-separated `Key=Value` words; with -d, the
# per-node `Nodes=... CPU_IDs=... GRES=...` lines that follow JOB_GRES.
FIRST_LINE = ("JobId", "ArrayJobId", "ArrayTaskId", "ArrayTaskThrottle", "HetJobId", "HetJobOffset", "JobName")
WHOLE_LINE = frozenset((
    "SLUID", "HetJobIdSet", "AccrueTime", "ResizeTime", "TRES", "ReqTRES", "AllocTRES", "JOB_GRES",
    "ClusterFeatures", "Prefer", "Reservation", "Command", "SubmitLine", "WorkDir", "AdminComment",
    "SystemComment", "Comment", "Extra", "StdErr", "StdIn", "StdOut", "BurstBuffer", "BurstBufferState",
    "CpusPerTres", "MemPerTres", "TresBind", "TresFreq", "TresPerJob", "TresPerNode", "TresPerSocket",
    "TresPerTask", "NtasksPerTRES", "SELinuxContext", "ResvPorts", "Power", "OOMKillStep", "Container"))
# Lines Slurm prints between the first line and UserId=: anything else there came from a name
# holding a newline.
_BEFORE_USER = ("SLUID", "HetJobIdSet")


class Ambiguous(BadInput):
    """`scontrol show job` text that Slurm cannot have printed for the jobs it names: a key
    twice in one record, a field where none belongs, a record about another job.  A job name
    (or comment) holding a newline and `Key=Value` words forges fields that way, so no field
    of such an answer is trusted."""


def _is_key(key: str) -> bool:
    return bool(key) and key.replace("/", "").replace(":", "").replace("_", "").isalnum()


def _first_line(line: str) -> Dict[str, str]:
    head, eq, name = line.partition(" JobName=")
    words = head.split(" ")
    fields = dict(w.split("=", 1) for w in words if "=" in w)
    if not eq or "JobId" not in fields or len(fields) != len(words) or not all(k in FIRST_LINE[:-1] for k in fields):
        raise Ambiguous(f"a record begins {visible(line[:60])!r}, not `JobId=N ... JobName=`")
    fields["JobName"] = name
    return fields


def _record(lines: List[str]) -> Tuple[Dict[str, str], List[Tuple[str, str]]]:
    """One record's fields (each key once) and per-node detail lines (nodes, gres)."""
    fields = _first_line(lines[0])
    details: List[Tuple[str, str]] = []
    prev = "JobName"
    for line in lines[1:]:
        text = line.lstrip(" ")
        key, eq, rest = text.partition("=")
        if key == "Nodes" and prev in ("JOB_GRES", "Nodes"):
            kv = dict(w.split("=", 1) for w in text.split() if "=" in w)
            details.append((kv.get("Nodes", ""), kv.get("GRES", "")))
            prev = key
            continue
        if eq and key in WHOLE_LINE:
            pairs = [(key, rest)]
        else:
            pairs, last = [], ""
            for w in text.split():
                k, e, v = w.partition("=")
                if e and _is_key(k):
                    pairs.append((k, v))
                    last = k
                elif last:
                    pairs[-1] = (last, pairs[-1][1] + " " + w)
        for k, v in pairs:
            if k in fields or k in FIRST_LINE or k == "Nodes":
                raise Ambiguous(f"{k}= is printed twice or out of place, as a job name or comment holding a "
                                "newline makes it")
            if "UserId" not in fields and k not in _BEFORE_USER and k != "UserId":
                raise Ambiguous(f"{k}= comes before UserId=, where only the job's name can have put it")
            fields[k] = v
        prev = pairs[0][0] if pairs else prev
    return fields, details


def records(text: str) -> List[Tuple[Dict[str, str], List[Tuple[str, str]]]]:
    """`scontrol show job [-d]` text as records (one per job, array task or het component,
    blank-line separated), each its `Key=Value` fields and per-node detail lines as (nodes,
    gres); none for text that is no job's description (an error); scontrol's own messages
    (`scontrol: ...` lines, which no record holds whole) are no record.  Lines are split at
    newlines only (what scontrol ends them with).  Ambiguous when the text is not what Slurm
    prints (see the layout above)."""
    out: List[Tuple[Dict[str, str], List[Tuple[str, str]]]] = []
    lines: List[str] = []
    if not text.lstrip().startswith("JobId="):  # `slurm_load_jobs error: Invalid job id specified`
        return out
    for line in text.split("\n") + [""]:
        if line.strip(" "):
            lines.append(line)
        elif lines:
            if not all(ln.startswith("scontrol: ") for ln in lines):  # its own messages (stderr, after stdout)
                out.append(_record(lines))
            lines = []
    return out


def job_records(text: str, jobid: Optional[str] = None) -> List[Tuple[Dict[str, str], List[Tuple[str, str]]]]:
    """The records of an answer to `scontrol show job [-d] ID` (ID: `jobid`, else the first
    record's), checked as one answer: each JobId once; every record the job's own, or one of
    its het components or array tasks as its first line says; one UserId in all.  A newline
    in a name can start a record of its own: it then fails one of these."""
    recs = records(text)
    if not recs:
        return []
    ids = [f["JobId"] for f, _ in recs]
    if len(set(ids)) != len(ids):
        raise Ambiguous("one JobId is described twice")
    if len({f.get("UserId") for f, _ in recs}) != 1:
        raise Ambiguous("its records name different owners (UserId)")
    own = [f for f, _ in recs if f["JobId"] == (jobid or ids[0])]
    if not own:
        return recs
    kin = [(key, own[0][key]) for key in ("HetJobId", "ArrayJobId") if key in own[0]]
    for f, _ in recs:
        if f is not own[0] and not any(f.get(key) == val for key, val in kin):
            raise Ambiguous(f"it describes job {visible(f['JobId'])[:20]}, which is neither job "
                            f"{visible(own[0]['JobId'])[:20]} nor one of its components or array tasks")
    return recs


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
    (HetJobId=ID): its hosts are their union.  BadInput when the text holds no such job,
    Ambiguous (a BadInput) when it is not what Slurm prints (job_records)."""
    try:
        recs = [(f, d) for f, d in job_records(text, jobid) if jobid in (f.get("JobId"), f.get("HetJobId"))]
    except Ambiguous as exc:
        raise Ambiguous(f"scontrol's answer about job {jobid} is ambiguous: {exc}; jobenv trusts none of it") from None
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
    """The facts of `scontrol show job ID`.  Command= (the path the script was submitted
    from) is not among them: whatever is at that path now may not be what ran (batch_script
    is).  Slurm prints the script's arguments there too, joined with spaces (`sbatch job.sh
    'a b' c`: `Command=/dir/job.sh a b c`, Slurm 22.05 on tests/cluster): a Command= holding
    a space may have had arguments that cannot be told apart, so no flags then, and `why`
    says so.  An answer that is not what Slurm prints (job_records) gives no facts: no flag
    read from it is passed on, and `why` says so."""
    try:
        recs = job_records(out)
    except Ambiguous as exc:
        return JobFacts(why=f"scontrol's description of the job is ambiguous: {exc}; jobenv passes on no "
                            "flag read from it")
    fields: Dict[str, str] = recs[0][0] if recs else {}
    flags = [f"{flag}={fields[key]}" for key, flag in _RESUBMIT_FLAGS if fields.get(key, "") not in _NOTHING]
    per_node = fields.get("NtasksPerN:B:S:C", "").split(":")[0]
    if per_node.isdigit() and per_node != "0":
        flags.append(f"--ntasks-per-node={per_node}")
    flags += ["--requeue" if fields.get("Requeue") == "1" else "--no-requeue", "--open-mode=append"]
    restarts = fields.get("Restarts", "")
    command = fields.get("Command", "")
    why = "" if " " not in command else (
        f"its Command= ({command[:200]!r}) holds a space: the script had arguments (or a path with a space), which "
        "Slurm joins with spaces, so jobenv cannot pass them on exactly")
    return JobFacts(state=fields.get("JobState", ""), workdir=fields.get("WorkDir", ""),
                    submit=() if why else tuple(flags), why=why,
                    requeueable={"1": True, "0": False}.get(fields.get("Requeue", "")),
                    restarts=int(restarts) if restarts.isdigit() else None)


MAX_SCRIPT = 64 << 20  # Slurm's max_script_size is 4 MiB by default, at most 512 MiB


def batch_script(jobid: str, env: Mapping[str, str]) -> Tuple[Optional[bytes], str]:
    """The batch script slurmctld keeps for the job (`scontrol write batch_script ID -`): the
    one it copied at submission, whatever the file it came from holds now."""
    from .base import on_path, run_output

    if not on_path("scontrol", env.get("PATH")):
        return None, "scontrol is not on PATH here"
    rc, out, said = run_output(["scontrol", "write", "batch_script", jobid, "-"], env, 30.0, MAX_SCRIPT)
    if rc != 0 or not out:
        return None, f"`scontrol write batch_script {jobid} -` failed ({said or f'exit {rc}, no script'})"
    return out, ""
