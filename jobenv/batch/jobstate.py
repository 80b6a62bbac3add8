"""Where a job stands, whatever the scheduler: queued, running or ended (with its exit).

Each scheduler is asked in the order that still knows the job: Slurm's squeue while the job
is in slurmctld's memory, then `scontrol show job` (state, ExitCode, StdOut), then sacct
(gone from memory, kept by accounting where a site has it); PBS's `qstat -x -f -F json`
(-x: finished jobs too); Cobalt's qstat (it forgets a job as soon as it ends); Flux and LSF
through their liveness queries.  When none knows the job, the exit code the submitted
script wrote (jobenv.batch.script) says how it ended.  The parsers are pure functions of
the command's output, tested on recorded outputs (tests/data); every command runs bounded
(schedulers.base.run_query) with an id shaped like that scheduler's (Batch.id_ok).
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from jobenv.core.errors import BadInput
from ..schedulers.base import run_query
from ..schedulers.parse import table_rows

Runner = Callable[[List[str], Optional[Mapping[str, str]], float], Optional[Tuple[int, str]]]
TIMEOUT = 10.0


class JobStatus:
    """phase: queued | running | ended | unknown; state: the scheduler's own word; exit: the
    exit state as the scheduler (or the script) gave it; source: who said so; output: the
    batch output file the scheduler names, when it does."""

    def __init__(self, phase: str, state: str, source: str, exit: Optional[str] = None,
                 output: Optional[str] = None) -> None:
        self.phase, self.state, self.source, self.exit, self.output = phase, state, source, exit, output

    def line(self) -> str:
        ex = f", exit {self.exit}" if self.exit is not None else ""
        return f"{self.phase} ({self.state}{ex}; {self.source})"


# ----------------------------------------------------------------- Slurm
_SLURM_QUEUED = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}


def slurm_phase(state: str) -> str:
    from ..schedulers.slurm import OUTSIDE  # its `ended`: the one list of Slurm's end states

    base = state.split()[0].rstrip("+") if state else ""  # sacct writes `CANCELLED by 0`, `CANCELLED+`
    return "ended" if base in OUTSIDE.ended else "queued" if base in _SLURM_QUEUED else "running"


def parse_squeue(out: str, jobid: str) -> Optional[str]:
    """`squeue -h -t all -o '%i %T' -j ID`: the job's state, None when not listed."""
    for line in out.splitlines():
        cols = line.split()
        if len(cols) == 2 and cols[0] == jobid and cols[1].isupper():
            return cols[1]
    return None


def parse_scontrol(out: str, jobid: str) -> Dict[str, str]:
    """`scontrol show job ID`: the job's fields, read by the reader `save --job` and a
    requeue use (schedulers.slurm_scontrol.job_records); {} when it does not know the job
    (`slurm_load_jobs error: Invalid job id specified`).  Ambiguous (a BadInput) when the
    text is not what Slurm prints: a name holding a newline and `StdOut=` is no output file."""
    from ..schedulers.slurm_scontrol import job_records

    fields = next((f for f, _ in job_records(out, jobid) if f["JobId"] == jobid), {})
    return fields if "JobState" in fields else {}


def parse_sacct(out: str, jobid: str) -> Optional[Tuple[str, str]]:
    """`sacct -X -n -P -j ID -o JobID,State,ExitCode`: (state, exit code) of the job."""
    for line in out.splitlines():
        cols = line.split("|")
        if len(cols) >= 3 and cols[0] == jobid:
            return cols[1], cols[2]
    return None


def slurm(jobid: str, env: Optional[Mapping[str, str]], run: Runner = run_query) -> Optional[JobStatus]:
    res = run(["squeue", "-h", "-t", "all", "-o", "%i %T", "-j", jobid], env, TIMEOUT)
    state = parse_squeue(res[1], jobid) if res else None
    if state and slurm_phase(state) != "ended":
        return JobStatus(slurm_phase(state), state, "squeue")
    res = run(["scontrol", "show", "job", jobid], env, TIMEOUT)
    try:
        fields = parse_scontrol(res[1], jobid) if res and res[0] == 0 else {}
    except BadInput as exc:  # what it says of the job may be forged: not its state, not its output file
        return JobStatus("unknown", "ambiguous", f"scontrol show job: {exc}")
    if fields:
        return JobStatus(slurm_phase(fields["JobState"]), fields["JobState"], "scontrol show job",
                         fields.get("ExitCode"), fields.get("StdOut") or None)
    res = run(["sacct", "-X", "-n", "-P", "-j", jobid, "-o", "JobID,State,ExitCode"], env, TIMEOUT)
    acct = parse_sacct(res[1], jobid) if res and res[0] == 0 else None
    if acct:
        return JobStatus(slurm_phase(acct[0]), acct[0], "sacct", acct[1])
    return None


