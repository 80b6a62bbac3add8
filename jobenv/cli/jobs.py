"""`jobenv status`, `logs`, `cancel`: a job after `submit` (or any saved job).

One job handle whatever the scheduler: `-j ID` names a job `submit` submitted (its record
in the store) or one `jobenv save` saved; with none, the job this shell lives in, else the
newest submission, else the newest saved job.  Exit codes (README): 0 done; 1 the
scheduler's command failed or is missing (logs: nothing found); 2 bad command line; 3 no
such job; 5 bad input (a job id of the wrong shape); 6 the store or run history of another
user, or writable by others.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

import click

from jobenv.cli.common import warn
from jobenv.core.params import Count
from jobenv.core.errors import BadInput, JobenvError, NoRecord, visible
from jobenv.schedulers.base import Batch


class Handle:
    """A job as status/logs/cancel see it: scheduler, id, the environment to ask in, and
    its submission record when `submit` made it."""

    def __init__(self, scheduler: str, jobid: str, env: Dict[str, str], sub: Optional[Dict[str, Any]]) -> None:
        self.scheduler, self.jobid, self.env, self.sub = scheduler, jobid, env, sub

    @property
    def batch(self) -> Batch:
        """The scheduler's Batch facts; the id checked for that scheduler's shape first."""
        from jobenv.schedulers import descriptor

        batch = descriptor(self.scheduler).batch
        if batch is None:
            raise BadInput(f"job {visible(self.jobid[:80])} is a {self.scheduler} job: no scheduler to ask")
        if not batch.id_ok(self.jobid):
            raise BadInput(f"{visible(self.jobid[:80])!r} is not shaped like a {self.scheduler} job id")
        return batch


def _check_id(job: str) -> str:
    if not job.strip() or len(job) > 255 or not job.isprintable():
        raise BadInput(f"--job {visible(job[:80])!r}: expected a job id (printable, at most 255 characters)")
    return job


def resolve(env: Mapping[str, str], job: Optional[str]) -> Handle:
    """The job `-j` names (a submission, else a saved record), else this shell's job, else
    the newest submission, else the newest saved job."""
    from jobenv import schedulers
    from jobenv.store import liveness
    from jobenv.store import lookup
    from jobenv.store import submissions

    if job is None:
        live = schedulers.env_jobid(env)
        if live:
            sub = submissions.find(env, live[1], warn)
            return Handle(live[0], live[1], dict(env), sub if sub and sub["scheduler"] == live[0] else None)
    sub = submissions.find(env, None if job is None else _check_id(job), warn)
    if sub is not None:
        return Handle(sub["scheduler"], sub["jobid"], dict(env), sub)
    if job is not None:
        _, rec = lookup.find_job(env, job)
    else:
        try:
            _, rec = lookup.which_job(env, None, warn)
        except NoRecord:
            raise NoRecord("no submitted or saved job: `jobenv submit` one, or pass -j ID") from None
    return Handle(rec.scheduler, rec.jobid, liveness.query_env(rec, env), None)


def _status(h: Handle) -> Any:
    """The job's status; only an id of its scheduler's shape reaches a command line (a
    local job has no scheduler to ask: unknown)."""
    from jobenv import schedulers
    from jobenv.batch.jobstate import status

    if h.scheduler in schedulers.ASKS_COMMAND:
        h.batch  # noqa: B018 - the check
    return status(h.scheduler, h.jobid, h.env, h.sub["exit_file"] if h.sub else None)


_JOB = click.option("--job", "-j", metavar="ID", help="Job id (default: this shell's job, else the newest submitted, "
                                                       "else the newest saved).")


@click.command("status")
@_JOB
def status_cmd(job: Optional[str]) -> None:
    """Say whether a job is queued, running or ended, and how it ended."""
    from jobenv.core.output import print_table

    h = resolve(os.environ, job)
    st = _status(h)
    rows = [["job", f"{h.jobid} ({h.scheduler})"], ["state", f"{st.phase} ({st.state})"]]
    if st.exit is not None:
        rows.append(["exit", st.exit])
    rows.append(["from", st.source])
    if h.sub:
        rows += [["script", h.sub["script"]], ["output", h.sub["output"]], ["rank logs", h.sub["log_dir"]]]
    elif st.output:
        rows.append(["output", st.output])
    print_table([[k, visible(v)] for k, v in rows])


@click.command("logs")
@_JOB
@click.option("--rank", type=Count(0), metavar="R", help="Only rank R's log.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing what the newest launch's logs gain until it has ended.")
def logs_cmd(job: Optional[str], rank: Optional[int], follow: bool) -> None:
    """Print a job's batch output and each launch's rank logs, oldest launch first (-f: follow)."""
    from jobenv.batch import logs, runlogs

    h = resolve(os.environ, job)
    st = _status(h)
    found = [runlogs.launches(h.env, h.scheduler, h.jobid)]

    def ended() -> bool:  # the job, and its newest launch; a launch begun since is followed
        ran, found[0] = runlogs.running(found[0]), runlogs.launches(h.env, h.scheduler, h.jobid)
        return _status(h).phase in ("ended", "unknown") and not ran and not runlogs.running(found[0])

    seen = logs.show(lambda: runlogs.items(h.sub, st.output, found[0], rank), ended,
                     follow and (st.phase not in ("ended", "unknown") or runlogs.running(found[0])), warn=warn,
                     later=lambda: runlogs.items(h.sub, st.output, found[0], rank, newest_only=True))
    if not seen:
        what = f"no log of rank {rank}" if rank is not None else "no batch output, rank log or launch"
        raise JobenvError(f"job {visible(h.jobid)}: {what} found ({st.phase})")


@click.command("cancel")
@_JOB
def cancel_cmd(job: Optional[str]) -> None:
    """Cancel a job (scancel, qdel, bkill, flux cancel)."""
    from jobenv.schedulers.base import run_query

    h = resolve(os.environ, job)
    argv = [*h.batch.cancel, h.jobid]
    res = run_query(argv, h.env, 60.0)
    if res is None:
        raise JobenvError(f"{argv[0]} is not on PATH or did not answer within 60 s")
    if res[0] != 0:
        raise JobenvError(f"{' '.join(argv[:-1])} {h.jobid} failed (exit {res[0]}): {res[1].strip()[:300]}")
    click.echo(f"cancelled {h.scheduler} job {visible(h.jobid)}")


COMMANDS = (status_cmd, logs_cmd, cancel_cmd)
