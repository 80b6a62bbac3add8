"""The `jobenv` command line: thin click commands that parse, call, and print.

Expected failures are JobenvError: one line on stderr, a documented exit code, no
traceback.  `jobenv get` normally never gets here (see `jobenv.__main__`).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, List, Optional, Tuple

import click

from . import __version__
from .cli_common import INTERVAL, Count, Seconds, fail, job_id, report_saved, warn, write_out
from .errors import EXIT_USAGE, JobenvError, one_line
from .launch.cli_args import LaunchCommand
from .numparse import MAX_HOSTS, MAX_PER_HOST
from .schedulers import NAMES as SCHEDULERS



class Group(click.Group):
    """Turns JobenvError (and unreadable stores) into one-line errors."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (JobenvError, OSError) as exc:
            raise fail(exc) from None


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="jobenv")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default=None,
              help="Colour and bold in tables and progress (default auto: on a terminal, off with NO_COLOR).")
def cli(color: Optional[str]) -> None:
    """Capture an HPC job's environment once; restore it and launch in any shell.

    \b
    inside the allocation:   jobenv save
    in any other shell:      source <(jobenv get)      (fish: jobenv get | source)
    then:                    launch python3 -m jobenv.selftest
    """
    if color is not None:  # one rule for every table and bar of this run (jobenv.output.styled)
        os.environ["JOBENV_COLOR"] = color


@cli.command()
@click.option("--profile", metavar="NAME", help="Machine profile (default: detected; see `jobenv profiles`).")
@click.option("--scheduler", type=click.Choice(list(SCHEDULERS)), help="Force a scheduler instead of detecting it.")
@click.option("--gpus-per-host", type=Count(0, MAX_PER_HOST), help="GPUs per host (default: JOBENV_GPUS_PER_HOST, gres, masks, profile, probes).")
@click.option("--ranks-per-host", type=Count(1, MAX_PER_HOST), help="Ranks per host (default: one per GPU, else the scheduler's slots).")
@click.option("--job", "-j", "job", is_flag=False, flag_value="", default=None, metavar="[ID]",
              help="Capture running job ID from outside it (any shell, e.g. a login node), from the scheduler's "
                   "own view of it; with no ID, your one running job on this host.")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (warnings still go to stderr).")
@click.option("--watch", "watch_it", is_flag=True, help="Also start `jobenv watch` for this job.")
@click.option("--interval", "--watch-interval", "watch_interval", type=INTERVAL, default=30.0,
              show_default=True, help="Heartbeat interval of --watch, in seconds, 0.1 to 86400 (as `jobenv watch --interval`).")
def save(profile: Optional[str], scheduler: Optional[str], gpus_per_host: Optional[int], ranks_per_host: Optional[int],
         job: Optional[str], as_json: bool, quiet: bool, watch_it: bool, watch_interval: float) -> None:
    """Capture this allocation into a record (run inside the job, or from outside with --job)."""
    from .save import Options
    from .save import save as do_save

    if job is not None and watch_it:
        raise click.UsageError("--watch runs inside the job; it cannot be combined with --job")
    opts = Options(scheduler, profile, gpus_per_host, ranks_per_host, outside=job is not None, job=job or None)
    rec, path = do_save(os.environ, opts, warn)
    if watch_it:
        from . import watch as watch_mod

        watch_mod.start(path, watch_interval, dict(os.environ))
    report_saved(rec, path, as_json, quiet)


@cli.command()
@job_id("Job id (default: this shell's job, else the newest on this host).")
@click.option("--shell", "shell_name", type=click.Choice(["bash", "zsh", "fish", "sh"]),
              help="Shell dialect; sh is POSIX (dash, busybox). Default: the shell running jobenv, else $SHELL.")
