"""The `jobenv` command line: thin click commands that parse, call, and print.

Expected failures are JobenvError: one line on stderr, a documented exit code, no
traceback.  `jobenv get` normally never gets here (see `jobenv.__main__`).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import List, Optional

import click

from . import __version__
from .errors import EXIT_ERROR, EXIT_USAGE, JobenvError, one_line, visible

SHELLS = ["bash", "zsh", "fish"]


def warn(msg: str) -> None:
    sys.stderr.write(f"jobenv: warning: {one_line(msg)}\n")


def fail(exc: JobenvError) -> "click.exceptions.Exit":
    sys.stderr.write(f"jobenv: error: {one_line(exc.message)}\n")
    return click.exceptions.Exit(exc.exit_code)


def write_out(text: str) -> None:
    """Write exactly the bytes a record holds (non-UTF-8 values are carried as surrogates)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()


class Group(click.Group):
    """Turns JobenvError (and unreadable stores) into one-line errors."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except JobenvError as exc:
            raise fail(exc) from None
        except OSError as exc:
            sys.stderr.write(f"jobenv: error: {one_line(str(exc))}\n")
            raise click.exceptions.Exit(EXIT_ERROR) from None


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="jobenv")
def cli() -> None:
    """Capture an HPC job's environment once; restore it and launch in any shell.

    \b
    inside the allocation:   jobenv save
    in any other shell:      source <(jobenv get)      (fish: jobenv get | source)
    then:                    launch python3 -m jobenv.selftest
    """


def _summary_rows(rec, path: str) -> List[List[str]]:
    from .hostlist import compress
    from .shell import join

    return [
        ["job", f"{rec.jobid}" + (f" ({rec.jobname})" if rec.jobname else "")],
        ["scheduler", f"{rec.scheduler}, profile {rec.machine}"],
        ["hosts", f"{rec.nhosts}: {compress(rec.hosts)}"],
        ["GPUs", f"{rec.gpus_per_host} per host, {rec.ngpus} in all ({rec.status.get('gpus_from', '')})"],
        ["ranks", f"{rec.ranks_per_host} per host, {rec.nranks} in all"],
        ["saved", f"{saved_time(rec.created_at)} on {rec.created_on}"],
        ["hostfile", str(rec.hostfile)],
        ["launch", join(rec.launch)],
        ["record", path],
    ]


def saved_time(t: float) -> str:
    """A record's saved time (UTC epoch seconds) in this shell's local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(t))


def _interval(ctx, param, value):
    """Seconds for watch intervals: finite, 0.1 to 86400 (click's FloatRange lets NaN by)."""
    from .watch import check_interval

    if value is None:
        return value
    try:
        return check_interval(value)
    except JobenvError as exc:
        raise click.BadParameter(exc.message) from None


def _print_summary(rec, path: str, extra: Optional[List[List[str]]] = None) -> None:
    from .output import print_table

    print_table(_summary_rows(rec, path) + (extra or []))


def _report_saved(rec, path: str, as_json: bool, quiet: bool) -> None:
    """What `save` and `import` print: warnings on stderr, then JSON, a summary, or nothing."""
    for w in rec.warnings:
        warn(w)
    if as_json:
        write_out(rec.to_json())
    elif not quiet:
        _print_summary(rec, path)


@cli.command()
@click.option("--profile", metavar="NAME", help="Machine profile (default: detected; see `jobenv profiles`).")
@click.option("--scheduler", type=click.Choice(["pbs", "slurm", "cobalt", "local"]), help="Force a scheduler instead of detecting it.")
@click.option("--gpus-per-host", type=click.IntRange(min=0), help="GPUs per host (default: JOBENV_GPUS_PER_HOST, gres, masks, profile, probes).")
@click.option("--ranks-per-host", type=click.IntRange(min=1), help="Ranks per host (default: one per GPU, else the scheduler's slots).")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (warnings still go to stderr).")
@click.option("--watch", "watch_it", is_flag=True, help="Also start `jobenv watch` for this job.")
@click.option("--interval", "--watch-interval", "watch_interval", type=float, default=30.0, callback=_interval,
              show_default=True, help="Heartbeat interval of --watch, in seconds, 0.1 to 86400 (as `jobenv watch --interval`).")
