"""PBS Pro (ALCF Polaris, Aurora, Sunspot; many university sites).

The nodefile has one line per MPI slot (`mpiprocs`), possibly uneven between chunks, and
names hosts by FQDN.  Slurm's PBS-compatibility plugin sets PBS_JOBID but never
PBS_NODEFILE, so both are required to call a job PBS.  `qstat -f -F json` is read by
pbs_qstat alone (liveness, `save --job`, `status`, requeue); a requeue's facts and the
script a resubmission runs come from pbs_requeue.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput
from jobenv.core.numparse import MAX_PER_HOST, is_uint
from . import pbs_qstat, pbs_requeue
from .base import Batch, Capture, Outside, Requeue, Scheduler, run_parsed
from .parse import parse_nodefile, pick_env, read_text, table_rows

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

    from .base import Reader

NAME = "pbs"
PREFIXES = ("PBS_",)
# Per-task variables and the job's cookie: meaningless (or secret) in another shell.
DROP = ("PBS_JOBCOOKIE", "PBS_TASKNUM", "PBS_NODENUM", "PBS_MOMPORT")


def capture(env: Mapping[str, str], read: Reader = read_text) -> Capture:
    import os

    # Absolute, so a watcher or a restored shell in another directory finds the same file.
    path = os.path.abspath(env["PBS_NODEFILE"])
    hosts, slots = parse_nodefile(read(path), path)
    picked = pick_env(env, PREFIXES, DROP)
    picked["PBS_NODEFILE"] = path
    return Capture(
        scheduler=NAME, jobid=env["PBS_JOBID"], jobname=env.get("PBS_JOBNAME"), hosts=hosts,
        slots=slots, env=picked, nodefile=path,
    )


_PBS_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-[]")
_ENDED = {"F": "finished", "X": "expired (array subjob)", "E": "exiting"}


def _verdict(state: str) -> Tuple[str, str]:
    if state in _ENDED:
        return "ended", f"qstat says job_state {state} ({_ENDED[state]})"
    return "live", f"qstat says job_state {state}"


def _unknown_ids(out: str) -> Set[str]:
    """Ids that qstat reports as unknown: `qstat: Unknown Job Id 123.server`."""
    marker = "Unknown Job Id "
    return {line.split(marker, 1)[1].strip() for line in out.splitlines() if marker in line}


def parse_json(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `qstat -x -f -F json ID...` (PBS Pro >= 18), read by pbs_qstat.jobs (the
    one reader of that document: a job whose answer is ambiguous gives no verdict)."""
    states = {qid: attrs["job_state"] for qid, attrs in pbs_qstat.jobs(out).items()
              if isinstance(attrs.get("job_state"), str) and pbs_qstat.AMBIGUOUS not in attrs}
    return _collect(states, out, rc, jobids)


