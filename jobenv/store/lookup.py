"""Which job: the one record a command works on, for get, launch, show, doctor and stage
(`which_job`: --job, else the scheduler job this shell lives in, else the newest record on
this host), and records by job id for `show`, `rm`, `watch` and `clean`, defective ones
included (`find`).

`rm` must be able to remove a record that `get` refuses (corrupt, or written by a newer
jobenv), so `find` looks at every JSON file in the store and recovers the job id of a
defective one from its text when it can, else from its file name (the key).  An id that
matches several records (`123` with `123.serverA` and `123.serverB`) is an error naming
them all, never a silent pick.  `select` is on the `jobenv get` path: one record read
(getcache's per-host index), no typing, no re.
"""
from __future__ import annotations

import os
import time

from jobenv import schedulers
from jobenv.store import cache as getcache
from jobenv.store import files as store
from jobenv.core.errors import BadInput, BadRecord, NoRecord, visible
from jobenv.core.jsonread import loads
from jobenv.core.hostlist import host_index, this_host
from jobenv.store.record import JobRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, List, Mapping, Optional, Tuple, Union

    Entry = Tuple[str, Union[JobRecord, BadRecord], Optional[str], Optional[str]]
    Choice = Tuple[str, JobRecord, str, List[str]]

NO_RECORD_HINT = "run `jobenv save` inside your allocation first"


def check_jobid(jobid: str) -> str:
    """`--job ""` (or blanks) is a mistake, not a request for the newest job."""
    if not jobid.strip():
        raise BadInput("--job needs a job id (it was empty)")
    return jobid


def peek(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(scheduler, jobid) read leniently from a record that failed validation."""
    try:
        with open(path, "rb") as f:
            data = loads(f.read(store.MAX_RECORD_BYTES).decode("utf-8", "surrogateescape"))
    except (OSError, ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    sched, jobid = data.get("scheduler"), data.get("jobid")
    return (sched if isinstance(sched, str) else None), (jobid if isinstance(jobid, str) else None)


def entries(env: Mapping[str, str]) -> List[Entry]:
    """(path, record or BadRecord, scheduler, jobid) for every JSON file in the store."""
    out: List[Entry] = []
    for path, item in store.iter_records(env):
        if isinstance(item, JobRecord):
            out.append((path, item, item.scheduler, item.jobid))
        else:
            sched, jobid = peek(path) if item.kind in ("corrupt", "future") else (None, None)
            out.append((path, item, sched, jobid))
    return out


def find(env: Mapping[str, str], jobid: str, allow_bad: bool = False) -> Tuple[str, Union[JobRecord, BadRecord]]:
    """The one record for `jobid`: exact id, else the file named for it, else the PBS short
    form (`2024084` for `2024084.polaris-pbs-01...`).  A defective record is raised unless
    `allow_bad` (rm)."""
    check_jobid(jobid)
    all_entries = entries(env)
    keys = {store.key_for(s, jobid) + ".json" for s in schedulers.NAMES}
    for match in (lambda e: e[3] == jobid,
                  lambda e: os.path.basename(e[0]) in keys,
                  lambda e: e[3] is not None and e[3].split(".")[0] == jobid):
        hits = [e for e in all_entries if match(e)]
        if len(hits) > 1:
            names = ", ".join(visible(f"{e[3] or os.path.basename(e[0])}" + (f" ({e[2]})" if e[2] else ""))
                              for e in hits)
            raise BadInput(f"job id {visible(jobid)!r} matches {len(hits)} records: {names}; "
                           "give the full id")
        if hits:
            path, item = hits[0][0], hits[0][1]
            if isinstance(item, BadRecord) and not allow_bad:
                raise item
            return path, item
    known = ", ".join(visible(e[3]) for e in all_entries[:5] if e[3]) or "none"
    raise NoRecord(f"no record for job {visible(jobid)!r} (known: {known}); {NO_RECORD_HINT}")


def _newest_key(rec: JobRecord) -> Tuple[int, Union[float, str]]:
    c = rec.created_at
    return (1, float(c)) if isinstance(c, (int, float)) else (0, str(c))


def good_records(env: Mapping[str, str], warn: Callable[[str], None]) -> List[Tuple[str, JobRecord]]:
    """Readable records, newest first; each defective one is reported, not fatal."""
    out: List[Tuple[str, JobRecord]] = []
    for path, rec in store.iter_records(dict(env)):
        if isinstance(rec, BadRecord):
            warn(f"skipping {rec.message}")
        else:
            out.append((path, rec))
    out.sort(key=lambda pr: _newest_key(pr[1]), reverse=True)
    return out


def find_job(env: Mapping[str, str], jobid: str) -> Tuple[str, JobRecord]:
    """A record by id, by jobenv.store.lookup's rule (exact id, its file, the PBS short form;
    ambiguity is an error).  The common case, one file named for the id, is found with a
    few stat calls instead of reading every record (this is the `get` path)."""
    check_jobid(jobid)
    store.open_store(dict(env))
    hits = [p for p in (store.paths_for(store.key_for(s, jobid), dict(env))[0] for s in schedulers.NAMES)
            if os.path.lexists(p)]
    if len(hits) == 1:
        rec = store.load(hits[0])  # a defective record with that id: report its defect
        if rec.jobid == jobid:
            return hits[0], rec
    path, item = find(env, jobid)
    if isinstance(item, BadRecord):  # find raises a defective record itself; this keeps the type exact
        raise item
    return path, item


def select(env: Mapping[str, str], jobid: Optional[str], hostname: Optional[str] = None) -> Choice:
    """(path, record, why, warnings): --job; else the scheduler job this shell lives in, or
    an error naming it; else the newest record on this host; else the newest of all."""
    if jobid is not None:
        path, rec = find_job(env, jobid)
        return path, rec, f"job {jobid} asked for by --job", []
    store.open_store(dict(env))
    live = schedulers.env_jobid(env)
    if live:
        sched, jid = live
        path = store.paths_for(store.key_for(sched, jid), dict(env))[0]
        if not os.path.lexists(path):
            raise NoRecord(f"this shell is in {sched} job {jid}, which has no record: run `jobenv save` "
                           "(or pass --job to restore another job here)")
        return path, store.load(path), f"this shell is in job {jid}", []
    hostname = hostname or this_host(env)
    hit = getcache.read_index(env, hostname)
    if hit:
        try:
            return hit[0], store.load(hit[0]), hit[1], hit[2]
        except BadRecord:
            pass  # changed in place since: look again
    warnings: List[str] = []
    recs = good_records(env, warnings.append)
    if not recs:
        raise NoRecord(f"no saved job in {store.jobs_dir(env)}; {NO_RECORD_HINT}")
    here = [pr for pr in recs if host_index(pr[1].hosts, hostname) is not None]
    if here:
        path, rec = here[0]
        why = f"newest record on this host ({hostname})"
    else:
        path, rec = recs[0]
        why = "newest record"
        warnings.append(f"this host ({hostname}) is not part of job {rec.jobid}; using the newest record "
                        "(pass --job to choose another)")
    getcache.write_index(env, hostname, path, why, warnings, time.time())
    return path, rec, why, warnings


def which_job(env: Mapping[str, str], jobid: Optional[str], warn: Callable[[str], None],
              hostname: Optional[str] = None) -> Tuple[str, JobRecord]:
    """(path, record) as `select` chooses them, its warnings given to `warn`."""
    path, rec, _, warnings = select(env, jobid, hostname)
    for w in warnings:
        warn(w)
    return path, rec
