"""Is a saved job still running?  One rule for `get`, `show`, `list`, `clean` and `launch`.

Evidence, strongest first: the record marked ended (by `jobenv watch` when the scheduler
said so or the job's nodefile vanished), a fresh heartbeat from `jobenv watch` (live, and
no scheduler command is forked), then the scheduler's own CLI.  A heartbeat that stopped
proves nothing: the watcher may have been killed, stopped or lost its node while the job
runs on, so it gives "unknown", never "ended" (and `clean` removes only ended jobs).
`get` adds a short-lived cache of the scheduler's word around `ask` (get.cached_state);
`launch` asks afresh (`fresh_state`): a minute-old "live" must not send a launcher into an ended job.
"""
from __future__ import annotations

import time

from jobenv import schedulers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

    from jobenv.store.record import JobRecord

    Verdict = Tuple[str, str]

# Site configuration the scheduler CLI needs, taken from the record when this shell lacks it
# (each scheduler file's `query_vars`).
_QUERY_VARS = schedulers.QUERY_VARS


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x and abs(x) != float("inf")


def heartbeat(rec: JobRecord, now: float) -> Optional[Tuple[bool, float, float]]:
    """(fresh?, age, fresh-until) of `jobenv watch`'s heartbeat; None without a usable one.

    Fresh means within three intervals (a clock up to 60 s ahead is tolerated)."""
    beat, every = rec.status.get("heartbeat"), rec.status.get("interval")
    if not (_finite(beat) and _finite(every)) or every <= 0:  # type: ignore[operator]
        return None
    age = now - beat  # type: ignore[operator]
    return -60 <= age <= 3 * every, age, beat + 3 * every  # type: ignore[operator]


def heartbeat_state(rec: JobRecord, now: Optional[float] = None) -> Optional[Verdict]:
    """('live', ...) while `jobenv watch` beats; ('unknown', ...) once it went silent."""
    beat = heartbeat(rec, time.time() if now is None else now)
    if beat is None:
        return None
    if beat[0]:
        return "live", f"heartbeat from `jobenv watch` {max(0, int(beat[1]))} s ago"
    return "unknown", f"`jobenv watch` went silent {int(beat[1])} s ago (killed or stopped?)"


def marked(rec: JobRecord) -> Optional[Verdict]:
    """The record's own word: ended by the job itself or by its watcher."""
    if rec.status.get("state") == "ended":
        return "ended", str(rec.status.get("reason") or "marked ended")
    return None


def without_query(rec: JobRecord, now: Optional[float] = None) -> Optional[Verdict]:
    """What the record alone proves, before any scheduler command is run: marked ended, or
    a fresh heartbeat (live; most new shells then fork no qstat/squeue)."""
    beat = heartbeat_state(rec, now)
    return marked(rec) or (beat if beat and beat[0] == "live" else None)


def _fallback(rec: JobRecord, now: Optional[float] = None) -> Verdict:
    """No scheduler answered: a silent watcher or no evidence at all; never "ended"."""
    return heartbeat_state(rec, now) or ("unknown", "no scheduler command answered and no heartbeat")


def query_env(rec: JobRecord, env: Mapping[str, str]) -> Dict[str, str]:
    """This shell's environment plus the record's site configuration where it has none."""
    qenv = dict(env)
    qenv.update(_site(rec, env))
    return qenv


def _site(rec: JobRecord, env: Mapping[str, str]) -> Dict[str, str]:
    return {k: rec.env[k] for k in _QUERY_VARS if k in rec.env and k not in env}


def ask(rec: JobRecord, env: Mapping[str, str], timeout: float = 5.0) -> Verdict:
    """The scheduler's word (one bounded query), else what the heartbeat allows."""
    found = schedulers.query_states(rec.scheduler, [rec.jobid], query_env(rec, env), timeout)
    return found.get(rec.jobid) or _fallback(rec)


def fresh_state(rec: JobRecord, env: Mapping[str, str], timeout: float = 5.0) -> Verdict:
    """The verdict `launch` acts on: the record's own "ended", else the scheduler asked now
    (a watcher's heartbeat may be three intervals old), else what the heartbeat allows."""
    return marked(rec) or ask(rec, env, timeout)


def job_state(rec: JobRecord, env: Mapping[str, str], timeout: float = 5.0) -> Verdict:
    """('live'|'ended'|'unknown', reason) for one record: marked ended, a fresh heartbeat,
    the scheduler's word, then unknown."""
    return without_query(rec) or ask(rec, env, timeout)


def job_states(recs: Sequence[JobRecord], env: Mapping[str, str], timeout: float = 5.0) -> List[Verdict]:
    """Verdicts for many records, by the rule of `job_state`, with one scheduler query per
    scheduler (and per site configuration), each bounded by `timeout` seconds."""
    env = dict(env)  # os.environ decodes on every lookup: copy it once
    out: List[Optional[Verdict]] = [without_query(r) for r in recs]
    groups: Dict[Tuple[Optional[str], ...], List[int]] = {}
    for i, r in enumerate(recs):
        if out[i] is None:
            site = _site(r, env)
            key = (r.scheduler,) + tuple(site.get(k) for k in _QUERY_VARS)
            groups.setdefault(key, []).append(i)
    for idx in groups.values():
        ids = list(dict.fromkeys(recs[i].jobid for i in idx))
        found = schedulers.query_states(recs[idx[0]].scheduler, ids, query_env(recs[idx[0]], env), timeout)
        for i in idx:
            out[i] = found.get(recs[i].jobid)
    return [v or _fallback(r) for v, r in zip(out, recs)]