def parse_full_text(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `qstat -x -f ID...` text: `Job Id: ID` blocks with `job_state = R`."""
    states: Dict[str, str] = {}
    current = None
    for line in out.splitlines():
        s = line.strip()
        if line.startswith("Job Id:"):
            current = line.split(":", 1)[1].strip()
        elif current and s.startswith("job_state = "):
            states[current] = s.split("=", 1)[1].strip()
    return _collect(states, out, rc, jobids)


def parse_table(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from plain `qstat [-x] ID...`: a header, a dashed line, then
    `Job id  Name  User  Time Use  S  Queue` rows (the state is the fifth column)."""
    states = {cols[0]: cols[-2] for cols in table_rows(out, "---", 6)}
    return _collect(states, out, rc, jobids)


def _collect(states: Dict[str, str], out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    verdicts: Dict[str, Tuple[str, str]] = {}
    for qid, state in states.items():
        for j in pbs_qstat.match(list(jobids), qid):
            verdicts[j] = _verdict(state)
    for qid in _unknown_ids(out):
        for j in pbs_qstat.match(list(jobids), qid):
            verdicts.setdefault(j, ("ended", "qstat does not know the job (finished and purged)"))
    return verdicts


def _query_safe(jobid: str) -> bool:
    """Only ids shaped like this scheduler's go on its command line (never an option)."""
    return 0 < len(jobid) <= 255 and jobid[0] in "0123456789" and set(jobid) <= _PBS_ID_CHARS


def parse_qstat(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `qstat -x -f -F json`, or from its text form where a PBS without
    `-F json` answered with usage text."""
    return (parse_json if "{" in out else parse_full_text)(out, rc, jobids)


def query(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
          timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One `qstat -x -f -F json` for all `jobids`; jobs it does not answer for are left out."""
    jobids = [j for j in jobids if _query_safe(j)]
    return run_parsed(["qstat", "-x", "-f", "-F", "json", *jobids], jobids, parse_qstat, env, timeout)


def _owner(attrs: Dict[str, Any]) -> Tuple[str, str]:
    """(the job's user, where it was read): `euser` where qstat shows it (to PBS managers
    only), else the user of `Job_Owner` (`alice@login1`), which every user sees."""
    if pbs_qstat.text(attrs, "euser"):
        return pbs_qstat.text(attrs, "euser"), "qstat euser"
    return pbs_qstat.text(attrs, "Job_Owner").partition("@")[0], "qstat Job_Owner"


def _exec_hosts(exec_host: str) -> List[str]:
    """Hosts of `exec_host` (`x3006c0s13b0n0/0*64+x3006c0s19b0n0/0*64`), first-seen order."""
    from jobenv.core.hostlist import check_host

    hosts = [check_host(part.split("/")[0].strip(), "PBS exec_host entry") for part in exec_host.split("+")]
    return list(dict.fromkeys(hosts))


def _vnode_gpus(exec_vnode: str, hosts: List[str]) -> Optional[int]:
    """GPUs per host from `exec_vnode` (`(x3006c0s13b0n0:ngpus=4:ncpus=64)+(...)`): the
    fewest on any host; None when it names no ngpus."""
    import re

    per: Dict[str, int] = {}
    for m in re.finditer(r"\(([^():]+)((?::[A-Za-z_]+=[^:()]*)*)\)", exec_vnode):
        host = m.group(1).split("[")[0]  # a vnode `host[0]` is on `host`
        g = re.search(r":ngpus=([0-9]{1,6})(?=:|$)", m.group(2))
        if g:
            per[host] = per.get(host, 0) + int(g.group(1))
    return min(min(per.get(h, 0) for h in hosts), MAX_PER_HOST) if per and hosts else None


def parse_job(text: str, jobid: str) -> Capture:
    """The job `jobid` as `qstat -f -F json ID` describes it (PBS Pro >= 18): hosts from
    exec_host, GPUs per host from exec_vnode's ngpus (else Resource_List ngpus / nodect),
    MPI slots from a select with mpiprocs, job_state and the owner (`_owner`)."""
    qid, attrs = pbs_qstat.job(text, jobid)
    if attrs is None:
        raise BadInput(f"qstat's answer does not describe job {jobid}")
    if pbs_qstat.AMBIGUOUS in attrs:
        raise BadInput(f"qstat's answer for job {jobid} is ambiguous: it names {attrs[pbs_qstat.AMBIGUOUS]} twice "
                       "(a value PBS printed unescaped?); jobenv trusts none of it")
    owner, owner_source = _owner(attrs)
    sources = {"state": "qstat job_state", "owner": owner_source}
    exec_host = pbs_qstat.text(attrs, "exec_host")
    hosts = _exec_hosts(exec_host) if exec_host else []
    if hosts:
        sources["hosts"] = "qstat exec_host"
    gpus = _vnode_gpus(pbs_qstat.text(attrs, "exec_vnode"), hosts)
    if gpus is not None:
        sources["gpus_per_host"] = "qstat exec_vnode ngpus"
    elif is_uint(pbs_qstat.text(attrs, "ngpus")) and hosts and int(pbs_qstat.text(attrs, "ngpus")) % len(hosts) == 0:
        gpus = min(int(pbs_qstat.text(attrs, "ngpus")) // len(hosts), MAX_PER_HOST)
        sources["gpus_per_host"] = "qstat Resource_List.ngpus"
    slots = None
    import re

    procs = re.findall(r"mpiprocs=([0-9]{1,6})", pbs_qstat.text(attrs, "select"))
    if len(set(procs)) == 1 and hosts:
        slots = [int(procs[0])] * len(hosts)
        sources["slots"] = "qstat Resource_List.select mpiprocs"
    env = {"PBS_JOBID": qid}
    for key, var in (("Job_Name", "PBS_JOBNAME"), ("queue", "PBS_QUEUE"), ("Account_Name", "PBS_ACCOUNT")):
        if pbs_qstat.text(attrs, key):
            env[var] = pbs_qstat.text(attrs, key)
    return Capture(scheduler=NAME, jobid=qid, jobname=env.get("PBS_JOBNAME"), hosts=hosts, env=env, slots=slots,
                   gpus_hint=gpus, state=pbs_qstat.text(attrs, "job_state"), owner=owner, sources=sources)


def parse_found(text: str, host: str, user: str) -> List[str]:
    """Ids of `user`'s running jobs whose exec_host names `host` (short or FQDN), from
    `qstat -f -F json` of every job."""
    from jobenv.core.hostlist import HostlistError, host_index

    out = []
    for qid, attrs in pbs_qstat.jobs(text).items():
        if _owner(attrs)[0] != user or pbs_qstat.text(attrs, "job_state") != "R":
            continue
        try:
            if host_index(_exec_hosts(pbs_qstat.text(attrs, "exec_host")), host) is not None:
                out.append(qid)
        except HostlistError:
            continue
    return out


OUTSIDE = Outside(show=("qstat", "-f", "-F", "json"), parse=parse_job,
                  find=lambda host, user: ["qstat", "-f", "-F", "json"], found=parse_found,
                  id_ok=lambda j: _query_safe(j), running=("R",), ended=tuple(_ENDED))

REQUEUE = Requeue(
    # -x: a job qdel ended a moment ago is F, not "Job has finished" (rc 35, which says nothing)
    ("qrerun", "{jobid}"), ("qstat", "-x", "-f", "-F", "json", "{jobid}"), pbs_requeue.parse_show, submit="qsub",
    script=pbs_requeue.script, pass_vars=pbs_requeue.pass_vars,
    running=("R",),  # E (exiting): qdel, or the walltime
    # PBS reruns it itself (qrerun, pre-emption by requeue): substates 60-63 (a real server showed E/63, then R/41
    # with run_count + 1 while the old script still ran); qdel or the walltime: R/41-42 while SIGTERM is delivered
    # (the fixture qstat-f-json-just-after-qdel), then E/51 (tests/test_e2e_pbs.py)
    rules=(((), (), pbs_qstat.RERUNNING, "rerunning"), (("TERM",), ("R",), pbs_qstat.RUNNING, "ended")),
    needs="PBS's client commands (qrerun, qsub, qstat) on PATH and pbs.conf (PBS_CONF_FILE) inside the container")

SCHEDULER = Scheduler(
    NAME, jobid_vars=("PBS_JOBID",), prefixes=PREFIXES,
    # Slurm's PBS-compatibility plugin sets PBS_JOBID but never PBS_NODEFILE
    detect_any=("PBS_JOBID",), detect_all=("PBS_NODEFILE",), marks=("PBS_NODEFILE",),
    site_vars=("PBS_SERVER", "PBS_CONF_FILE", "PBS_EXEC", "PBS_HOME", "PBS_DEFAULT", "PBS_SERVER_NAME"),
    query_vars=("PBS_CONF_FILE", "PBS_SERVER"), secrets=("PBS_JOBCOOKIE",),
    # pbs.conf names PBS_EXEC, where qsub/qstat/pbsdsh come from
    program_vars=("PBS_CONF_FILE", "PBS_EXEC", "PBS_HOME"),
    nodefile_var="PBS_NODEFILE", hosts="PBS_NODEFILE: one line per MPI slot, FQDNs, first-seen order",
    priority=20, profile="pbs", capture=capture, query=query, parse=parse_qstat, outside=OUTSIDE, requeue=REQUEUE,
    # qsub prints the id with its server (`2024084.polaris-pbs-01...`); -j oe joins stderr to -o
    batch=Batch("#PBS", output=("-o {output}", "-j oe"), name="-N {jobname}", submit=("qsub", "{script}"),
                jobid=r"^([0-9]+(?:\[[0-9]*\])?(?:\.[A-Za-z0-9.-]+)?)\s*$", cancel=("qdel",), id_ok=_query_safe),
)