@click.option("--allow-stale", is_flag=True, help="Restore a job even if it has ended.")
@click.option("--no-python", is_flag=True, help="Do not re-activate the job's saved Python environment (or staged copy).")
def get(job: Optional[str], shell_name: Optional[str], allow_stale: bool, no_python: bool) -> None:
    """Print shell code restoring the job: source <(jobenv get)."""
    from .get import get as do_get, tell_on_terminal

    write_out(do_get(os.environ, job, shell_name, allow_stale, warn, python=not no_python,
                     tell=tell_on_terminal))


_SECONDS = Seconds(above=True)


@cli.command(cls=LaunchCommand, context_settings={"allow_interspersed_args": False})
@click.option("--job", "-j", metavar="ID", help="Job id (default: $JOBENV_JOBID via `launch`, else as for `get`).")
@click.option("--allow-stale", is_flag=True, help="Launch even if the job has ended.")
@click.option("--dry-run", is_flag=True, help="Print the command instead of running it, and the hosts and bindings chosen.")
@click.option("-n", "--nranks", type=Count(1), metavar="N", help="Ranks in all (default: hosts x ppn).")
@click.option("--ppn", type=Count(1, MAX_PER_HOST), metavar="P", help="Ranks per host (default: as saved).")
@click.option("--nhosts", type=Count(1, MAX_HOSTS), metavar="K", help="Use the first K hosts (default: enough for -n, else all).")
@click.option("--nproc-per-node", "--nproc_per_node", "nproc_per_node", metavar="P", help="torchrun's name for --ppn (a number, or auto).")
@click.option("--nnodes", metavar="K", help="torchrun's name for --nhosts (K, or K:K).")
@click.option("--hosts", metavar="LIST", help="Only these hosts of the job (hostlist: node[1-3],gpu7).")
@click.option("--exclude", metavar="LIST", help="Not these hosts (hostlist).")
@click.option("--launcher-args", metavar="ARGS", multiple=True,
              help="Extra flags for the launcher itself, split like a shell would: --launcher-args='--cpu-bind none'.")
@click.option("--label", is_flag=True, help="Prefix output lines with the rank (the launcher's own flag).")
@click.option("--log-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Each rank's output to DIR/rank-<R>.log; the terminal still gets rank 0's (--tee).")
@click.option("--tee", metavar="RANKS", help="With --log-dir: these ranks' output to the terminal too (0,2-3, all, none; default 0).")
@click.option("--timeout", type=_SECONDS, metavar="DUR", help="Kill the whole launch after DUR (30, 90s, 1m, 1h30m).")
@click.option("--idle-timeout", type=_SECONDS, metavar="DUR", help="Kill it when no rank printed anything for DUR.")
@click.option("--retries", type=Count(0, 1000), default=0, metavar="N",
              help="Re-launch up to N times after a failure (each attempt's --log-dir logs are kept: "
                   "DIR/attempt-<n>/; the ranks see JOBENV_RESTART_COUNT).")
@click.option("--spare-nodes", type=Count(0, MAX_HOSTS), default=0, metavar="K",
              help="With --retries: hold K of the job's hosts back; a failed host is retired (bad-host "
                   "ledger, `jobenv show`) and a spare takes its place.")
@click.option("--exclude-failed", is_flag=True,
              help="With --retries: retire a failed host as --spare-nodes does, the job's unused hosts as spares.")
@click.option("--gpu-bind", is_flag=True, help="One GPU per local rank, as the profile's gpu_bind maps them.")
@click.option("--no-python", "no_python", is_flag=True, help="Do not re-activate the job's saved Python environment.")
@click.option("--no-hook", "no_hook", is_flag=True,
              help="Leave jobenv's hook (stack dumps, clean-exit record) off the ranks' PYTHONPATH.")
@click.option("--requeue", is_flag=True,
              help="On SIGUSR1/SIGUSR2/SIGTERM (pre-emption): pass it to every rank, wait --grace, requeue the job "
                   "(else resubmit its batch script once). The batch script must `exec jobenv launch ...`.")
