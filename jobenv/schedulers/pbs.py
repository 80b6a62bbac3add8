"""PBS Pro (ALCF Polaris, Aurora, Sunspot; many university sites).

The nodefile has one line per MPI slot (`mpiprocs`), possibly uneven between chunks, and
names hosts by FQDN.  Slurm's PBS-compatibility plugin sets PBS_JOBID but never
PBS_NODEFILE, so both are required to call a job PBS.
"""
from __future__ import annotations

from .base import Capture, JobFacts, Requeue, Scheduler, parse_nodefile, pick_env, run_parsed, read_text, table_rows

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple

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


def _match(jobids: Sequence[str], qid: str) -> List[str]:
    """Record ids that a qstat id names: exactly, or by the numeric part (`123` vs
    `123.server.domain`; plain `qstat` cuts long ids to `123.polaris-*`)."""
    base = qid.rstrip("*").split(".")[0]
    return [j for j in jobids if j == qid or j.split(".")[0] == base]


def parse_json(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `qstat -x -f -F json ID...` (PBS Pro >= 18).  PBS writes some values
    without JSON escaping, so when the whole document does not parse, each job's
    `job_state` is read from its own block."""
    states: Dict[str, str] = {}
    try:
        import json

        data = json.JSONDecoder().raw_decode(out, out.index("{"))[0] if "{" in out else {}
        for qid, attrs in (data.get("Jobs") or {}).items():
            if isinstance(attrs, dict) and isinstance(attrs.get("job_state"), str):
                states[qid] = attrs["job_state"]
    except (ValueError, AttributeError):
        import re

        current = None
        for m in re.finditer(r'^\s*"([0-9]+(?:\[[0-9]*\])?(?:\.[^"\n]*)?)"\s*:\s*\{\s*$|"job_state"\s*:\s*"([A-Z])"', out, re.M):
            if m.group(1) is not None:
                current = m.group(1)
            elif current is not None:
                states[current] = m.group(2)
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
        for j in _match(jobids, qid):
            verdicts[j] = _verdict(state)
    for qid in _unknown_ids(out):
        for j in _match(jobids, qid):
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


# qsub(1B) options that take no value: any other option's next word is its value, never the script
_QSUB_BARE = ("-f", "-h", "-I", "-n", "-V", "-X", "-z")


def parse_show(out: str) -> JobFacts:
    """The facts of `qstat -f -F json ID`: `Submit_arguments` (qsub's flags and the script,
    relative to PBS_O_WORKDIR), `Rerunable`, `run_count`, `job_state`."""
    import json
    import shlex

    try:
        jobs = json.JSONDecoder().raw_decode(out, out.index("{"))[0].get("Jobs") or {}
        attrs = next(iter(jobs.values())) if isinstance(jobs, dict) and jobs else {}
    except (ValueError, AttributeError, StopIteration):
        attrs = {}
    if not isinstance(attrs, dict):
        attrs = {}
    found = attrs.get("Variable_List")
    variables: Dict[str, object] = found if isinstance(found, dict) else {}
    try:
        words = tuple(shlex.split(str(attrs.get("Submit_arguments", ""))))
    except ValueError:
        words = ()
    script = words[-1] if words and not words[-1].startswith("-") and \
        (len(words) == 1 or not words[-2].startswith("-") or words[-2] in _QSUB_BARE) else ""
    runs = attrs.get("run_count")
    return JobFacts(state=str(attrs.get("job_state", "")), script=script,
                    workdir=str(variables.get("PBS_O_WORKDIR", "")), submit=words[:-1] if script else (),
                    requeueable={"True": True, "False": False}.get(str(attrs.get("Rerunable", ""))),
                    restarts=runs - 1 if isinstance(runs, int) and runs >= 1 else None,
                    why="" if script else "PBS keeps no copy of a script given on stdin: submit it as a file "
                    "(`qsub job.sh`) and with `-r y` (rerunnable), so that qrerun can bring it back")


REQUEUE = Requeue(
    ("qrerun", "{jobid}"), ("qstat", "-f", "-F", "json", "{jobid}"), parse_show, submit="qsub",
    running=("R",), cancelled=("E",),
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
    priority=20, profile="pbs", capture=capture, query=query, parse=parse_qstat, requeue=REQUEUE,
)
