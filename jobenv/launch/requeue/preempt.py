"""Pre-emption and requeue, decided: which signals to `jobenv launch --requeue` mean "you are
pre-empted", how the ranks are told, and how the job comes back.  Pure: the caller
(jobenv.launch.requeue.bring_back) runs what is decided here.

The scheduler warns the batch script, not the ranks: Slurm's `--signal=B:USR1@90` (or
`scancel --signal=USR1 --batch`) signals the batch shell, PBS sends SIGTERM and waits its
`kill_delay`.  `jobenv launch --requeue` must be that process (`exec jobenv launch ...` as
the script's last line).  It passes the signal to every rank, waits up to the grace
period for them to checkpoint and end, ends what is left, then requeues the job (the
scheduler file's `Requeue`: `scontrol requeue`, `qrerun`); where that is refused (no
requeue rights, `--no-requeue`, a site that cancels pre-empted jobs) it resubmits, once,
the copy of the job's batch script kept when the launch started (jobenv.launch.requeue.keptscript),
never the file at the path it was submitted from.  A SIGTERM that comes with the job no longer running (scancel and
a time limit make a Slurm job COMPLETING at once) brings nothing back: someone or something
ended it on purpose.  (A pre-emption that cancels with no grace time looks the same, and is
not brought back either.)  PBS says more (the scheduler file's `rules`): a job it reruns
itself (qrerun, pre-emption by requeue) passes through substates 60-63 and, on a real
server, runs again under the same id, run_count + 1, within a second, while this launch
still ends (hence the run count compared first); a qdel or the walltime leaves it R with
substate 41/42 while the SIGTERM is delivered, then E: on PBS a SIGTERM is never jobenv's
to bring back, only a USR1/USR2 warning (`qsig -s USR1`).
"""
from __future__ import annotations

import signal

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Dict, FrozenSet, List, Mapping, Optional, Tuple

    from jobenv.schedulers.base import JobFacts, Requeue

SIGNALS = ("USR1", "USR2", "TERM")  # what a scheduler sends ahead of the end
DEFAULT_GRACE_S = 60.0  # below Slurm's usual @90 warning; on PBS give --grace under kill_delay
RESUBMITS_VAR = "JOBENV_RESUBMITS"  # a resubmitted job's count of resubmissions (no scheduler counts them)


def signal_numbers() -> Tuple[int, ...]:
    return tuple(int(getattr(signal, "SIG" + name)) for name in SIGNALS)


def signal_name(signum: int) -> str:
    """USR1 for 10: the spelling of the agents' `signal:NAME` verb and of scancel --signal."""
    return signal.Signals(signum).name[3:]


def scheduler_restarts(env: Mapping[str, str], restart_var: str, counted: Optional[int] = None) -> int:
    """How often the scheduler ran this job before, plus jobenv's resubmissions of it.  The
    scheduler's own count is in the environment where it puts one (Slurm's
    `SLURM_RESTART_COUNT`, `restart_var`), else `counted`: what its job query said (PBS sets
    no variable; `qstat -f` has `run_count`, see jobenv.launch.requeue.bring_back.restarts_before).
    JOBENV_RESTART_COUNT adds a launch's own retries to it."""
    total = counted if not restart_var and counted is not None and 0 <= counted < 10**9 else 0
    for name in (restart_var, RESUBMITS_VAR):
        value = env.get(name, "").strip() if name else ""
        if value.isascii() and value.isdigit() and len(value) <= 9:
            total += int(value)
    return total


def route(cancel: str, agent: bool) -> str:
    """How the ranks are told: "agent" (every host's agent signals its programs, the run
    directory's `request`), "step" (Slurm signals every process of the named step: the
    wrappers ignore USR1/USR2 and pass TERM on), "here" (only this host's programs: a
    launcher with ranks elsewhere and no agent cannot reach them)."""
    if agent:
        return "agent"
    return "step" if cancel == "slurm-step" else "here"


# Why a job is not brought back, by the verdict a scheduler's `Requeue.rules` (or `running`) gives.
VERDICTS = {
    "rerun": "job {jobid} was started again by {scheduler} itself (its run count grew from {before} to {now} since "
             "this launch began: qrerun, or pre-emption by requeue), so jobenv neither requeues nor resubmits it",
    "rerunning": "job {jobid} is being rerun by {scheduler} itself ({state}, substate {substate}): it comes back "
                 "with the same id, so jobenv neither requeues nor resubmits it",
    "ended": "job {jobid} is {state}{sub}, no longer running: it was cancelled (scancel/qdel send SIGTERM too) or "
             "reached its time limit, so it is not brought back (for a warning before the limit ask for one: "
             "sbatch --signal=B:USR1@90, qsig -s USR1)",
}


