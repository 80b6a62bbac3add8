"""Is a saved job still running?  One rule for `get`, `show`, `list`, `clean` and `launch`.

Evidence, strongest first: the record marked ended (by `jobenv watch` when the scheduler
said so or the job's nodefile vanished), the scheduler's own CLI, then a fresh heartbeat
from `jobenv watch`.  A heartbeat that stopped proves nothing: the watcher may have been
killed, stopped or lost its node while the job runs on, so it gives "unknown", never
"ended" (and `clean` removes only ended jobs).
"""
from __future__ import annotations

import time

from . import schedulers

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

    from .record import JobRecord

    Verdict = Tuple[str, str]

# Site configuration the scheduler CLI needs, taken from the record when this shell lacks it.
_QUERY_VARS = ("SLURM_CONF", "PBS_CONF_FILE", "PBS_SERVER")


def heartbeat_state(rec: JobRecord, now: Optional[float] = None) -> Optional[Verdict]:
    """('live', ...) while `jobenv watch` beats; ('unknown', ...) once it went silent."""
    st = rec.status
    beat, every = st.get("heartbeat"), st.get("interval")
    if not isinstance(beat, (int, float)) or not isinstance(every, (int, float)):
        return None
    age = max(0.0, (time.time() if now is None else now) - beat)
    if age > 3 * every:
        return "unknown", f"`jobenv watch` went silent {age:.0f} s ago (killed or stopped?)"
    return "live", f"heartbeat {age:.0f} s ago"


def _marked(rec: JobRecord) -> Optional[Verdict]:
    if rec.status.get("state") == "ended":
        return "ended", str(rec.status.get("reason") or "marked ended")
    return None


def query_env(rec: JobRecord, env: Mapping[str, str]) -> Dict[str, str]:
    """This shell's environment plus the record's site configuration where it has none."""
    qenv = dict(env)
    qenv.update(_site(rec, env))
    return qenv


def _site(rec: JobRecord, env: Mapping[str, str]) -> Dict[str, str]:
    return {k: rec.env[k] for k in _QUERY_VARS if k in rec.env and k not in env}


def job_state(rec: JobRecord, env: Mapping[str, str], timeout: float = 5.0) -> Verdict:
    """('live'|'ended'|'unknown', reason) for one record."""
    res = _marked(rec) or schedulers.job_state(rec.scheduler, rec.jobid, query_env(rec, env), timeout)
    return res or heartbeat_state(rec) or ("unknown", "no scheduler command here and no heartbeat")


def job_states(recs: Sequence[JobRecord], env: Mapping[str, str], timeout: float = 5.0) -> List[Verdict]:
    """Verdicts for many records with one scheduler query per scheduler (and per site
    configuration), each bounded by `timeout` seconds."""
    env = dict(env)  # os.environ decodes on every lookup: copy it once
    out: List[Optional[Verdict]] = [_marked(r) for r in recs]
    groups: Dict[tuple, List[int]] = {}
    for i, r in enumerate(recs):
        if out[i] is None:
            site = _site(r, env)
            key = (r.scheduler,) + tuple(site.get(k) for k in _QUERY_VARS)
            groups.setdefault(key, []).append(i)
    for idx in groups.values():
        ids = list(dict.fromkeys(recs[i].jobid for i in idx))
        found = schedulers.job_states(recs[idx[0]].scheduler, ids, query_env(recs[idx[0]], env), timeout)
        for i in idx:
            out[i] = found.get(recs[i].jobid)
    return [v or heartbeat_state(r) or ("unknown", "no scheduler command here and no heartbeat")
            for v, r in zip(out, recs)]
