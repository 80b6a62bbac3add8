"""The `jobenv` command line: thin click commands that parse, call, and print.

Expected failures are JobenvError: one line on stderr, a documented exit code, no
traceback.  `jobenv get` normally never gets here (see `jobenv.__main__`).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, List, Optional

import click

from jobenv import __version__
from jobenv.cli.common import INTERVAL, fail, job_id, report_saved, warn, write_out
from jobenv.core.params import Count
from jobenv.core.errors import EXIT_USAGE, JobenvError, one_line
from jobenv.core.numparse import MAX_PER_HOST
from jobenv.schedulers import NAMES as SCHEDULERS



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
    if color is not None:  # one rule for every table and bar of this run (jobenv.core.output.styled)
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
    from jobenv.capture.save import Options
    from jobenv.capture.save import save as do_save

    if job is not None and watch_it:
        raise click.UsageError("--watch runs inside the job; it cannot be combined with --job")
    opts = Options(scheduler, profile, gpus_per_host, ranks_per_host, outside=job is not None, job=job or None)
    rec, path = do_save(os.environ, opts, warn)
    if watch_it:
        from jobenv.store import watch as watch_mod

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
    from jobenv.restore.get import get as do_get, tell_on_terminal

    write_out(do_get(os.environ, job, shell_name, allow_stale, warn, python=not no_python,
                     tell=tell_on_terminal))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles(as_json: bool) -> None:
    """List machine profiles (shipped, ~/.config/jobenv/profiles, JOBENV_PROFILES)."""
    from jobenv.profiles import load as prof_mod

    profs = prof_mod.load_all(os.environ)
    if as_json:
        data = [{"name": p.name, "scheduler": p.scheduler, "description": p.description,
                 "gpus_per_host": p.gpus_per_host, "source": p.source} for p in profs.values()]
        write_out(json.dumps(data, indent=2) + "\n")
        return
    from jobenv.core.output import print_table

    print_table([[p.name, p.scheduler, "" if p.gpus_per_host is None else str(p.gpus_per_host),
                  p.description, p.source] for p in sorted(profs.values(), key=lambda p: (p.scheduler, p.name))],
                ["name", "scheduler", "GPUs/host", "description", "file"])


from jobenv.cli import completion, doctor, records as cli_records  # noqa: E402  (commands in their own modules)
from jobenv.cli.init import init_cmd  # noqa: E402

for _cmd in (cli_records.show, cli_records.list_cmd, cli_records.rm, cli_records.clean, cli_records.import_cmd,
             cli_records.watch):
    cli.add_command(_cmd)

cli.add_command(init_cmd)
cli.add_command(doctor.doctor_cmd)
cli.add_command(completion.completion_cmd)


from jobenv.cli.stage import stage as _stage  # noqa: E402  (jobenv stage; heavy imports stay inside it)

cli.add_command(_stage)

# run history and the start-up report (jobenv runs, jobenv report): their own module
from jobenv.cli.runs import report_cmd as _report_cmd  # noqa: E402
from jobenv.cli.runs import runs_cmd as _runs_cmd  # noqa: E402

cli.add_command(_runs_cmd)
cli.add_command(_report_cmd)

from jobenv.cli.launch import COMMANDS as _LAUNCH_COMMANDS, launch  # noqa: E402  (launch, kill, stacks)
from jobenv.cli.submit import COMMANDS as _SUBMIT_COMMANDS, take_launch_flags  # noqa: E402  (submit)
from jobenv.cli.jobs import COMMANDS as _JOB_COMMANDS  # noqa: E402  (status, logs, cancel)

take_launch_flags(launch)  # submit passes launch's own options on in its script
for _cmd in _LAUNCH_COMMANDS + _SUBMIT_COMMANDS + _JOB_COMMANDS:
    cli.add_command(_cmd)


# --remote NAME on the job commands (and `jobenv remote ...`): jobenv.cli.remote
from jobenv.cli import remote as _remote  # noqa: E402

cli.add_command(_remote.remote_cmd)
for _cmd in (*_JOB_COMMANDS, _runs_cmd, *_runs_cmd.commands.values(), doctor.doctor_cmd):
    _remote.attach(_cmd)
_remote.attach(_SUBMIT_COMMANDS[0], [_remote.SYNC], _remote.submit_remote)
_remote.attach(_report_cmd, handler=_remote.report_remote)

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
