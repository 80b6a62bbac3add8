"""`jobenv get`: this shell's job (jobenv.store.lookup), whether it is alive (jobenv.store.liveness, its
verdict cached here), the plan, rendered.

This path runs in every new shell, so it imports neither click, rich, yaml, re
nor typing, reads one record rather than all of them (getcache's per-host index), and
forks no scheduler command while a recent verdict or a fresh watcher heartbeat holds.
"""
from __future__ import annotations

import os
import time

from jobenv import schedulers
from jobenv.store import cache as getcache
from jobenv.store import liveness
from jobenv.restore import plan
from jobenv.restore import shell
from jobenv.store import files as store
from jobenv.core.errors import JobenvError
from jobenv.core.hostlist import this_host
from jobenv.store.lookup import select

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional, Tuple

    Item = Tuple[Dict[str, str], List[str], List[str]]  # (set, path_prepend, warnings)

    from jobenv.store.record import JobRecord

LIVENESS_TIMEOUT = 2.0  # the whole scheduler query in `get`: a login must not stall on qstat
FRESH_TIMEOUT = 5.0  # `launch` asks afresh: a busy scheduler gets longer, the launch waits anyway


def cached_state(rec: JobRecord, env: Mapping[str, str], now: Optional[float] = None,
                 timeout: float = LIVENESS_TIMEOUT, fresh: bool = False) -> Tuple[str, str, float]:
    """(live|ended|unknown, reason, trusted-until): jobenv.store.liveness's rule (job_state), with
    the scheduler's word cached for a minute so most new shells fork no qstat/squeue.

    `fresh` (launch) asks the scheduler now (liveness.fresh_state): a job cancelled within
    the minute must be refused before a launcher runs into it.  Its answer refreshes the cache."""
    now = time.time() if now is None else now
    if fresh:
        state, reason = liveness.fresh_state(rec, env, timeout)
        if rec.scheduler in schedulers.ASKS_COMMAND:
            getcache.write_verdict(env, store.key_for(rec.scheduler, rec.jobid), state, reason,
                                   now + getcache.VERDICT_TTL)
        return state, reason, now + getcache.VERDICT_TTL
    known = liveness.without_query(rec, now)
    if known is not None:
        beat = liveness.heartbeat(rec, now)
        return known[0], known[1], (beat[2] if known[0] == "live" and beat else now + 86400)
    key = store.key_for(rec.scheduler, rec.jobid)
    cache = rec.scheduler in schedulers.ASKS_COMMAND  # an answer that cost a scheduler command
    if cache:
        hit = getcache.read_verdict(env, key, now)
        if hit:
            return hit
    state, reason = liveness.ask(rec, env, timeout)
    until = now + (getcache.VERDICT_TTL if cache else 86400)
    if cache:
        getcache.write_verdict(env, key, state, reason, until)
    return state, reason, until


def _launch_program(env: Mapping[str, str]) -> List[Item]:
    """$JOBENV_HOME/bin first on PATH when it holds the `launch` program (jobenv.launch.plan.executable):
    `timeout 600 launch ...`, `nohup launch ...` and child scripts find it there."""
    from jobenv.store.paths import LAUNCH_PROGRAM, bin_dir

    d = bin_dir(env)
    return [({}, [d], [])] if os.path.exists(os.path.join(d, LAUNCH_PROGRAM)) else []


