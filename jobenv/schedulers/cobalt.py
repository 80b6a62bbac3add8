"""Cobalt (ALCF ThetaGPU; retired, but still in users' scripts).

An interactive ssh forwards only COBALT_NODEFILE and COBALT_JOBID; COBALT_JOBSIZE counts
processes, not nodes, so hosts come from the nodefile alone, in the scheduler's order.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput
from .base import Batch, Capture, Outside, Scheduler, run_parsed
from .parse import parse_nodefile, pick_env, read_text, table_rows

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

    from .base import Reader

NAME = "cobalt"
PREFIXES = ("COBALT_",)
ENDED = ("exiting", "done", "dep_fail")


def capture(env: Mapping[str, str], read: Reader = read_text) -> Capture:
    import os

    jobid = env.get("COBALT_JOBID", "")
    path = env.get("COBALT_NODEFILE") or (f"/var/tmp/cobalt.{jobid}" if jobid else "")
    if not jobid:
        import re

        m = re.search(r"cobalt\.([0-9]+)$", path)
        if not m:
            raise BadInput("COBALT_JOBID is not set and COBALT_NODEFILE does not name the job")
        jobid = m.group(1)
    path = os.path.abspath(path)
    hosts, _ = parse_nodefile(read(path), path)
    picked = pick_env(env, PREFIXES)
    if "COBALT_NODEFILE" in picked:
        picked["COBALT_NODEFILE"] = path
    return Capture(scheduler=NAME, jobid=jobid, hosts=hosts, env=picked, nodefile=path)


def parse_qstat(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from Cobalt's `qstat ID...`: a `JobID User WallTime Nodes State Location`
    header, a line of `=`, then one row per job it still knows.  Cobalt forgets a job as
    soon as it ends, so a job missing from a successful answer has ended."""
    rows = {cols[0]: cols[4] for cols in table_rows(out, "===", 5)}
    verdicts: Dict[str, Tuple[str, str]] = {}
    for j in jobids:
        if j in rows:
            state = rows[j]
            if state in ENDED:
                verdicts[j] = ("ended", f"qstat says {state}")
            else:
                verdicts[j] = ("live", f"qstat says {state}")
        elif rc == 0:
            verdicts[j] = ("ended", "qstat does not list the job")
    return verdicts


def _query_safe(jobid: str) -> bool:
    """Only ids shaped like this scheduler's go on its command line (never an option)."""
    return 0 < len(jobid) <= 20 and set(jobid) <= set("0123456789")


def query(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
          timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One `qstat` for all `jobids`; jobs it does not answer for are left out."""
    jobids = [j for j in jobids if _query_safe(j)]
    return run_parsed(["qstat", *jobids], jobids, parse_qstat, env, timeout)


def _blocks(text: str) -> Dict[str, Dict[str, str]]:
    """{JobID: {field: value}} from `qstat -lf` (Cobalt's vertical format: `JobID: 10446`,
    then one indented `Field : value` line per column)."""
    out: Dict[str, Dict[str, str]] = {}
    current: Optional[Dict[str, str]] = None
    for line in text.splitlines():
        key, sep, val = line.partition(":")
        if not sep:
            continue
        if not line[:1].isspace() and key.strip() == "JobID":
            current = out.setdefault(val.strip(), {})
        elif current is not None and line[:1].isspace():
            current.setdefault(key.strip(), val.strip())
    return out


def _location(text: str) -> List[str]:
    """Hosts of a Location (`thetagpu[01-08]`, `thetagpu13,thetagpu12`, `thetagpu06 thetagpu07`)."""
    from jobenv.core.hostlist import expand

    if text in ("", "None", "N/A"):
        return []
    return list(dict.fromkeys(expand(",".join(text.replace(",", " ").split()))))


def parse_job(text: str, jobid: str) -> Capture:
    """The job `jobid` as `qstat -lf ID` describes it: hosts from Location, its State and
    User.  Cobalt names no GPUs or slots per node."""
    fields = _blocks(text).get(jobid)
    if fields is None:
        raise BadInput(f"qstat's answer does not describe job {jobid}")
    hosts = _location(fields.get("Location", ""))
    env = {"COBALT_JOBID": jobid}
    if hosts:
        env["COBALT_PARTNAME"] = fields["Location"]
    jobname = fields.get("JobName")
    return Capture(scheduler=NAME, jobid=jobid, jobname=jobname if jobname not in (None, "N/A") else None,
                   hosts=hosts, env=env, state=fields.get("State", ""), owner=fields.get("User", ""),
                   sources={"hosts": "qstat -lf Location", "state": "qstat -lf State", "owner": "qstat -lf User"})


def parse_found(text: str, host: str, user: str) -> List[str]:
    """Ids of `user`'s running jobs whose Location names `host`, from `qstat -lf`."""
    from jobenv.core.hostlist import HostlistError, host_index

    out = []
    for jobid, fields in _blocks(text).items():
        if fields.get("User") != user or fields.get("State") != "running" or not _query_safe(jobid):
            continue
        try:
            if host_index(_location(fields.get("Location", "")), host) is not None:
                out.append(jobid)
        except HostlistError:
            continue
    return out


OUTSIDE = Outside(show=("qstat", "-lf"), parse=parse_job, find=lambda host, user: ["qstat", "-lf"],
                  found=parse_found, id_ok=lambda j: _query_safe(j), running=("running",), ended=ENDED)


SCHEDULER = Scheduler(
    NAME, jobid_vars=("COBALT_JOBID",), prefixes=PREFIXES,
    # an interactive ssh may forward only the nodefile, which names the job (cobalt.<id>)
    detect_any=("COBALT_JOBID", "COBALT_NODEFILE"), site_vars=("COBALT_CONFIG_FILES",),
    program_vars=("COBALT_CONFIG_FILES",),
    nodefile_var="COBALT_NODEFILE", hosts="COBALT_NODEFILE (else /var/tmp/cobalt.<id>): one line per host",
    priority=50, profile="cobalt", capture=capture, query=query, parse=parse_qstat, outside=OUTSIDE,
    # qsub prints the bare id; Cobalt runs the script file itself (it keeps no copy), so
    # the file must be executable and stay where it is
    batch=Batch("#COBALT", output=("-o {output}", "-e {error}"), name="--jobname {jobname}",
                submit=("qsub", "{script}"), jobid=r"^([0-9]+)\s*$", cancel=("qdel",), id_ok=_query_safe,
                executable=True),
)