@click.option("--grace", type=Seconds(above=False), metavar="S",
              help="With --requeue: seconds the ranks get to checkpoint and end (default 60).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def launch(job: Optional[str], allow_stale: bool, dry_run: bool, nranks: Optional[int], ppn: Optional[int],
           nhosts: Optional[int], nproc_per_node: Optional[str], nnodes: Optional[str], hosts: Optional[str],
           exclude: Optional[str], launcher_args: Tuple[str, ...], label: bool, log_dir: Optional[str], tee: Optional[str],
           timeout: Optional[float], idle_timeout: Optional[float], retries: int, spare_nodes: int,
           exclude_failed: bool, gpu_bind: bool, no_python: bool, no_hook: bool, requeue: bool,
           grace: Optional[float], command: Tuple[str, ...]) -> None:
    """Run COMMAND on every rank of the job: jobenv launch [OPTIONS] -- python3 train.py

    \b
    In a restored shell `launch ARGS` is `jobenv launch -- ARGS`, and options
    before the program are jobenv's: launch -n 4 python3 train.py.
    Launcher flags: --launcher-args='...' (after the launcher's own; one the
    profile sets is replaced).
    Exit code: the launcher's; 124 when --timeout/--idle-timeout killed it;
    128+N when pre-emption signal N ended it (--requeue); 0 when every
    rank's Python finished cleanly (the hook saw its main end without an exception or a
    non-zero sys.exit) and some then died in interpreter teardown (named as warnings).
    """
    import shlex

    from .fastlaunch import start
    from .launch.cli_args import refuse_conflicts, same, tee_ranks
    from .launch.cli_args import nnodes as parse_nnodes
    from .launch.cli_args import nproc_per_node as parse_nproc
    from .launch import command as cmd
    from .launch.sizing import Request
    from .launch.supervise import Limits

    ppn = same("--ppn", ppn, "--nproc-per-node", parse_nproc(nproc_per_node))
    nhosts = same("--nhosts", nhosts, "--nnodes", parse_nnodes(nnodes))
    refuse_conflicts(nranks, ppn, nhosts, hosts, exclude, retries, exclude_failed, tee=tee, log_dir=log_dir,
                     spare_nodes=spare_nodes)
    if grace is not None and not requeue:
        raise click.UsageError("--grace needs --requeue")
    try:
        extra = [a for text in launcher_args for a in shlex.split(text)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--launcher-args") from None
    opts = cmd.Options(request=Request(nranks, ppn, nhosts, hosts, exclude), launcher_args=extra, label=label,
                       log_dir=os.path.abspath(log_dir) if log_dir else None,
                       limits=Limits(timeout, idle_timeout), retries=retries, exclude_failed=exclude_failed,
                       gpu_bind=gpu_bind, python=not no_python, spares=spare_nodes, tee=tee_ranks(tee or "0"),
                       hook=not no_hook, requeue=requeue, grace=grace)
    raise click.exceptions.Exit(start(job, allow_stale, list(command), opts, os.environ, warn, dry_run))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles(as_json: bool) -> None:
    """List machine profiles (shipped, ~/.config/jobenv/profiles, JOBENV_PROFILES)."""
    from . import profiles as prof_mod

    profs = prof_mod.load_all(os.environ)
    if as_json:
        data = [{"name": p.name, "scheduler": p.scheduler, "description": p.description,
                 "gpus_per_host": p.gpus_per_host, "source": p.source} for p in profs.values()]
        write_out(json.dumps(data, indent=2) + "\n")
        return
    from .output import print_table

    print_table([[p.name, p.scheduler, "" if p.gpus_per_host is None else str(p.gpus_per_host),
                  p.description, p.source] for p in sorted(profs.values(), key=lambda p: (p.scheduler, p.name))],
                ["name", "scheduler", "GPUs/host", "description", "file"])


from . import cli_records, completion, doctor, init  # noqa: E402  (commands in their own modules)

for _cmd in (cli_records.show, cli_records.list_cmd, cli_records.rm, cli_records.clean, cli_records.import_cmd,
             cli_records.watch):
    cli.add_command(_cmd)

cli.add_command(init.command())
cli.add_command(doctor.doctor_cmd)
cli.add_command(completion.completion_cmd)


from .stage.cli import stage as _stage  # noqa: E402  (jobenv stage; heavy imports stay inside it)


# ---- jobenv kill (jobenv.launch.kill)
@cli.command("kill")
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.option("--run", metavar="RUN", help="Which launch: its run directory's name (default: the newest).")
def kill_cmd(job: Optional[str], run: Optional[str]) -> None:
    """End a launch's ranks on every host, and say which ended.

    \b
    Exit code: 0 when every rank found running ended; 1 when some still run.
    """
    from .fastlaunch import kill

    raise click.exceptions.Exit(kill(job, run, os.environ, lambda m: click.echo(f"jobenv: {m}", err=True)))

cli.add_command(_stage)

# run history and the start-up report (jobenv runs, jobenv report): their own module
from .cli_runs import report_cmd as _report_cmd  # noqa: E402
from .cli_runs import runs_cmd as _runs_cmd  # noqa: E402

cli.add_command(_runs_cmd)
cli.add_command(_report_cmd)

from .cli_submit import COMMANDS as _SUBMIT_COMMANDS, take_launch_flags  # noqa: E402  (submit, status, logs, cancel)

take_launch_flags(launch)  # submit passes launch's own options on in its script
for _cmd in _SUBMIT_COMMANDS:
    cli.add_command(_cmd)


@cli.command("stacks")
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.option("--run", "run", metavar="RUN", help="An attempt's run directory, or its name under the job's runs "
              "(default: the newest running attempt).")
@click.option("--log-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="The launch's --log-dir: names the rank silent longest by its log.")
def stacks_cmd(job: Optional[str], run: Optional[str], log_dir: Optional[str]) -> None:
    """Print the Python stacks of a running launch's ranks, identical ones grouped.

    \b
    The same report as `jobenv launch` prints at --timeout and on SIGUSR1; the dumps stay
    in the attempt's run directory (stacks/rank-<R>.<seq>.txt).
    """
    from . import store
    from .launch import liverun, stacks
    from .lookup import which_job

    _, rec = which_job(os.environ, job, warn)
    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), os.environ)
    run_dir = liverun.find(runs, run, os.environ, f"job {rec.jobid}")
    for line in stacks.collect(run_dir, False, log_dir=os.path.abspath(log_dir) if log_dir else None):
        click.echo(line)