def save(profile, scheduler, gpus_per_host, ranks_per_host, as_json, quiet, watch_it, watch_interval) -> None:
    """Capture this allocation into a record (run inside the job)."""
    from .save import Options
    from .save import save as do_save

    rec, path = do_save(os.environ, Options(scheduler, profile, gpus_per_host, ranks_per_host))
    if watch_it:
        from . import watch as watch_mod

        watch_mod.start(path, watch_interval, dict(os.environ))
    _report_saved(rec, path, as_json, quiet)


@cli.command()
@click.option("--job", "-j", metavar="ID", help="Job id (default: this shell's job, else the newest on this host).")
@click.option("--shell", "shell_name", type=click.Choice(["bash", "zsh", "fish", "sh"]),
              help="Shell dialect; sh is POSIX (dash, busybox). Default: the shell running jobenv, else $SHELL.")
@click.option("--allow-stale", is_flag=True, help="Restore a job even if it has ended.")
@click.option("--no-python", is_flag=True, help="Do not re-activate the job's saved Python environment (or staged copy).")
def get(job, shell_name, allow_stale, no_python) -> None:
    """Print shell code restoring the job: source <(jobenv get)."""
    from .get import get as do_get

    write_out(do_get(os.environ, job, shell_name, allow_stale, warn, python=not no_python))


@cli.command()
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
def show(job, as_json) -> None:
    """Show one record."""
    from .liveness import job_state

    path, rec = _pick(job)
    if as_json:
        write_out(rec.to_json())
        return
    state, reason = job_state(rec, os.environ)
    _print_summary(rec, str(path), [["state", f"{state} ({reason})"]] + [["warning", w] for w in rec.warnings])


def _pick(job: Optional[str]):
    """--job ID (exact, file name, or unique short form), else `get`'s choice."""
    if job is not None:
        from .lookup import find

        return find(os.environ, job)
    from .get import choose

    return choose(os.environ, None, warn)


def _list_rows():
    """One row per record, newest saved first, defective ones last; liveness from one
    scheduler query per scheduler."""
    from .liveness import job_states
    from .lookup import entries
    from .record import JobRecord

    good, bad = [], []
    for path, item, sched, jobid in entries(os.environ):
        if isinstance(item, JobRecord):
            good.append((path, item))
        else:
            bad.append({"jobid": jobid, "scheduler": sched, "path": str(path), "state": "corrupt",
                        "kind": item.kind, "reason": item.message})
    good.sort(key=lambda pr: pr[1].created_at, reverse=True)
    verdicts = job_states([r for _, r in good], os.environ)
    rows = []
    for (path, rec), (state, reason) in zip(good, verdicts):
        rows.append({"jobid": rec.jobid, "scheduler": rec.scheduler, "machine": rec.machine,
                     "nhosts": rec.nhosts, "ngpus": rec.ngpus, "created_at": rec.created_at,
                     "state": state, "reason": reason, "path": str(path)})
    return rows + bad


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(as_json) -> None:
    """List saved jobs with their state: live, ended, unknown (or corrupt)."""
    rows = _list_rows()
    if as_json:
        write_out(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        sys.stderr.write("no saved jobs; run `jobenv save` inside your allocation first\n")
        return
    from .output import print_table

    table = [[r["jobid"] or "?", r["scheduler"] or "", "", "", "", "", "corrupt", r["reason"]] if "kind" in r else
             [r["jobid"], r["scheduler"], r["machine"], str(r["nhosts"]), str(r["ngpus"]),
              saved_time(r["created_at"])[:16], r["state"], r["reason"]] for r in rows]
    print_table(table, ["job", "scheduler", "profile", "hosts", "GPUs", "saved", "state", "why"])


@cli.command()
@click.option("--job", "-j", "job_opt", metavar="ID", help="Job id (as for the other commands).")
@click.argument("job", required=False, metavar="[ID]")
def rm(job_opt, job) -> None:
    """Remove one job's record: jobenv rm -j ID (or jobenv rm ID); also a corrupt one, or
    one written by a newer jobenv."""
    from . import store
    from .errors import BadRecord
    from .lookup import find, peek

    if job_opt is not None and job is not None and job_opt != job:
        raise click.UsageError(f"two different jobs given ({job_opt!r} and {job!r})")
    job = job_opt if job_opt is not None else job
    if job is None:
        raise click.UsageError("which job? pass -j ID (`jobenv list` shows them)")
    path, rec = find(os.environ, job, allow_bad=True)
    if isinstance(rec, BadRecord) and rec.kind not in ("corrupt", "future", "gone"):
        raise rec  # unsafe (another user's file, a symlink): not ours to judge or delete
    jobid = peek(path)[1] if isinstance(rec, BadRecord) else rec.jobid
    store.remove(path, os.environ)
    click.echo(f"removed job {visible(jobid or os.path.basename(path))}")


def parse_age(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9]{1,12}(?:\.[0-9]{1,9})?)\s*([smhdw]?)\s*", text)
    if not m:
        raise click.BadParameter(f"{text!r} is not a duration like 7d, 12h, 30m")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[m.group(2)]