# ----------------------------------------------------------------- PBS
_PBS_QUEUED = {"Q", "H", "W", "T", "M"}


def parse_pbs(out: str, jobid: str) -> Optional[JobStatus]:
    """`qstat -x -f -F json ID`: job_state, Exit_status and Output_Path (`host:/path`) of
    the job (its id exact, or by its numeric part), read by the PBS scheduler file's one
    reader (schedulers.pbs_qstat): an answer it finds ambiguous says nothing of the job."""
    from ..schedulers import pbs_qstat
    from ..schedulers.pbs import OUTSIDE  # its `ended`: the one list of PBS's end states

    _, attrs = pbs_qstat.job(out, jobid)
    if attrs is None:
        return None
    if pbs_qstat.AMBIGUOUS in attrs:
        return JobStatus("unknown", "ambiguous", f"qstat names {attrs[pbs_qstat.AMBIGUOUS]} twice for the job "
                         "(a value PBS printed unescaped?): jobenv trusts none of its answer")
    state = attrs.get("job_state")
    if not isinstance(state, str):
        return None
    phase = "ended" if state in OUTSIDE.ended else "queued" if state in _PBS_QUEUED else "running"
    code = pbs_qstat.text(attrs, "Exit_status")
    path = pbs_qstat.text(attrs, "Output_Path")
    output = path.split(":", 1)[1] if ":" in path else path or None
    return JobStatus(phase, state, "qstat -x -f -F json", code or None, output)


def pbs(jobid: str, env: Optional[Mapping[str, str]], run: Runner = run_query) -> Optional[JobStatus]:
    res = run(["qstat", "-x", "-f", "-F", "json", jobid], env, TIMEOUT)
    return parse_pbs(res[1], jobid) if res else None


# ----------------------------------------------------------------- Cobalt
_COBALT_ENDED = {"exiting", "done", "dep_fail"}
_COBALT_RUNNING = {"running", "starting"}


def parse_cobalt(out: str, rc: int, jobid: str) -> Optional[JobStatus]:
    """Cobalt's `qstat ID` table (JobID User WallTime Nodes State Location); a job missing
    from a successful answer has ended (Cobalt forgets it at once)."""
    rows = {cols[0]: cols[4] for cols in table_rows(out, "===", 5)}
    if jobid in rows:
        state = rows[jobid]
        phase = "ended" if state in _COBALT_ENDED else "running" if state in _COBALT_RUNNING else "queued"
        return JobStatus(phase, state, "qstat")
    if rc == 0:
        return JobStatus("ended", "gone", "qstat no longer lists it")
    return None


def cobalt(jobid: str, env: Optional[Mapping[str, str]], run: Runner = run_query) -> Optional[JobStatus]:
    res = run(["qstat", jobid], env, TIMEOUT)
    return parse_cobalt(res[1], res[0], jobid) if res else None


def _liveness(name: str) -> Callable[[str, Optional[Mapping[str, str]], Runner], Optional[JobStatus]]:
    """Flux and LSF: their liveness query (live or ended), which is all jobenv parses of them."""
    def ask(jobid: str, env: Optional[Mapping[str, str]], run: Runner = run_query) -> Optional[JobStatus]:
        from ..schedulers import query_states

        verdict = query_states(name, [jobid], env, TIMEOUT).get(jobid)
        if verdict is None:
            return None
        return JobStatus("ended" if verdict[0] == "ended" else "running", verdict[1], name)
    return ask


ASK = {"slurm": slurm, "pbs": pbs, "cobalt": cobalt, "flux": _liveness("flux"), "lsf": _liveness("lsf")}


def exit_file_code(path: Optional[str]) -> Optional[str]:
    """The exit code the submitted script wrote at its end (a small file of ours), if any."""
    if not path:
        return None
    from jobenv.core.readfile import read_bytes

    try:
        text = read_bytes(path, 64).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if re.fullmatch(r"[0-9]{1,3}", text) else None


def status(scheduler: str, jobid: str, env: Optional[Mapping[str, str]], exit_file: Optional[str] = None,
           run: Runner = run_query) -> JobStatus:
    """The scheduler's word on the job, completed by the script's exit code; unknown when
    nobody can tell."""
    ask = ASK.get(scheduler)
    found = ask(jobid, env, run) if ask else None
    code = exit_file_code(exit_file)
    if found is not None:
        if found.phase == "ended" and code is not None:
            found.exit = code if found.exit in (None, "") else f"{found.exit} (launch exit {code})"
        return found
    if code is not None:
        return JobStatus("ended", "finished", "the script's exit file (the scheduler no longer knows it)", code)
    return JobStatus("unknown", "not known", f"no {scheduler} command knows job {jobid}")
