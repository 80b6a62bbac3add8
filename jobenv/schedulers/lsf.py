"""IBM Spectrum LSF with jsrun (LLNL Lassen, Sierra; formerly OLCF Summit).

LSF's job variables (IBM LSF 10.1 "Environment variables set for job execution"): LSB_JOBID,
LSB_JOBNAME, LSB_HOSTS (one word per slot), LSB_MCPU_HOSTS (`host slots host slots ...`,
compact) and LSB_DJOB_HOSTFILE (one line per slot).  On CSM/jsrun machines the job's shell
runs on a launch (batch) node that LSF lists first, with one slot, and that runs no ranks:
`LSB_MCPU_HOSTS="lassen710 1 lassen11 40 lassen12 40"` is two compute hosts (RADICAL-Pilot's
LSF resource manager drops the same entry on Lassen).  So the first entry of a list of more
than one is the launch node, never a host of the job.  LSF_* variables (LSF_ENVDIR,
LSF_BINDIR...) describe the installation: `bjobs` needs LSF_ENVDIR to find lsf.conf.

Liveness: `bjobs -a -noheader -o "jobid stat" ID...` (bjobs -o, -noheader: LSF 10.1 command
reference) prints `ID STAT` per job it knows, recently finished ones included (-a); a
purged job is `Job <ID> is not found`: ended.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput
from .base import Batch, Capture, Scheduler, run_parsed
from .parse import parse_nodefile, pick_env, read_text

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

    from .base import Reader

NAME = "lsf"
PREFIXES = ("LSB_", "LSF_")
# Describe one task or the job script's own run, not the job: wrong in another shell.
DROP = ("LSB_JOBRES_PID", "LSB_JOBFILENAME", "LSB_CHKFILENAME", "LSB_JOBEXIT_STAT", "LSB_JOBPGIDS", "LSB_JOBPIDS")


def mcpu_hosts(text: str) -> Tuple[List[str], List[int]]:
    """Compute hosts and their slots from LSB_MCPU_HOSTS, the launch node dropped."""
    from jobenv.core.hostlist import check_host
    from jobenv.core.numparse import MAX_PER_HOST, check_hosts, parse_uint

    words = text.split()
    if not words or len(words) % 2:
        raise BadInput(f"LSB_MCPU_HOSTS {text[:200]!r}: expected `host slots` pairs")
    pairs = list(zip(words[::2], words[1::2]))
    if len(pairs) > 1:
        pairs = pairs[1:]  # the launch node, which runs no ranks
    check_hosts(len(pairs), "LSB_MCPU_HOSTS")
    slots: Dict[str, int] = {}
    for host, count in pairs:
        check_host(host, "host name in LSB_MCPU_HOSTS")
        slots[host] = slots.get(host, 0) + parse_uint(count, f"LSB_MCPU_HOSTS slots of {host}", MAX_PER_HOST, 1)
    return list(slots), list(slots.values())


def job_hosts(env: Mapping[str, str], read: Reader = read_text) -> Tuple[List[str], List[int]]:
    """LSB_MCPU_HOSTS, else LSB_DJOB_HOSTFILE (its first line is the launch node too)."""
    if env.get("LSB_MCPU_HOSTS", "").strip():
        return mcpu_hosts(env["LSB_MCPU_HOSTS"])
    path = env.get("LSB_DJOB_HOSTFILE", "")
    if not path:
        raise BadInput("LSB_JOBID is set but neither LSB_MCPU_HOSTS nor LSB_DJOB_HOSTFILE: cannot tell the job's hosts")
    hosts, slots = parse_nodefile(read(path), path)
    if len(hosts) > 1 and slots[0] == 1:
        return hosts[1:], slots[1:]
    return hosts, slots


def capture(env: Mapping[str, str], read: Reader = read_text) -> Capture:
    hosts, slots = job_hosts(env, read)
    return Capture(scheduler=NAME, jobid=env["LSB_JOBID"], jobname=env.get("LSB_JOBNAME"), hosts=hosts,
                   slots=slots, env=pick_env(env, PREFIXES, DROP), nodefile=env.get("LSB_DJOB_HOSTFILE") or None)


_ENDED = {"DONE": "finished", "EXIT": "exited", "ZOMBI": "killed while its host was unreachable"}


def parse_bjobs(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `bjobs -a -noheader -o "jobid stat" ID...`: `ID STAT` lines, and
    `Job <ID> is not found` for a job LSF has purged.  UNKWN (mbatchd lost its host) says
    nothing; DONE, EXIT and ZOMBI have ended; PEND, RUN, the suspended states... are live."""
    verdicts: Dict[str, Tuple[str, str]] = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) == 2 and cols[0] in jobids and cols[1].isalpha() and cols[1].isupper() and cols[1] != "UNKWN":
            state = cols[1]
            verdicts[cols[0]] = (("ended", f"bjobs says {state} ({_ENDED[state]})") if state in _ENDED
                                 else ("live", f"bjobs says {state}"))
        elif line.startswith("Job <") and line.rstrip().endswith("> is not found"):
            jobid = line[len("Job <"):line.rindex(">")]
            if jobid in jobids:
                verdicts[jobid] = ("ended", "bjobs does not know the job (finished and purged)")
    return verdicts


def _query_safe(jobid: str) -> bool:
    """Only ids shaped like this scheduler's go on its command line (never an option)."""
    return 0 < len(jobid) <= 20 and jobid.isdigit() and jobid.isascii()


def query(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
          timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One `bjobs` for all `jobids`; jobs it does not answer for are left out."""
    jobids = [j for j in jobids if _query_safe(j)]
    return run_parsed(["bjobs", "-a", "-noheader", "-o", "jobid stat", *jobids], jobids, parse_bjobs, env, timeout)


SCHEDULER = Scheduler(
    NAME, jobid_vars=("LSB_JOBID",), prefixes=PREFIXES, detect_any=("LSB_JOBID",),
    marks=("LSB_MCPU_HOSTS", "LSB_DJOB_HOSTFILE", "LSB_HOSTS"),
    site_vars=("LSF_ENVDIR", "LSF_BINDIR", "LSF_LIBDIR", "LSF_SERVERDIR", "LSF_VERSION"),
    query_vars=("LSF_ENVDIR",), nodefile_var="LSB_DJOB_HOSTFILE",
    # lsf.conf's directory and the directories bjobs/jsrun's daemons and libraries come from
    program_vars=("LSF_ENVDIR", "LSF_BINDIR", "LSF_LIBDIR", "LSF_SERVERDIR"),
    hosts="LSB_MCPU_HOSTS (`host slots` pairs) or LSB_DJOB_HOSTFILE, minus the launch node listed first",
    priority=40, profile="lassen", capture=capture, query=query, parse=parse_bjobs,
    # bsub reads #BSUB lines only from a script on its stdin; `Job <ID> is submitted to queue <Q>.`
    batch=Batch("#BSUB", output=("-o {output}",), name="-J {jobname}", submit=("bsub",), stdin=True,
                jobid=r"Job <([0-9]+)> is submitted", cancel=("bkill",), id_ok=_query_safe),
)
