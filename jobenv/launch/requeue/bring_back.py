"""`jobenv launch --requeue`, carried out: keep a copy of the job's batch script before the
ranks start (jobenv.launch.requeue.keptscript), tell the ranks (jobenv.launch.requeue.preempt decides how),
and after the launch has ended bring the job back: requeue it, else resubmit that copy once.
Each step says what it did on stderr, before it runs: a requeue ends this very batch
script, so the line after it may never be printed.
"""
from __future__ import annotations

import os

from jobenv.launch.requeue import preempt
from jobenv.launch.watch.requests import has_agent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Mapping, Optional, Tuple

    from jobenv.store.record import JobRecord
    from jobenv.schedulers.base import JobFacts, Requeue

SHOW_TIMEOUT = 20.0
START_TIMEOUT = 5.0  # a launch waits this long at most for the run count
ACT_TIMEOUT = 60.0


def deliver(run_dir: str, cancel: str, env: Mapping[str, str], step: str, signum: int,
            say: Callable[[str], None]) -> None:
    """`signum` to every rank's program, by preempt.route."""
    name = preempt.signal_name(signum)
    how = preempt.route(cancel, has_agent(run_dir))
    if how == "agent":
        from jobenv.launch.watch import requests

        requests.send(run_dir, f"signal:{name}")
    elif how == "step":
        from jobenv.launch.watch.supervise import cancel_step

        cancel_step(cancel, env, step, name)
    else:
        n = signal_programs_here(run_dir, signum)
        if cancel:
            say(f"warning: no host agent in {run_dir}: SIG{name} reached this host's {n} rank(s) only")
    say(f"pre-empted: SIG{name} passed to the ranks ({how})")


def signal_programs_here(run_dir: str, signum: int) -> int:
    """Send `signum` to this host's rank programs: the launch's marked processes whose parent
    is a rank wrapper (never the wrappers, launcher or proxies: USR1 would end them)."""
    from jobenv.rankwrap import script_path
    from jobenv.launch.watch.reaper import marked, marker

    wrapper = os.fsencode(script_path())
    count = 0
    for pid in marked(marker(run_dir)):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                if wrapper not in f.read().split(b"\0"):
                    continue
            os.kill(pid, signum)
            count += 1
        except (OSError, ValueError, IndexError):
            continue
    return count


def restarts_before(rec: JobRecord, env: Mapping[str, str], ask: bool) -> Tuple[int, Optional[int]]:
    """(how often the scheduler ran this job before this run, preempt.scheduler_restarts;
    the scheduler's own count as its job query said, None unless asked).  A scheduler that
    puts no count in the environment (PBS) is asked once, bounded, when `ask` (a `--requeue`
    launch: after its `qrerun` the job's `run_count` is the only word, and the program must
    see attempt 2 as one; bring_back compares it to tell a rerun PBS began itself); other
    launches do not query the server."""
    from jobenv import schedulers
    from jobenv.schedulers.base import on_path, run_query

    req = schedulers.descriptor(rec.scheduler).requeue
    if req is None:
        return preempt.scheduler_restarts(env, ""), None
    counted = None
    if ask and not req.restart_var and on_path(req.show[0], env.get("PATH")):
        shown = run_query(preempt.fill(req.show, rec.jobid), env, START_TIMEOUT)
        counted = req.parse(shown[1]).restarts if shown and shown[0] == 0 else None
    return preempt.scheduler_restarts(env, req.restart_var, counted), counted


def keep_script(rec: JobRecord, env: Mapping[str, str], say: Callable[[str], None]) -> None:
    """At the start of a `--requeue` launch: keep the copy of the batch script that a
    resubmission would run (keptscript.keep), or say now that there will be none."""
    from jobenv import schedulers
    from jobenv.launch.requeue.keptscript import keep

    if schedulers.descriptor(rec.scheduler).requeue is None:  # Flux (v0.88 has no requeue), LSF, Cobalt
        say(f"warning: --requeue: jobenv cannot requeue or resubmit a {rec.scheduler} job: on pre-emption the "
            "ranks get the signal and the grace, then the job ends")
        return
    path, why = keep(rec, env)
    if not path:
        say(f"warning: no copy of job {rec.jobid}'s batch script could be kept ({why}): if the job "
            "cannot be requeued it will not be resubmitted")


def bring_back(rec: JobRecord, env: Mapping[str, str], signum: int, say: Callable[[str], None],
               runs_before: Optional[int] = None) -> None:
    """Requeue the job after its launch ended, else resubmit the kept copy of its batch script
    once.  `runs_before`: the scheduler's own restart count when the launch began
    (restarts_before), to tell a rerun the scheduler began by itself."""
    from jobenv import schedulers
    from jobenv.schedulers.base import on_path, run_query

    desc = schedulers.descriptor(rec.scheduler)
    req, jobid, name = desc.requeue, rec.jobid, preempt.signal_name(signum)
    if req is None:
        say(f"--requeue: jobenv cannot requeue a {rec.scheduler} job; job {jobid} ends here")
        return
    if not on_path(req.argv[0], env.get("PATH")):
        say(f"cannot requeue job {jobid}: {req.argv[0]} is not on PATH here (inside a container?); it needs "
            f"{req.needs}; or run `{' '.join(preempt.fill(req.argv, jobid))}` from outside")
        return
    shown = run_query(preempt.fill(req.show, jobid), env, SHOW_TIMEOUT)
    facts = req.parse(shown[1]) if shown and shown[0] == 0 else None
    why = preempt.decide(name, facts, req, jobid, rec.scheduler, runs_before)
    if why:
        say(why)
        return
    argv = preempt.fill(req.argv, jobid)
    say(f"requeueing job {jobid}: {' '.join(argv)}")
    done = run_query(argv, env, ACT_TIMEOUT)
    if done and done[0] == 0:
        say(f"job {jobid} requeued")
        return
    said = " ".join((done[1] if done else "no answer").split())[:300]
    say(f"`{' '.join(argv)}` failed ({said}); resubmitting job {jobid}'s batch script once")
    _resubmit(rec, req, facts, env, desc.prefixes, say)


def _resubmit(rec: JobRecord, req: Requeue, facts: JobFacts | None, env: Mapping[str, str],
              prefixes: tuple[str, ...], say: Callable[[str], None]) -> None:
    """Submit the kept copy of the batch script (never the file at its submission path)."""
    from jobenv import schedulers
    from jobenv.launch.requeue.keptscript import keep

    jobid = rec.jobid
    kept, missing = keep(rec, env)
    restarts = preempt.scheduler_restarts(env, req.restart_var, facts.restarts if facts else None)
    argv, cwd, why = preempt.resubmission(facts, req, kept, missing, restarts)
    if not argv:
        say(f"cannot resubmit job {jobid}: {why}")
        return
    if why:
        say(f"warning: {why}")
    sub_env = preempt.resubmit_env(env, prefixes, schedulers.SITE_VARS, restarts, jobid)
    say(f"resubmitting: {' '.join(argv)}")
    out = _run_in(argv, sub_env, cwd)
    if out[0] == 0:
        say(f"job {jobid} resubmitted: {' '.join(out[1].split())[:200]}")
    else:
        say(f"resubmission of job {jobid} failed: {' '.join(out[1].split())[:300]}")


def _run_in(argv: List[str], env: Mapping[str, str], cwd: str) -> tuple[int, str]:
    import subprocess

    try:
        p = subprocess.run(argv, env=dict(env), cwd=cwd or None, capture_output=True, text=True,
                           timeout=ACT_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return 127, str(exc)
    return p.returncode, (p.stdout or "") + (p.stderr or "")