@cli.command()
@click.option("--older-than", metavar="AGE", help="Only records saved longer ago than AGE (7d, 12h, 30m).")
@click.option("--corrupt", is_flag=True, help="Also remove corrupt records and those of a newer jobenv.")
@click.option("--dry-run", "-n", is_flag=True, help="Say what would go, remove nothing.")
def clean(older_than, corrupt, dry_run) -> None:
    """Remove records of jobs that have ended."""
    from . import store

    limit = parse_age(older_than) if older_than else None
    removed = 0
    for r in _list_rows():
        bad = r.get("kind") in ("corrupt", "future")
        if not (r["state"] == "ended" or (corrupt and bad)):
            continue
        if limit is not None and (bad or time.time() - r["created_at"] < limit):
            continue  # age is the saved time (`created_at`), which heartbeats never change
        if not dry_run:
            store.remove(r["path"], os.environ)
        what = visible(r["jobid"] or os.path.basename(r["path"]))
        click.echo(f"{'would remove' if dry_run else 'removed'} job {what} ({visible(r['reason'])})")
        removed += 1
    if not removed:
        click.echo("nothing to clean")


@cli.command("import")
@click.argument("env_file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--profile", metavar="NAME", help="Machine profile (default: detected).")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing.")
def import_cmd(env_file, profile, as_json, quiet) -> None:
    """Turn ~/.pbsenv, ~/.cobaltenv or ~/.slurmenv written by other tools into a record."""
    from . import importer
    from .save import Options
    from .save import save as do_save

    parsed = importer.parse(importer.read(env_file), env_file)
    env = importer.import_env(parsed, os.environ)
    rec, path = do_save(env, Options(profile=profile))
    from . import store

    rec = store.update_status(path, {"reason": f"imported from {os.path.abspath(env_file)}"}, env)
    _report_saved(rec, path, as_json, quiet)


@cli.command()
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.option("--interval", type=float, default=30.0, show_default=True, callback=_interval,
              help="Seconds between heartbeats (0.1 to 86400).")
@click.option("--foreground", is_flag=True, help="Run in this process instead of a detached daemon.")
def watch(job, interval, foreground) -> None:
    """Keep the job's record live: heartbeat, and mark it ended when the job ends."""
    from . import watch as watch_mod

    path, rec = _pick(job)
    if foreground:
        raise click.exceptions.Exit(watch_mod.run(path, interval, dict(os.environ)))
    pid = watch_mod.start(path, interval, dict(os.environ))
    if pid is None:
        click.echo(f"already watching job {visible(rec.jobid)} (pid {watch_mod.running(path)})")
    else:
        click.echo(f"watching job {visible(rec.jobid)}: pid {pid}, heartbeat every {interval:g} s")


_SECONDS = click.FloatRange(min=0, min_open=True)


