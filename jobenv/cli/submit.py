"""`jobenv submit`: a batch script from a profile and a command, handed to the scheduler
(`status`, `logs` and `cancel`, after it, live in jobs.py).  Exit codes (README): 0 done; 1 the
scheduler's command failed or is missing; 2 bad command line; 5 bad input (a queue or account
of the wrong shape, a profile without `submit`); 6 the store of another user, or writable by others.
"""
from __future__ import annotations

import os
import sys
from typing import Any, List, Mapping, Optional, Tuple

import click

from jobenv.core.params import Count
from jobenv.core.errors import BadInput, JobenvError
from jobenv.core.numparse import MAX_HOSTS, MAX_PER_HOST
from jobenv.schedulers.base import Batch

# where a scheduler is found on a login node: its submit command on PATH, in this order
SUBMITTERS = (("sbatch", "slurm"), ("qsub", "pbs"), ("bsub", "lsf"), ("flux", "flux"))


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
PASSED = ("log_dir", "timeout", "idle_timeout", "retries", "exclude_failed", "gpu_bind", "label", "launcher_args",
          "container", "container_runtime", "binds")


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

    It prints the job id (--dry-run: the script). --log-dir, --timeout, --idle-timeout, --retries,
    --exclude-failed, --gpu-bind, --label, --launcher-args, --container, --container-runtime and
    --bind go to `jobenv launch`.
    """
    from jobenv import __version__
    from jobenv.batch import queues
    from jobenv.store import submissions
    from jobenv.batch import script as sc
    from jobenv.schedulers import descriptor
    from jobenv.store.paths import home

    if (launch_opts.get("container_runtime") or launch_opts.get("binds")) and not launch_opts.get("container"):
        raise click.UsageError(f"{'--container-runtime' if launch_opts.get('container_runtime') else '--bind'} "
                               "needs --container IMAGE")
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


COMMANDS = (submit_cmd,)
