"""The commands that look after saved records: show, list, rm, clean, import, watch.

Thin click commands: each parses, calls the store/lookup/liveness modules, and prints
through cli.common; cli.main registers them.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import click

from jobenv.store.record import JobRecord

from jobenv.cli.common import INTERVAL, job_id, print_summary, report_saved, saved_time, warn, write_out
from jobenv.core.params import Seconds
from jobenv.core.errors import BadRecord, visible


@click.command()
@job_id()
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
def show(job: Optional[str], as_json: bool) -> None:
    """Show one record."""
    from jobenv.store.liveness import job_state

    path, rec = _pick(job)
    if as_json:
        write_out(rec.to_json())
        return
    from jobenv.launch.verdict import badhosts
    from jobenv.store.files import key_for, runs_dir

    state, reason = job_state(rec, os.environ)
    runs = runs_dir(key_for(rec.scheduler, rec.jobid), os.environ)
    retired = [["retired host", badhosts.describe(e)] for e in badhosts.load(runs, warn)]
    rows = [["state", f"{state} ({reason})"]]
    if rec.provenance:
        from jobenv.capture.outside import summary

        rows.append(["source", summary(rec.provenance)])
    print_summary(rec, str(path), rows + [["warning", w] for w in rec.warnings] + retired)


def _pick(job: Optional[str]) -> Tuple[str, JobRecord]:
    """--job ID (exact, file name, or unique short form), else `get`'s choice."""
    if job is not None:
        from jobenv.store.lookup import find

        path, rec = find(os.environ, job)
        if isinstance(rec, BadRecord):  # find raises it already; this says so to the type checker
            raise rec
        return path, rec
    from jobenv.store.lookup import which_job

    return which_job(os.environ, None, warn)


def _list_rows() -> List[Dict[str, Any]]:
    """One row per record, newest saved first, defective ones last; liveness from one
    scheduler query per scheduler."""
    from jobenv.store.liveness import job_states
    from jobenv.store.lookup import entries
    from jobenv.store.record import JobRecord

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


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(as_json: bool) -> None:
    """List saved jobs with their state: live, ended, unknown (or corrupt)."""
    rows = _list_rows()
    if as_json:
        write_out(json.dumps(rows, indent=2) + "\n")
        return
    if not rows:
        sys.stderr.write("no saved jobs; run `jobenv save` inside your allocation first\n")
        return
    from jobenv.core.output import print_table

    table = [[r["jobid"] or "?", r["scheduler"] or "", "", "", "", "", "corrupt", r["reason"]] if "kind" in r else
             [r["jobid"], r["scheduler"], r["machine"], str(r["nhosts"]), str(r["ngpus"]),
              saved_time(r["created_at"])[:16], r["state"], r["reason"]] for r in rows]
    print_table(table, ["job", "scheduler", "profile", "hosts", "GPUs", "saved", "state", "why"])


@click.command()
@job_id("Job id (as for the other commands).")
def rm(job: Optional[str]) -> None:
    """Remove one job's record: jobenv rm -j ID (or jobenv rm ID).

    Also a corrupt one, or one written by a newer jobenv."""
    from jobenv.store import files as store
    from jobenv.core.errors import BadRecord
    from jobenv.store.lookup import find, peek

    if job is None:
        raise click.UsageError("which job? pass -j ID (`jobenv list` shows them)")
    path, rec = find(os.environ, job, allow_bad=True)
    if isinstance(rec, BadRecord) and rec.kind not in ("corrupt", "future", "gone"):
        raise rec  # unsafe (another user's file, a symlink): not ours to judge or delete
    jobid = peek(path)[1] if isinstance(rec, BadRecord) else rec.jobid
    store.remove(path, os.environ)
    click.echo(f"removed job {visible(jobid or os.path.basename(path))}")


@click.command()
@click.option("--older-than", type=Seconds(), metavar="AGE", help="Only records saved longer ago than AGE (7d, 12h, 1h30m, 90s).")
@click.option("--corrupt", is_flag=True, help="Also remove corrupt records and those of a newer jobenv.")
@click.option("--dry-run", "-n", is_flag=True, help="Say what would go, remove nothing.")
def clean(older_than: Optional[float], corrupt: bool, dry_run: bool) -> None:
    """Remove records of jobs that have ended."""
    from jobenv.store import files as store

    limit = older_than
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


@click.command("import")
@click.argument("env_file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--profile", metavar="NAME", help="Machine profile (default: detected).")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing.")
def import_cmd(env_file: str, profile: Optional[str], as_json: bool, quiet: bool) -> None:
    """Turn ~/.pbsenv, ~/.cobaltenv or ~/.slurmenv written by other tools into a record."""
    from jobenv.capture import importer
    from jobenv.capture.save import Options
    from jobenv.capture.save import save as do_save

    parsed = importer.parse(importer.read(env_file), env_file)
    env = importer.import_env(parsed, os.environ)
    rec, path = do_save(env, Options(profile=profile))
    from jobenv.store import files as store

    rec = store.update_status(path, {"reason": f"imported from {os.path.abspath(env_file)}"}, env)
    report_saved(rec, path, as_json, quiet)


@click.command()
@job_id()
@click.option("--interval", type=INTERVAL, default=30.0, show_default=True,
              help="Seconds between heartbeats (0.1 to 86400).")
@click.option("--foreground", is_flag=True, help="Run in this process instead of a detached daemon.")
def watch(job: Optional[str], interval: float, foreground: bool) -> None:
    """Keep the job's record live: heartbeat, and mark it ended when the job ends."""
    from jobenv.store import watch as watch_mod

    path, rec = _pick(job)
    if foreground:
        raise click.exceptions.Exit(watch_mod.run(path, interval, dict(os.environ)))
    pid = watch_mod.start(path, interval, dict(os.environ))
    if pid is None:
        click.echo(f"already watching job {visible(rec.jobid)} (pid {watch_mod.running(path)})")
    else:
        click.echo(f"watching job {visible(rec.jobid)}: pid {pid}, heartbeat every {interval:g} s")
