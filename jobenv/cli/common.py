"""What every `jobenv` command prints the same way: warnings, errors, exact bytes, the summary
of a record.  Shared by the commands of jobenv.cli so the wording lives in one place."""
from __future__ import annotations

import sys
import time
import functools
from typing import TYPE_CHECKING, Any, Callable, List, Optional

import click

from jobenv.core.errors import one_line, report_error
from jobenv.store.watch import MAX_INTERVAL, MIN_INTERVAL
from jobenv.core.params import Seconds

if TYPE_CHECKING:
    from jobenv.store.record import JobRecord


def warn(msg: str) -> None:
    sys.stderr.write(f"jobenv: warning: {one_line(msg)}\n")


def fail(exc: Exception) -> "click.exceptions.Exit":
    """The one-line error for `exc` (errors.report_error), as click's way to exit with its code."""
    return click.exceptions.Exit(report_error(exc))


def write_out(text: str) -> None:
    """Write exactly the bytes a record holds (non-UTF-8 values are carried as surrogates)."""
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.buffer.flush()


def summary_rows(rec: JobRecord, path: str) -> List[List[str]]:
    from jobenv.core.hostlist import compress
    from jobenv.restore.shell import join

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


def job_id(help_text: str = "Job id (default: as for `get`).") -> Callable[[Callable[..., Any]], Any]:
    """`-j ID`, `--job ID` or a positional ID, alike, for every command that takes one job; two
    different ids are refused.  The command receives it as `job`."""
    def wrap(fn: Callable[..., Any]) -> Any:
        @functools.wraps(fn)
        def merged(*args: Any, job: Optional[str] = None, job_pos: Optional[str] = None, **kw: Any) -> Any:
            if job is not None and job_pos is not None and job != job_pos:
                raise click.UsageError(f"two different jobs given ({job!r} and {job_pos!r})")
            return fn(*args, job=job if job is not None else job_pos, **kw)

        opt = click.option("--job", "-j", metavar="ID", help=help_text)
        return opt(click.argument("job_pos", required=False, metavar="[ID]")(merged))
    return wrap


# watch and save --watch: heartbeat seconds (jobenv.store.watch's bounds)
INTERVAL = Seconds(MIN_INTERVAL, MAX_INTERVAL)


def print_summary(rec: JobRecord, path: str, extra: Optional[List[List[str]]] = None) -> None:
    from jobenv.core.output import print_table

    print_table(summary_rows(rec, path) + (extra or []))


def report_saved(rec: JobRecord, path: str, as_json: bool, quiet: bool) -> None:
    """What `save` and `import` print: warnings on stderr, then JSON, a summary, or nothing."""
    for w in rec.warnings:
        warn(w)
    if as_json:
        write_out(rec.to_json())
    elif not quiet:
        print_summary(rec, path)
