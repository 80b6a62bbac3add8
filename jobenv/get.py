"""`jobenv get`: choose this shell's job, check it is alive, render it for the shell.

This path runs in every new shell, so it imports neither click, rich, yaml nor filelock.
"""
from __future__ import annotations

import os
import time

from . import schedulers, shell, store
from .errors import BadRecord, JobEnded, NoRecord
from .hostlist import host_index, this_host

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import List, Mapping, Optional, Tuple

    from .record import JobRecord

NO_RECORD_HINT = "run `jobenv save` inside your allocation first"


def good_records(env: Mapping[str, str], warn) -> List[Tuple[str, JobRecord]]:
    """Readable records, newest first; each defective one is reported, not fatal."""
    out = []
    for path, rec in store.iter_records(env):
        if isinstance(rec, BadRecord):
            warn(f"skipping {rec.message}")
        else:
            out.append((path, rec))
    out.sort(key=lambda pr: pr[1].created_at, reverse=True)
    return out


def find_job(env: Mapping[str, str], jobid: str, warn) -> Tuple[str, JobRecord]:
    """A record by id: exact, then the PBS short form (`2024084` for `2024084.polaris-pbs-01...`)."""
    recs = good_records(env, lambda msg: None)  # other jobs' defects are not this command's business
    for path, rec in recs:
        if rec.jobid == jobid:
            return path, rec
    for path, rec in recs:
        if rec.jobid.split(".")[0] == jobid:
            return path, rec
    # a defective record with that id: report its defect rather than "unknown"
    key_paths = [store.paths_for(store.key_for(s, jobid), env)[0] for s in schedulers.MODULES]
    for p in key_paths:
        if os.path.exists(p):
            store.load(p)
    known = ", ".join(r.jobid for _, r in recs[:5]) or "none"
    raise NoRecord(f"no record for job {jobid!r} (known: {known}); {NO_RECORD_HINT}")


def choose(env: Mapping[str, str], jobid: Optional[str], warn,
           hostname: Optional[str] = None) -> Tuple[str, JobRecord]:
    """--job; else the live scheduler job of this shell; else newest on this host; else newest."""
    if jobid:
        return find_job(env, jobid, warn)
    hostname = hostname or this_host(env)
    recs = good_records(env, warn)
    if not recs:
        raise NoRecord(f"no saved job in {store.jobs_dir(env)}; {NO_RECORD_HINT}")
    live = schedulers.env_jobid(env)
    if live:
        for path, rec in recs:
            if (rec.scheduler, rec.jobid) == live:
                return path, rec
    for path, rec in recs:
        if host_index(rec.hosts, hostname) is not None:
            return path, rec
    path, rec = recs[0]
    warn(f"this host ({hostname}) is not part of job {rec.jobid}; using the newest record "
         "(pass --job to choose another)")
    return path, rec


def heartbeat_state(rec: JobRecord, now: Optional[float] = None) -> Optional[Tuple[str, str]]:
    """Judge liveness from `jobenv watch`'s heartbeat when no scheduler CLI answers."""
    st = rec.status
    beat, every = st.get("heartbeat"), st.get("interval")
    if not isinstance(beat, (int, float)) or not isinstance(every, (int, float)):
        return None
    age = (now or time.time()) - beat
    if age > 3 * every:
        return "ended", f"no heartbeat from `jobenv watch` for {int(age)} s"
    return "live", f"heartbeat {int(age)} s ago"


def job_state(rec: JobRecord, env: Mapping[str, str]) -> Tuple[str, str]:
    """('live'|'ended'|'unknown', reason): record status, then scheduler CLI, then heartbeat."""
    if rec.status.get("state") == "ended":
        return "ended", str(rec.status.get("reason") or "marked ended")
    qenv = dict(env)
    for k in ("SLURM_CONF", "PBS_CONF_FILE", "PBS_SERVER"):
        if k in rec.env and k not in qenv:
            qenv[k] = rec.env[k]
    res = schedulers.job_state(rec.scheduler, rec.jobid, qenv)
    if res is None:
        res = heartbeat_state(rec)
    return res or ("unknown", "no scheduler command here and no heartbeat")


def get(env: Mapping[str, str], jobid: Optional[str] = None, shell_name: Optional[str] = None,
        allow_stale: bool = False, warn=None) -> str:
    """The snippet to source for this shell's job."""
    warn = warn or (lambda msg: None)
    path, rec = choose(env, jobid, warn)
    state, reason = job_state(rec, env)
    if state == "ended" and not allow_stale:
        raise JobEnded(f"job {rec.jobid} has ended ({reason}); pass --allow-stale to restore it "
                       "anyway, or `jobenv rm` it")
    stale = shell.stale_vars(rec, env, schedulers.PREFIXES)
    if stale:
        warn(f"clearing {len(stale)} variable(s) of another job from this shell")
    return shell.render(shell_name or shell.shell_from_env(env), rec, path, stale)