def _extra_items(rec: JobRecord, env: Mapping[str, str], host: str, python: bool = True) -> List[Item]:
    """(set, path_prepend, warnings) of the software and staged-files concerns, when present.

    A concern is asked only when the record carries its field (most do not: no import).
    Only modules of this very package count (a stray `jobenv` elsewhere on sys.path, such
    as another checkout's editable install, must not answer for it)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # jobenv/, from jobenv/restore/get.py
    items: List[Item] = []
    for name, field in (("store.software_field", "software"), ("stage", "staged")):
        if not getattr(rec, field, None) or not python and name == "stage":
            continue
        rel = os.path.join(*name.split("."))
        if not (os.path.exists(os.path.join(here, rel + ".py"))
                or os.path.exists(os.path.join(here, rel, "__init__.py"))):
            continue
        mod = __import__(f"jobenv.{name}", fromlist=["restore_items"])
        fn = getattr(mod, "restore_items", None)
        if fn is not None:
            items.append(fn(rec, env, host, python=python) if name == "store.software_field" else fn(rec, env, host))
    return items


def _cacheable(env: Mapping[str, str], jobid: Optional[str]) -> bool:
    """getjobenv's fast path serves shells in no scheduler job and with no site variable
    (see jobenv.sh and its test): for all of them the plan is the same, since only a job's
    marks make a shell's variables another job's (plan.other_job_prefixes) and only a site
    variable is kept over the record's.  The one other input, LOADEDMODULES (the modules
    warning), is in the snippet's header (getcache.proof)."""
    return (jobid is None and not any(env.get(v) for names in schedulers.JOB_MARKERS.values() for v in names)
            and schedulers.SITE_VARS.isdisjoint(env))


def restore_plan(env: Mapping[str, str], jobid: Optional[str] = None, allow_stale: bool = False,
                 hostname: Optional[str] = None, python: bool = True,
                 fresh: bool = False) -> Tuple[plan.Plan, float, JobRecord]:
    """The plan for this shell, until when its liveness verdict holds, and the record.
    `python=False` (--no-python) leaves the job's Python environment and staged copy out;
    `fresh` asks the scheduler afresh instead of trusting a cached verdict (launch)."""
    host = hostname or this_host(env)
    path, rec, why, warnings = select(env, jobid, host)
    state, reason, until = cached_state(rec, env, timeout=FRESH_TIMEOUT if fresh else LIVENESS_TIMEOUT,
                                        fresh=fresh)
    p = plan.build(rec, path, env, why=why, state=(state, reason), store="owner, mode and schema checked",
                   allow_stale=allow_stale, jobenv_argv=shell.jobenv_argv(),
                   extra=_extra_items(rec, env, host, python) + _launch_program(env), warnings=warnings)
    return p, until, rec


def tell_on_terminal(msg: str) -> None:
    """How `jobenv get` says which job it restored: for a person at a terminal only, so a
    script's stderr stays clean (getjobenv's cached path tests `[ -t 2 ]` likewise)."""
    import sys

    from jobenv.core.errors import one_line

    if sys.stderr is not None and sys.stderr.isatty():
        sys.stderr.write(f"jobenv: {one_line(msg)}\n")


def restored_line(jobid: str, scheduler: str) -> str:
    """The one line a restore says on stderr when it chose the job itself (getjobenv's fast
    path in shell/jobenv.sh prints the same words)."""
    return f"restored {scheduler} job {jobid}; -j ID restores another"


def get(env: Mapping[str, str], jobid: Optional[str] = None, shell_name: Optional[str] = None,
        allow_stale: bool = False, warn: Optional[Callable[[str], None]] = None, python: bool = True,
        tell: Optional[Callable[[str], None]] = None) -> str:
    """The snippet to source for this shell's job (`python=False`: --no-python); `tell` hears
    which job was restored when the shell did not name one (the CLI says it on a terminal only)."""
    warn = warn or (lambda msg: None)
    dialect = shell_name or shell.parent_dialect() or shell.shell_from_env(env)
    host = this_host(env)
    cacheable = _cacheable(env, jobid) and not allow_stale and python
    try:
        p, until, _ = restore_plan(env, jobid, allow_stale, host, python)
    except JobenvError:
        if cacheable:
            getcache.drop_snippet(env, host)
        raise
    for w in p.warnings:
        warn(w)
    if jobid is None and tell is not None:  # chosen for this shell, not asked for: say which, once
        tell(restored_line(p.jobid, p.scheduler))
    if cacheable:
        header = getcache.proof(env, p.record_path, until)
        if header:
            getcache.write_snippet(env, host, header, shell.render_posix(p, "bash", warnings=True))
    return shell.render(dialect, p)
