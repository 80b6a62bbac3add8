"""`jobenv submit`, `status`, `logs`, `cancel`: before and after the allocation.

One job handle whatever the scheduler: `-j ID` names a job `submit` submitted (its record
in the store) or one `jobenv save` saved; with none, the job this shell lives in, else the
newest submission, else the newest saved job.  Exit codes (README): 0 done; 1 the
scheduler's command failed or is missing (logs: nothing found); 2 bad command line; 3 no
such job; 5 bad input (a job id, queue or account of the wrong shape, a profile without
`submit`); 6 the store or run history of another user, or writable by others.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Tuple

import click

from jobenv.cli.common import warn
from jobenv.core.params import Count
from jobenv.core.errors import BadInput, JobenvError, NoRecord, visible
from jobenv.core.numparse import MAX_HOSTS, MAX_PER_HOST
from jobenv.schedulers.base import Batch

# where a scheduler is found on a login node: its submit command on PATH, in this order
SUBMITTERS = (("sbatch", "slurm"), ("qsub", "pbs"), ("bsub", "lsf"), ("flux", "flux"))


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
    from jobenv.batch import submissions

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
    from jobenv.batch.jobstate import status

    if h.scheduler != "local":
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


def _scheduler_here(env: Mapping[str, str]) -> str:
    from jobenv.schedulers.base import on_path

    for prog, name in SUBMITTERS:
        if on_path(prog, env.get("PATH", "")):
            return name
    raise BadInput("no scheduler's submit command on PATH (sbatch, qsub, bsub, flux): pass --profile")


def _profile(env: Mapping[str, str], name: Optional[str]) -> Any:
    from jobenv.profiles import load as profiles
    from jobenv.core.hostlist import this_host

    profs = profiles.load_all(env)
    prof = profiles.for_job(profs, "", "", [], env, name) if name else \
        profiles.for_job(profs, _scheduler_here(env), "", [this_host(env)], env)
    if not prof.submit:
        raise BadInput(f"profile {prof.name} declares no `submit` directives (add them to the profile, "
                       "see `jobenv profiles` and the README)")
    return prof


# `jobenv launch` options that submit takes and passes on in the script: the launch
# command's own click options (one definition, one help text; take_launch_flags copies them)
PASSED = ("log_dir", "timeout", "idle_timeout", "retries", "exclude_failed", "gpu_bind", "label", "launcher_args")


def take_launch_flags(launch: click.Command) -> None:
    """Give `submit` the options of `launch` named in PASSED (cli.py calls this once)."""
    import copy

    have = {p.name for p in submit_cmd.params}
    for p in launch.params:
        if p.name in PASSED and p.name not in have:
            submit_cmd.params.insert(len(submit_cmd.params) - 1, copy.copy(p))  # before COMMAND


def _launch_args(opts: Mapping[str, Any], log_dir: str) -> List[str]:
    """The passed launch options as `jobenv launch` arguments (the defaults left out)."""
    args = ["--log-dir", log_dir]
    for p in submit_cmd.params:
        if p.name not in PASSED or p.name == "log_dir" or not isinstance(p, click.Option):
            continue
        val = opts.get(p.name)
        flag = next(o for o in p.opts + p.secondary_opts if o.startswith("--"))
        if p.is_flag:  # (click's default of a flag is not always False: ask the value itself)
            args += [flag] if val is True else []
        elif val is None or val == p.default or val == ():
            continue
        elif p.multiple:
            args += [f"{flag}={v}" for v in val]
        else:
            args += [flag, f"{val:.10g}" if isinstance(val, float) else str(val)]
    return args


@click.command("submit", context_settings={"allow_interspersed_args": False})
@click.option("--profile", metavar="NAME", help="Machine profile (default: by this host's scheduler and site).")
@click.option("--nodes", "-N", type=Count(1, MAX_HOSTS), default=1, show_default=True, help="Nodes to ask for.")
@click.option("--time", "-t", "walltime", default="60", show_default=True, metavar="T",
              help="Walltime: minutes, or H:MM:SS.")
@click.option("--queue", "-q", metavar="Q", help="Queue (PBS, Cobalt, LSF, Flux), partition or QOS as the profile says.")
@click.option("--account", "-A", metavar="A", help="Project to charge.")
@click.option("--ranks-per-host", type=Count(1, MAX_PER_HOST), help="Ranks per host (default: one per GPU).")
@click.option("--dry-run", is_flag=True, help="Print the script; submit nothing.")
@click.option("--script-out", metavar="FILE", type=click.Path(dir_okay=False), help="Also write the script to FILE.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def submit_cmd(profile: Optional[str], nodes: int, walltime: str, queue: Optional[str], account: Optional[str],
               ranks_per_host: Optional[int], dry_run: bool, script_out: Optional[str], command: Tuple[str, ...],
               **launch_opts: Any) -> None:
    """Write a batch script that saves the job and launches COMMAND on every rank; submit it.

    \b
    jobenv submit --nodes 2 --time 30 -A myproj -- python3 train.py
    Prints the job id (--dry-run: the script).  --log-dir, --timeout, --idle-timeout,
    --retries, --exclude-failed, --gpu-bind, --label and --launcher-args go to `jobenv launch`.
    """
    from jobenv import __version__
    from jobenv.batch import queues, submissions
    from jobenv.batch import script as sc
    from jobenv.schedulers import descriptor
    from jobenv.store.paths import home

    env = os.environ
    prof = _profile(env, profile)
    batch = descriptor(prof.scheduler).batch
    if batch is None:
        raise BadInput(f"profile {prof.name}: scheduler {prof.scheduler} takes no batch script")
    seconds = sc.parse_walltime(walltime)
    queue, note = queues.choose(prof.name, prof.submit.get("queues", {}), prof.submit.get("defaults", {}).get("queue"),
                                queue, nodes, seconds)
    if note:
        _say(note)
    vals = sc.values(prof, nodes, seconds, queue, account, ranks_per_host, sc.job_name(command))
    paths = sc.Paths(os.path.join(submissions.batch_dir(env), "DRY-RUN") if dry_run else submissions.new_dir(env))
    log_dir = launch_opts.get("log_dir")
    logs_at = os.path.abspath(log_dir) if log_dir else paths.ranks
    save_args = ["--profile", prof.name] + (["--ranks-per-host", str(ranks_per_host)] if ranks_per_host else [])
    text = sc.render(sc.directives(prof, batch, vals, paths), sc.jobenv_argv(sys.executable, _package_parent()),
                     home(env), os.getcwd(), save_args,
                     _launch_args(launch_opts, logs_at), list(command), paths, __version__, env.get("PATH"))
    mode = 0o700 if batch.executable else 0o600
    if script_out:
        _write_out(os.path.abspath(script_out), text, batch.executable)
    if dry_run:
        click.echo(text, nl=False)
        return
    _write(paths.script, text, mode)
    jobid = _submit(batch, paths.script, text, env)
    import time

    submissions.save(env, {"scheduler": prof.scheduler, "jobid": jobid, "profile": prof.name, "script": paths.script,
                           "output": paths.output, "error": paths.error, "log_dir": logs_at, "exit_file": paths.exit,
                           "submitted_at": time.time(), "command": list(command), "cwd": os.getcwd()})
    click.echo(jobid)
    _say(f"submitted {vals['jobname']} as {prof.scheduler} job {jobid}{' to queue ' + queue if queue else ''}; "
        f"its output goes to {paths.output}, rank logs to {logs_at} (`jobenv logs -j {jobid}`)")


def _say(msg: str) -> None:
    """A line on stderr (stdout holds only the job id, for scripts)."""
    from jobenv.core.errors import one_line

    sys.stderr.write(f"jobenv: {one_line(msg)}\n")


def _package_parent() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # jobenv/cli/submit.py


def _write(path: str, text: str, mode: int) -> None:
    from jobenv.store.files import write_atomic
    from jobenv.store.paths import write_error

    try:
        write_atomic(path, text.encode(), mode=mode)
    except OSError as exc:
        raise write_error(exc, f"the batch script {path}") from None


def _write_out(path: str, text: str, executable: bool) -> None:
    """--script-out: the user's file (its mode as the umask says; a FIFO or /dev/stdout written in place)."""
    from jobenv.core.atomic import write_output
    from jobenv.store.paths import write_error

    try:
        write_output(path, text.encode(), executable)
    except OSError as exc:
        raise write_error(exc, f"the batch script {path}") from None


