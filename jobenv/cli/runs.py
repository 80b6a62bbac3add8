"""`jobenv runs [list|show RUN|prune]` and `jobenv report RUN... --html FILE`: the launch history
(jobenv.history.runs) on the terminal and as one self-contained page (jobenv.history.html)."""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, Tuple

import click

from jobenv.cli.common import warn, write_out
from jobenv.core.params import Count
from jobenv.core.numparse import plural
from jobenv.history.runs import Run


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _secs(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.1f} s"


def as_dict(r: Run) -> Dict[str, Any]:
    return {"run": r.ident, "job": r.job, "scheduler": r.scheduler, "started": r.started, "attempt": r.attempt,
            "command": r.command, "hosts": r.hosts, "nhosts": r.nhosts, "nranks": r.nranks,
            "launcher": r.launcher, "outcome": r.outcome, "cause": r.cause, "exit": r.exit, "signal": r.signal,
            "duration": r.duration, "first_failure": r.first, "state": r.state, "path": r.path}


@click.group("runs", invoke_without_command=True)
@click.pass_context
def runs_cmd(ctx: click.Context) -> None:
    """Every `jobenv launch` attempt: list, show one, prune.

    \b
    Kept: the newest JOBENV_RUNS_KEEP runs (200) of all jobs, none older than
    JOBENV_RUNS_DAYS days (30); every launch prunes.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(list_runs)


@runs_cmd.command("list")
@click.option("--job", "-j", metavar="ID", help="Only this job's runs (its id or store key).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_runs(job: Optional[str], as_json: bool) -> None:
    """Every launch attempt of every job, newest first."""
    from jobenv.core.output import print_table
    from jobenv.history.runs import scan

    runs = scan(os.environ, job, warn=warn)
    if as_json:
        write_out(json.dumps([as_dict(r) for r in runs], indent=2) + "\n")
        return
    from jobenv.restore.shell import join

    print_table([[r.ident, _when(r.started), str(r.attempt), str(r.nranks or ""), str(r.nhosts or ""), r.state,
                  _secs(r.duration), join(r.command)[:80]] for r in runs],
                ["run", "started", "attempt", "ranks", "hosts", "outcome", "took", "command"])


@runs_cmd.command("show")
@click.argument("run", default="last")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with every rank's phases).")
def show_run(run: str, as_json: bool) -> None:
    """One run (its name, <job key>/<name>, or `last`): summary, start-up phases, timeline."""
    import sys

    from jobenv.core.output import print_table
    from jobenv.history.runs import find
    from jobenv.history.timeline import print_chart, timeline
    from jobenv.restore.shell import join

    r = find(run, os.environ, warn)
    tl = timeline(r)
    if as_json:
        rows = [{"rank": x.rank, "host": x.host, "phases": dict(x.phases)} for x in tl.rows]
        write_out(json.dumps({**as_dict(r), "timeline_source": tl.source, "ranks": rows}, indent=2) + "\n")
        return
    print_table([["run", r.ident], ["job", f"{r.job} ({r.scheduler})" if r.scheduler else r.job],
                 ["command", join(r.command)], ["started", _when(r.started)], ["attempt", str(r.attempt)],
                 ["hosts", f"{r.nhosts}: {r.hosts}" if r.nhosts else ""], ["ranks", str(r.nranks or "")],
                 ["launcher", r.launcher], ["outcome", r.state], ["took", _secs(r.duration)],
                 ["first failure", r.first_failure or "none"], ["directory", r.path]])
    stats = tl.stats()
    if stats:
        print(f"start-up phases (seconds; from {tl.source})")
        print_table(stats, ["phase", "min", "median", "max", "slowest rank", "on host"])
        if sys.stdout.isatty():
            print_chart(tl)


@runs_cmd.command("prune")
@click.option("--keep", type=Count(0, 10**6), metavar="N", help="Keep the newest N runs (default: JOBENV_RUNS_KEEP, 200).")
@click.option("--days", type=Count(0, 36500), metavar="D", help="Remove runs older than D days (default: JOBENV_RUNS_DAYS, 30).")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
def prune_runs(keep: Optional[int], days: Optional[int], dry_run: bool) -> None:
    """Remove old runs now (launch does it after every attempt)."""
    from jobenv.history.runs import prune

    gone = prune(os.environ, keep, None if days is None else float(days), dry_run, warn)
    for r in gone:
        click.echo(f"{'would remove' if dry_run else 'removed'} {r.ident}")
    click.echo(f"{plural(len(gone), 'run')} {'to remove' if dry_run else 'removed'}")


@click.command("report")
@click.argument("run", nargs=-1)
@click.option("--html", "html_file", metavar="FILE", required=True, type=click.Path(dir_okay=False),
              help="Write the page to FILE ('-': standard output).")
@click.option("--same-scale", is_flag=True, help="Draw every run's timeline on one time scale, to compare them.")
def report_cmd(run: Tuple[str, ...], html_file: str, same_scale: bool) -> None:
    """Write one self-contained HTML page of runs' start-up: jobenv report --html FILE [RUN]...

    Each RUN's per-rank start-up timeline (failed and interrupted runs marked) and, over
    several runs, start-up time against world size.  RUN: a name from `jobenv runs`, `last`
    (the default), or `all`."""
    from jobenv.history.runs import pick, scan
    from jobenv.history.html import page

    chosen: List[Run] = []
    everything = scan(os.environ, warn=warn)  # one listing (and one warning per skipped entry) for every RUN
    for ident in run or ("last",):
        chosen += everything if ident == "all" else [pick(everything, ident, os.environ)]
    html = page(chosen, same_scale=same_scale)
    if html_file == "-":
        write_out(html)
        return
    from jobenv.core.atomic import write_output
    from jobenv.store.paths import write_error

    try:
        to_stdout = write_output(os.path.abspath(html_file), html.encode("utf-8"))
    except OSError as exc:
        raise write_error(exc, f"the report {html_file}", "name a file in a directory of yours") from None
    if not to_stdout:  # the page is standard output: nothing may follow it there
        click.echo(f"wrote {html_file} ({plural(len(chosen), 'run')})")
