"""Find records by job id for `show`, `rm`, `watch` and `clean`, defective ones included.

`rm` must be able to remove a record that `get` refuses (corrupt, or written by a newer
jobenv), so this looks at every JSON file in the store and recovers the job id of a
defective one from its text when it can, else from its file name (the key).  An id that
matches several records (`123` with `123.serverA` and `123.serverB`) is an error naming
them all, never a silent pick.
"""
from __future__ import annotations

import os

from . import store
from .errors import BadInput, BadRecord, NoRecord, visible
from .fastjson import loads
from .record import JobRecord
from .schedulers import NAMES as SCHEDULERS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Tuple, Union

    Entry = Tuple[str, Union[JobRecord, BadRecord], Optional[str], Optional[str]]

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
    keys = {store.key_for(s, jobid) + ".json" for s in SCHEDULERS}
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
