"""Pre-emption and requeue, decided: which signals to `jobenv launch --requeue` mean "you are
pre-empted", how the ranks are told, and how the job comes back.  Pure: the caller
(jobenv.launch.requeue) runs what is decided here.

The scheduler warns the batch script, not the ranks: Slurm's `--signal=B:USR1@90` (or
`scancel --signal=USR1 --batch`) signals the batch shell, PBS sends SIGTERM and waits its
`kill_delay`.  `jobenv launch --requeue` must be that process (`exec jobenv launch ...` as
the script's last line).  It passes the signal to every rank, waits up to the grace
period for them to checkpoint and end, ends what is left, then requeues the job (the
scheduler file's `Requeue`: `scontrol requeue`, `qrerun`); where that is refused (no
requeue rights, `--no-requeue`, a site that cancels pre-empted jobs) it resubmits, once,
the copy of the job's batch script kept when the launch started (jobenv.launch.keptscript),
never the file at the path it was submitted from.  A SIGTERM that comes with the job no longer running (scancel and
a time limit make a Slurm job COMPLETING at once, qdel a PBS job E) brings nothing back:
someone or something ended it on purpose.  (A pre-emption that cancels with no grace time
looks the same, and is not brought back either.)
"""
from __future__ import annotations

import signal

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Tuple

    from ..schedulers.base import JobFacts, Requeue

SIGNALS = ("USR1", "USR2", "TERM")  # what a scheduler sends ahead of the end
DEFAULT_GRACE_S = 60.0  # below Slurm's usual @90 warning; on PBS give --grace under kill_delay
RESUBMITS_VAR = "JOBENV_RESUBMITS"  # a resubmitted job's count of resubmissions (no scheduler counts them)


class Preempt:
    """What the supervisor needs: the signals that mean pre-emption, the grace, and how to
    tell the ranks (called once, from the supervisor's loop, with the signal)."""

    def __init__(self, signals: Tuple[int, ...], grace: float, deliver: Callable[[int], None]) -> None:
        self.signals, self.grace, self.deliver = signals, grace, deliver


def signal_numbers() -> Tuple[int, ...]:
    return tuple(int(getattr(signal, "SIG" + name)) for name in SIGNALS)


def signal_name(signum: int) -> str:
    """USR1 for 10: the spelling of the agents' `signal:NAME` verb and of scancel --signal."""
    return signal.Signals(signum).name[3:]


def scheduler_restarts(env: Mapping[str, str], restart_var: str, counted: Optional[int] = None) -> int:
    """How often the scheduler ran this job before, plus jobenv's resubmissions of it.  The
    scheduler's own count is in the environment where it puts one (Slurm's
    `SLURM_RESTART_COUNT`, `restart_var`), else `counted`: what its job query said (PBS sets
    no variable; `qstat -f` has `run_count`, see jobenv.launch.requeue.restarts_before).
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


def decide(signame: str, facts: Optional[JobFacts], req: Requeue, jobid: str) -> Optional[str]:
    """None: requeue the job.  Else why it is not brought back.  USR1/USR2 are only ever a
    warning; a SIGTERM is pre-emption only while the job still runs (facts None or no state:
    the scheduler did not say; requeue, its refusal then says)."""
    if signame == "TERM" and facts is not None and facts.state and facts.state not in req.running:
        return (f"job {jobid} is {facts.state}, no longer running: it was cancelled (scancel/qdel send "
                "SIGTERM too) or reached its time limit, so it is not brought back (for a warning "
                "before the limit ask for one: sbatch --signal=B:USR1@90)")
    return None


def fill(argv: Tuple[str, ...], jobid: str) -> List[str]:
    return [w.replace("{jobid}", jobid) for w in argv]


def resubmission(facts: Optional[JobFacts], req: Requeue, kept: str, missing: str = "") -> Tuple[List[str], str, str]:
    """(argv, directory, why not): the kept copy of the batch script (jobenv.launch.keptscript;
    `missing` says why there is none) submitted again with the flags the job was submitted
    with.  Never the file at the path it was submitted from.  Empty argv: `why not` says."""
    if facts is None:
        return [], "", f"`{req.show[0]}` did not describe the job, so its flags are unknown"
    if facts.why:  # nothing trusted to pass on (an ambiguous answer): no guess
        return [], "", facts.why
    if not kept:
        return [], "", f"no copy of its batch script was kept ({missing or 'none could be had'}); jobenv never " \
                       "resubmits the file at the path it was submitted from"
    return [req.submit, *facts.submit, kept], facts.workdir, ""


def resubmit_env(env: Mapping[str, str], prefixes: Tuple[str, ...], keep: FrozenSet[str],
                 restarts: int) -> Dict[str, str]:
    """The submitting environment: ours without the old job's variables (a scheduler's
    site configuration stays), carrying the runs before it (`restarts`, scheduler_restarts)
    and this one to the new job."""
    out = {k: v for k, v in env.items() if not k.startswith(prefixes) or k in keep}
    for k in ("JOBENV_RESTART_COUNT", "JOBENV_MAX_RESTARTS"):
        out.pop(k, None)
    out[RESUBMITS_VAR] = str(restarts + 1)
    return out
