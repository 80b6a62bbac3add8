"""`jobenv logs` of any job jobenv knows: each launch into it from run history, with its rank logs.

A job is launched into from inside its allocation (`jobenv launch`, `launch`), by a batch
script `submit` wrote, or many times by hand; run history keeps one directory per attempt
(jobenv.history.runs) and each attempt given --log-dir notes that directory there as it starts
(history.write.note_log_dir).  So the launches of a job are its run directories, oldest first, and
each one's rank logs are in its noted directory, except when a later attempt of the same
launch moved them into `DIR/attempt-<N>/` (ranks.set_aside) or a later launch given the
same --log-dir removed them (ranks.prepare_log_dir).  A launch without --log-dir kept no
rank logs: its ranks wrote to the launch's own output; one line says so and how to keep them.

The note is hostile input (the ranks write in their run directory): the directory it names
must pass the rule --log-dir itself had to (store.paths: the user's own, not writable by
others, nothing above it replaceable, not a link), else the launch is shown as refused.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from jobenv.core.errors import BadRecord
from jobenv.core.numparse import plural
from .logs import Item, Note, rank_logs

HINT = ("no per-rank logs (its ranks wrote to the launch's own output): next time launch with --log-dir DIR "
        "(--tee RANKS: the ranks the terminal still shows)")


class Launch:
    """One attempt of a launch into the job, and where its rank logs are (`where` None:
    `why` says why there are none to show)."""

    def __init__(self, run: Any, noted: Optional[str], where: Optional[str], why: str, live: bool = False) -> None:
        self.run, self.noted, self.where, self.why = run, noted, where, why
        self.live = live  # running when scanned (no summary yet)

    @property
    def heading(self) -> str:
        r = self.run
        if not r.has_summary:  # running (its summary is written as it ends), or killed
            return f"--- run {r.ident}: {'running' if self.live else 'ended without a summary (killed?)'}{self.why}"
        from jobenv.restore.shell import join

        cmd = join(r.command)[:200] or "?"
        return f"--- run {r.ident}: {cmd} ({plural(r.nranks, 'rank') if r.nranks else '? ranks'}, {r.state}){self.why}"


def _launch_of(name: str) -> str:
    """The launch an attempt's directory belongs to: its supervisor's pid (every attempt of
    one `jobenv launch` has it)."""
    return name.split("-")[2]


def _refusal(path: str) -> str:
    """Why the noted log directory `path` is not read ('' when it may be)."""
    from jobenv.core.trust import check_ancestors
    from jobenv.store.paths import check_safe

    if not os.path.lexists(path):
        return f"its log directory {path} no longer exists"
    try:
        check_ancestors(path, "log directory")
        check_safe(path, True, "log directory")
    except BadRecord as exc:
        return str(exc)
    return ""


def launches(env: Mapping[str, str], scheduler: str, jobid: str) -> List[Launch]:
    """Every attempt of every launch into the job in run history, oldest first."""
    from jobenv.store import files as store
    from jobenv.history import runs

    key = store.key_for(scheduler, jobid)
    scanned = [r for r in reversed(runs.scan(env, key)) if r.key == key]
    live = [not r.has_summary and _alive(r.path) for r in scanned]
    found = [r if r.has_summary or up else _again(r) for r, up in zip(scanned, live)]
    dirs = [runs.noted_log_dir(r.path) for r in found]
    out = []
    for i, (r, d) in enumerate(zip(found, dirs)):
        if d is None:
            out.append(Launch(r, None, None, f": {HINT}", live[i]))
            continue
        where: Optional[str] = d
        why = ""
        later = [(found[j], dirs[j]) for j in range(i + 1, len(found)) if dirs[j] == d]
        if later and _launch_of(later[0][0].name) == _launch_of(r.name) and later[0][0].attempt > r.attempt:
            where = os.path.join(d, f"attempt-{r.attempt + 1}")  # its retry set them aside
        elif later:
            where, why = None, f": its rank logs in {d} were replaced by run {later[0][0].ident}'s (same --log-dir)"
        refused = _refusal(where) if where else ""
        if refused:
            where, why = None, f": not read: {refused}"
        out.append(Launch(r, d, where, why, live[i]))
    return out


def items(sub: Optional[Dict[str, Any]], batch_out: Optional[str], found: List[Launch], rank: Optional[int],
          newest_only: bool = False) -> List[Item]:
    """What `jobenv logs` prints, in order: the batch output (not with --rank), the
    submission's rank logs when no launch in run history wrote there, then each launch's
    heading and rank logs (`newest_only`: the newest launch's)."""
    out: List[Item] = []
    if rank is None:
        out += [p for p in ((sub["output"], sub["error"]) if sub else (batch_out,)) if p]
    if sub and not any(x.noted == sub["log_dir"] for x in found):  # history lost its launch
        out += rank_logs(sub["log_dir"], rank)
    for x in found[-1:] if newest_only else found:
        out.append(Note(x.heading))
        if x.where:
            out += rank_logs(x.where, rank)
    return out


def _alive(run_dir: str) -> bool:
    from jobenv.core.hostlist import this_host
    from ..launch.watch.current import alive

    return alive(run_dir, this_host())


def _again(run: Any) -> Any:
    """A run seen without its summary and found ended: read again (it may have written its
    summary as it ended, between the two looks)."""
    from jobenv.history import runs

    summary = runs.read_json(os.path.join(run.path, runs.SUMMARY), runs.MAX_SUMMARY_BYTES)
    return run if summary is None else runs.Run(run.key, run.name, run.path, summary, run.mtime)


def running(found: List[Launch]) -> bool:
    """Whether the newest launch still runs (seen from this host)."""
    return bool(found) and _alive(found[-1].run.path)