completion.attach(cli)  # job ids and profile names complete in every command: after every add_command


def usage_error_line(exc: click.UsageError) -> str:
    """Click's three-line usage error (Usage / Try / Error) as jobenv's one line with a hint."""
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else "jobenv"
    return f"jobenv: error: {one_line(exc.format_message())} (see `{path} --help`)"


def _tell(line: str) -> None:
    """The error line on stderr when there is one: started with fd 2 closed (sys.stderr is
    None) or on a full disk, the exit code is still the documented one, not a traceback's
    1 or the 120 of a failed flush at exit (the unwritten line is dropped with the stream)."""
    err = sys.stderr
    if err is None:
        return
    try:
        err.write(line + "\n")
        err.flush()
    except (OSError, ValueError):
        sys.stderr = None  # nothing left to flush at exit


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI; every failure is one `jobenv: error:` line and a documented exit code."""
    try:
        rv = cli.main(args=argv, prog_name="jobenv", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # bare `jobenv`: the usage, as click prints it
        _tell(exc.format_message().rstrip("\n"))
        return EXIT_USAGE
    except click.UsageError as exc:
        _tell(usage_error_line(exc))
        return EXIT_USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        _tell("jobenv: error: aborted")
        return 130
    except click.ClickException as exc:
        _tell(f"jobenv: error: {one_line(exc.format_message())}")
        return exc.exit_code
    return rv if isinstance(rv, int) else 0