def verdict(signame: str, facts: Optional[JobFacts], req: Requeue, runs_before: Optional[int] = None) -> str:
    """The one decision: "" (requeue the job) or a key of VERDICTS.  A run count grown since
    the launch began (`runs_before`, the scheduler's own count then) first: the scheduler
    already runs the job again (a real PBS starts the rerun within a second of `qrerun`,
    while this launch still ends).  Then the scheduler's rules, then its running states: a
    SIGTERM is pre-emption only while the job still runs.  USR1/USR2 are only ever a
    warning.  No facts, or no state: the scheduler did not say; requeue, its refusal then says."""
    if facts is None or not facts.state:
        return ""
    if runs_before is not None and facts.restarts is not None and facts.restarts > runs_before:
        return "rerun"
    for signals, states, substates, key in req.rules:
        if (not signals or signame in signals) and (not states or facts.state in states) and \
                (not substates or facts.substate in substates):
            return key
    return "ended" if signame == "TERM" and facts.state not in req.running else ""


def decide(signame: str, facts: Optional[JobFacts], req: Requeue, jobid: str, scheduler: str = "",
           runs_before: Optional[int] = None) -> Optional[str]:
    """None: requeue the job.  Else why it is not brought back (verdict, rendered)."""
    key = verdict(signame, facts, req, runs_before)
    if not key or facts is None:
        return None
    sub = "" if facts.substate is None else f" (substate {facts.substate})"
    return VERDICTS[key].format(jobid=jobid, scheduler=scheduler or "the scheduler", state=facts.state,
                                substate=facts.substate, sub=sub, before=(runs_before or 0) + 1,
                                now=(facts.restarts or 0) + 1)


def fill(argv: Tuple[str, ...], jobid: str) -> List[str]:
    return [w.replace("{jobid}", jobid) for w in argv]


def resubmission(facts: Optional[JobFacts], req: Requeue, kept: str, missing: str = "",
                 restarts: int = 0) -> Tuple[List[str], str, str]:
    """(argv, directory, why not): the kept copy of the batch script (jobenv.launch.requeue.keptscript;
    `missing` says why there is none) submitted again with the flags the job was submitted
    with.  Never the file at the path it was submitted from.  Empty argv: `why not` says.
    Where the scheduler's submit passes no environment (`req.pass_vars`: qsub) the flags
    carry RESUBMITS_VAR (`restarts` + 1, as resubmit_env); where they cannot without losing
    the job's own variables, the argv comes with a non-empty `why` (a warning): the new job
    then counts from 0."""
    if facts is None:
        return [], "", f"`{req.show[0]}` did not describe the job, so its flags are unknown"
    if facts.why:  # nothing trusted to pass on (an ambiguous answer): no guess
        return [], "", facts.why
    if not kept:
        return [], "", f"no copy of its batch script was kept ({missing or 'none could be had'}); jobenv never " \
                       "resubmits the file at the path it was submitted from"
    flags, warn = facts.submit, ""
    if req.pass_vars is not None:
        flags, warn = req.pass_vars(facts, {RESUBMITS_VAR: str(restarts + 1)})
    return [req.submit, *flags, kept], facts.workdir, warn


def resubmit_env(env: Mapping[str, str], prefixes: Tuple[str, ...], keep: FrozenSet[str],
                 restarts: int, jobid: str = "") -> Dict[str, str]:
    """The submitting environment: ours without the old job's variables (a scheduler's
    site configuration stays), carrying the runs before it (`restarts`, scheduler_restarts)
    and this one to the new job.  TMPDIR goes too where it is the old job's own scratch
    directory (its last component names `jobid`: PBS's /var/tmp/pbs.<jobid>, removed as the
    job ends, so a real qsub failed "could not create/open tmp file" with it)."""
    out = {k: v for k, v in env.items() if not k.startswith(prefixes) or k in keep}
    for k in ("JOBENV_RESTART_COUNT", "JOBENV_MAX_RESTARTS"):
        out.pop(k, None)
    if jobid and jobid in out.get("TMPDIR", "").rstrip("/").rpartition("/")[2]:
        del out["TMPDIR"]
    out[RESUBMITS_VAR] = str(restarts + 1)
    return out