def _submit(batch: Batch, script: str, text: str, env: Mapping[str, str]) -> str:
    """Run the scheduler's submit command; the job id it printed (checked for its shape)."""
    import subprocess

    from jobenv.schedulers.base import command_path

    argv = [a.format(script=script) for a in batch.submit]
    exe = command_path(argv[0], env.get("PATH", ""))  # never the working directory's
    missing = JobenvError(f"{argv[0]} is not on PATH: submit from a login node of the cluster")
    if exe is None:
        raise missing
    try:
        p = subprocess.run([exe, *argv[1:]], input=text if batch.stdin else None, capture_output=True, text=True,
                           timeout=120, stdin=None if batch.stdin else subprocess.DEVNULL)
    except FileNotFoundError:
        raise missing from None
    except subprocess.TimeoutExpired:
        raise JobenvError(f"{argv[0]} did not answer within 120 s") from None
    said = (p.stdout or "") + (p.stderr or "")
    if p.returncode != 0:
        raise JobenvError(f"{argv[0]} refused the job (exit {p.returncode}): {said.strip()[:300]}")
    jobid = batch.read_jobid(p.stdout or "")
    if jobid is None:
        raise JobenvError(f"{argv[0]} printed no job id jobenv can read: {said.strip()[:300]!r}")
    return jobid


COMMANDS = (submit_cmd, status_cmd, logs_cmd, cancel_cmd)