@cli.command(context_settings={"allow_interspersed_args": False})
@click.option("--job", "-j", metavar="ID", help="Job id (default: $JOBENV_JOBID via `launch`, else as for `get`).")
@click.option("--allow-stale", is_flag=True, help="Launch even if the job has ended.")
@click.option("--dry-run", is_flag=True, help="Print the command instead of running it.")
@click.option("-n", "--nranks", type=click.IntRange(min=1), metavar="N", help="Ranks in all (default: hosts x ppn).")
@click.option("--ppn", type=click.IntRange(min=1), metavar="P", help="Ranks per host (default: as saved).")
@click.option("--nhosts", type=click.IntRange(min=1), metavar="K", help="Use the first K hosts (default: enough for -n, else all).")
@click.option("--hosts", metavar="LIST", help="Only these hosts of the job (hostlist: node[1-3],gpu7).")
@click.option("--exclude", metavar="LIST", help="Not these hosts (hostlist).")
@click.option("--launcher-args", metavar="ARGS", multiple=True,
              help="Extra flags for the launcher itself, split like a shell would: --launcher-args='--cpu-bind none'.")
@click.option("--label", is_flag=True, help="Prefix output lines with the rank (the launcher's own flag).")
@click.option("--log-dir", metavar="DIR", type=click.Path(file_okay=False),
              help="Each rank's output to DIR/rank-<R>.log instead of the terminal.")
@click.option("--timeout", type=_SECONDS, metavar="S", help="Kill the whole launch after S seconds.")
@click.option("--idle-timeout", type=_SECONDS, metavar="S", help="Kill it when no rank printed anything for S seconds.")
@click.option("--retries", type=click.IntRange(min=0), default=0, metavar="N", help="Re-launch up to N times after a failure.")
@click.option("--exclude-failed", is_flag=True, help="With --retries: drop the first failed rank's host when the job has a spare.")
@click.option("--gpu-bind", is_flag=True, help="One GPU per local rank, as the profile's gpu_bind maps them.")
@click.option("--no-python", "no_python", is_flag=True, help="Do not re-activate the job's saved Python environment.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def launch(job, allow_stale, dry_run, nranks, ppn, nhosts, hosts, exclude, launcher_args, label, log_dir,
           timeout, idle_timeout, retries, exclude_failed, gpu_bind, no_python, command) -> None:
    """Run COMMAND on every rank of the job: jobenv launch [OPTIONS] -- python3 train.py

    \b
    In a restored shell `launch ARGS` is `jobenv launch -- ARGS`.
    Launcher flags: --launcher-args='...' (added after the launcher's own).
    Exit code: the launcher's; 124 when --timeout/--idle-timeout killed it.
    """
    import shlex

    from .launch import command as cmd
    from .launch.sizing import Request
    from .launch.supervise import Limits

    try:
        extra = [a for text in launcher_args for a in shlex.split(text)]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--launcher-args") from None
    opts = cmd.Options(request=Request(nranks, ppn, nhosts, hosts, exclude), launcher_args=extra, label=label,
                       log_dir=os.path.abspath(log_dir) if log_dir else None,
                       limits=Limits(timeout, idle_timeout), retries=retries, exclude_failed=exclude_failed,
                       gpu_bind=gpu_bind, python=not no_python)
    raise click.exceptions.Exit(cmd.start(job, allow_stale, list(command), opts, os.environ, warn, dry_run))


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles(as_json) -> None:
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


from . import completion, doctor, init  # noqa: E402  (commands in their own modules)

cli.add_command(init.command())
cli.add_command(doctor.doctor_cmd)
cli.add_command(completion.completion_cmd)


from .stage.cli import stage as _stage  # noqa: E402  (jobenv stage; heavy imports stay inside it)

cli.add_command(_stage)
completion.attach(cli)  # job ids and profile names complete in every command: after every add_command


def usage_error_line(exc: click.UsageError) -> str:
    """Click's three-line usage error (Usage / Try / Error) as jobenv's one line with a hint."""
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else "jobenv"
    return f"jobenv: error: {one_line(exc.format_message())} (see `{path} --help`)"


def main(argv: Optional[List[str]] = None) -> int:
    """Run the CLI; every failure is one `jobenv: error:` line and a documented exit code."""
    try:
        rv = cli.main(args=argv, prog_name="jobenv", standalone_mode=False)
    except click.UsageError as exc:
        sys.stderr.write(usage_error_line(exc) + "\n")
        return EXIT_USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        sys.stderr.write("jobenv: error: aborted\n")
        return 130
    except click.ClickException as exc:
        sys.stderr.write(f"jobenv: error: {one_line(exc.format_message())}\n")
        return exc.exit_code
    return rv if isinstance(rv, int) else 0
