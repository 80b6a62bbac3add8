"""Run history: one small summary per `jobenv launch` attempt, listed, shown and pruned.

Each attempt has its run directory `<JOBENV_HOME>/runs/<job key>/<stamp>-<pid>-a<N>/`
(jobenv.launch.ranks.make_run_dir).  At the attempt's end launch writes `summary.json`
there (jobenv.history.write, atomically: jobenv.core.atomic): command, job, hosts, ranks, attempt,
duration, and the attempt's verdict as decided (jobenv.rank.verdict): outcome, cause, the launch's
exit code, the first failure with its exit code and signal as numbers.  Every reader (runs list,
runs show, the report) reads those fields; none judges the run again.  An attempt given --log-dir notes that directory there as it starts, in
`logdir.json` (note_log_dir: `jobenv logs` finds a launch's rank logs by it, a running one's
too).  A program whose rank 0 knows every rank's start-up phases (the selftest)
writes `phases.json` beside it, once per run, not a file per rank.

Run directories are hostile input: the ranks (user code) write in them.  So every name is
lstat'ed and links are never followed, every file is read through jobenv.core.readfile with a
bound, and every field is checked for its type before use (a wrong one reads as absent).
An entry shaped like a run that is no directory, or whose name holds no date, is skipped
with one warning: history is advisory, it never fails a launch or a listing.

Retention: the newest JOBENV_RUNS_KEEP runs (default 200) of all jobs, none older than
JOBENV_RUNS_DAYS days (default 30) since last written (the directory's mtime); launch prunes after writing each summary (one listing
of the runs tree).  A run without a summary (a launch still running, or killed) is removed
by count only when it is more than a day old.
"""
from __future__ import annotations

import os
import stat
import time

from jobenv.core.errors import BadInput, NoRecord

TYPE_CHECKING = False  # `import typing` costs ~5 ms; launch imports this module on every run
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

SUMMARY, PHASES, LOG_DIR = "summary.json", "phases.json", "logdir.json"
SUMMARY_VERSION = 2  # 2: the verdict's outcome, cause and numeric first failure (1 had none)
MAX_SUMMARY_BYTES = 1 << 20
MAX_PHASES_BYTES = 64 << 20  # about 300 bytes per rank: room for 200,000 ranks
KEEP_RUNS, KEEP_DAYS = 200, 30.0
UNFINISHED_GRACE = 86400.0  # a run without a summary younger than this may be in flight
# The start-up phases in the order a rank goes through them (the selftest's names).
STARTUP = ("launch", "interpreter", "imports", "rendezvous", "first_collective", "first_step")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def _digits(s: str, least: int, most: int) -> bool:
    return least <= len(s) <= most and s.isascii() and s.isdigit()


def run_name(name: str) -> Optional[Tuple[str, int]]:
    """(stamp, attempt) of a name shaped like a run directory's, `<YYYYmmdd-HHMMSS>-<pid>-a<N>`,
    else None (no `re` here: launch imports this module).  The shape only: stamp_time says
    whether the stamp is a time at all."""
    p = name.split("-")
    ok = len(p) == 4 and _digits(p[0], 8, 8) and _digits(p[1], 6, 6) and _digits(p[2], 1, 10) and \
        p[3][:1] == "a" and _digits(p[3][1:], 1, 6)
    return (f"{p[0]}-{p[1]}", int(p[3][1:])) if ok else None


def stamp_time(stamp: str) -> Optional[float]:
    """The local time a run name's stamp says, None for one no clock gives (`20261399-250000`:
    a rank can make such a directory beside its own)."""
    try:
        return time.mktime(time.strptime(stamp, "%Y%m%d-%H%M%S"))
    except (ValueError, OverflowError):
        return None


def is_key(name: str) -> bool:
    return 0 < len(name) <= 200 and name not in (".", "..") and all(c in _KEY_CHARS for c in name)


def root(env: Optional[Mapping[str, str]] = None) -> str:
    from jobenv.store.paths import home

    return os.path.join(home(env), "runs")


def is_real_dir(path: str) -> bool:
    """A real directory (lstat: a link to one is not)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def read_json(path: str, limit: int) -> Optional[Dict[str, Any]]:
    """The JSON object in the regular file `path` (never through a link), or None."""
    import json

    from jobenv.core.readfile import open_regular, read_open

    try:
        fd, st = open_regular(path, nofollow=True)
    except OSError:
        return None
    try:
        data = json.loads(read_open(fd, st, limit).decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else None


def num(value: Any, low: float = 0.0, high: float = 1e10) -> Optional[float]:
    """A number in [low, high] (not a bool, not NaN), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if low <= value <= high else None


def text(value: Any, most: int = 4096) -> str:
    """A printable string of at most `most` characters ('' for anything else)."""
    from jobenv.core.errors import one_line

    return one_line(value)[:most] if isinstance(value, str) else ""


# Version 1 summaries (before the verdict was recorded) carry no outcome: they read by the rule
# of their day, the exit codes of a signal from outside (HUP, INT, USR1, USR2, PIPE, TERM).
_V1_INTERRUPTED_EXITS = frozenset((129, 130, 138, 140, 141, 143))


class Run:
    """One attempt's directory and what its summary says (checked fields only)."""

    def __init__(self, key: str, name: str, path: str, summary: Optional[Dict[str, Any]], mtime: float) -> None:
        self.key, self.name, self.path, self.mtime = key, name, path, mtime
        s = summary or {}
        self.has_summary = summary is not None
        m = run_name(name)
        stamp = (stamp_time(m[0]) if m else None) or num(mtime) or 0.0
        self.started = num(s.get("started")) or stamp
        self.attempt = int(num(s.get("attempt"), 0, 1e6) or (m[1] if m else 0))
        self.duration = num(s.get("duration"))
        cmd = s.get("command")
        self.command = [text(a) for a in cmd[:1000]] if isinstance(cmd, list) else []
        self.job, self.scheduler = text(s.get("job"), 256) or key, text(s.get("scheduler"), 32)
        self.hosts = text(s.get("hosts"), 1 << 16)
        self.nhosts = int(num(s.get("nhosts"), 0, 1e7) or 0)
        self.nranks = int(num(s.get("nranks"), 0, 1e8) or 0)
        self.launcher = text(s.get("launcher"), 256)
        self.exit = integer(s.get("exit"), -1000, 1000)
        self.signal = integer(s.get("signal"), 1, 128)
        self.outcome, self.cause = _verdict(s, self.has_summary, self.exit)
        self.first = first_failure(s.get("first_failure"))

    @property
    def first_failure(self) -> str:
        """'rank 1 on node2: exit code 3', or ''."""
        f = self.first
        return f"rank {f['rank']} on {f['host']}: {f['description']}" if f else ""

    @property
    def state(self) -> str:
        """The one phrase for how it ended (jobenv.rank.verdict.label), or 'no summary'."""
        from jobenv.rank.verdict import label

        return label(self.outcome, self.cause, self.exit, self.signal) if self.has_summary else "no summary"

    @property
    def ident(self) -> str:
        return f"{self.key}/{self.name}"



def integer(value: Any, low: int, high: int) -> Optional[int]:
    """A whole number in [low, high], else None."""
    got = num(value, low, high)
    return None if got is None or got != int(got) else int(got)


def _verdict(s: Dict[str, Any], has_summary: bool, code: Optional[int]) -> Tuple[str, str]:
    """(outcome, cause) as launch recorded them; for a run without a summary (the launch itself
    was killed before it could write one) ("interrupted", "none"); for a version 1 summary, by
    its day's rule."""
    from jobenv.rank.verdict import CAUSES, OUTCOMES

    if not has_summary:
        return "interrupted", "none"
    outcome, cause = s.get("outcome"), s.get("cause")
    if outcome in OUTCOMES and cause in CAUSES:
        return outcome, cause
    expired = s.get("expired") if s.get("expired") in ("timeout", "idle-timeout") else None
    if expired:
        return "interrupted", expired
    if s.get("interrupted") is True or code in _V1_INTERRUPTED_EXITS:
        return "interrupted", "signal"
    return ("ok", "none") if code == 0 else ("failed", "rank" if isinstance(s.get("first_failure"), dict) else "launcher")


def first_failure(ff: Any) -> Optional[Dict[str, Any]]:
    """The summary's first failure, its fields checked: rank, host, how it ended (exit, signal,
    lost, vanished), exit and signal (numbers or None), description (version 1 kept only the
    words, in `exit`)."""
    if not isinstance(ff, dict):
        return None
    words = text(ff.get("description"), 256) or text(ff.get("exit"), 64)
    how = ff.get("how") if ff.get("how") in ("exit", "signal", "lost", "vanished") else None
    return {"rank": integer(ff.get("rank"), 0, 10**8) or 0, "host": text(ff.get("host"), 256), "how": how,
            "exit": integer(ff.get("exit"), -1000, 1000), "signal": integer(ff.get("signal"), 1, 128),
            "description": words}


def noted_log_dir(run_dir: str) -> Optional[str]:
    """The log directory an attempt noted (absolute, printable), else None."""
    got = read_json(os.path.join(run_dir, LOG_DIR), 65536)
    path = got.get("log_dir") if got else None
    return path if isinstance(path, str) and os.path.isabs(path) and path.isprintable() else None


def _entries(d: str, pattern: Callable[[str], Any], warn: Optional[Callable[[str], None]]) -> List[str]:
    """The names in `d` that `pattern` takes and that are real directories; another entry of
    such a name (a link, a FIFO, a file: the ranks write beside their run) gets one line."""
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out = []
    for n in names:
        if not pattern(n):
            continue
        if is_real_dir(os.path.join(d, n)):
            out.append(n)
        elif warn is not None:
            warn(f"skipping {text(os.path.join(d, n))}: not a directory (a link or a file)")
    return out


def scan(env: Optional[Mapping[str, str]] = None, job: Optional[str] = None, summaries: bool = True,
         warn: Optional[Callable[[str], None]] = None) -> List[Run]:
    """Every run of every job (or of the jobs whose key or id is `job`), newest first.
    The runs directory must be the user's own, as the store is (BadRecord otherwise).  An
    entry shaped like a run that is not a directory, or whose name no clock gives, is no
    run: skipped, with one line through `warn` (neither listed nor pruned).  What a run's
    files hold is read as hostile: a field that does not check out reads as absent."""
    from jobenv.core.trust import check_ancestors
    from jobenv.store.paths import check_safe

    base = root(env)
    check_ancestors(base, "the runs directory")
    check_safe(base, True, "runs directory")
    runs = []
    for key in _entries(base, is_key, warn):
        for name in _entries(os.path.join(base, key), run_name, warn):
            path = os.path.join(base, key, name)
            m = run_name(name)
            if m is None or stamp_time(m[0]) is None:
                if warn is not None:
                    warn(f"skipping {text(path)}: not a run directory (its name holds no date)")
                continue
            try:
                mtime = os.lstat(path).st_mtime
            except OSError:
                continue
            spath = os.path.join(path, SUMMARY)
            got = read_json(spath, MAX_SUMMARY_BYTES) if summaries else ({} if os.path.lexists(spath) else None)
            runs.append(Run(key, name, path, got, mtime))
    if job is not None:
        runs = [r for r in runs if job in (r.key, r.job) or r.key.endswith(f"-{job}")]
    return sorted(runs, key=lambda r: (r.started, r.name), reverse=True)


def find(ident: str, env: Optional[Mapping[str, str]] = None, warn: Optional[Callable[[str], None]] = None) -> Run:
    """A run by its name (`<stamp>-<pid>-a<N>`), `<key>/<name>`, or `last`."""
    return pick(scan(env, warn=warn), ident, env)


def pick(runs: Sequence[Run], ident: str, env: Optional[Mapping[str, str]] = None) -> Run:
    """The run `ident` names among `runs` (newest first), as find says."""
    if ident == "last" and runs:
        return runs[0]
    hits = [r for r in runs if ident in (r.name, r.ident)]
    if len(hits) == 1:
        return hits[0]
    if hits:
        raise BadInput(f"run {ident!r} names {len(hits)} runs: give <job key>/<name> "
                       f"({', '.join(r.ident for r in hits[:4])})")
    raise NoRecord(f"no run {text(ident, 200)!r} in {root(env)} (`jobenv runs list` lists them)")


def retention(env: Mapping[str, str]) -> Tuple[int, float]:
    """(runs kept, days kept) from JOBENV_RUNS_KEEP and JOBENV_RUNS_DAYS, checked."""
    from jobenv.core.numparse import parse_uint

    raw_keep, raw_days = env.get("JOBENV_RUNS_KEEP", "").strip(), env.get("JOBENV_RUNS_DAYS", "").strip()
    keep = parse_uint(raw_keep, "JOBENV_RUNS_KEEP", minimum=1, maximum=10**6) if raw_keep else KEEP_RUNS
    days = float(parse_uint(raw_days, "JOBENV_RUNS_DAYS", minimum=1, maximum=36500)) if raw_days else KEEP_DAYS
    return keep, days


def doomed(runs: Sequence[Run], keep: int, days: float, now: float) -> List[Run]:
    """The runs retention removes (`runs` newest first): last written (the directory's
    mtime) more than `days` ago, or past the newest `keep` (a run without a summary only
    when over a day old: it may be running)."""
    out = []
    for i, r in enumerate(runs):
        age = now - r.mtime
        if age > days * 86400 or (i >= keep and (r.has_summary or age > UNFINISHED_GRACE)):
            out.append(r)
    return out


def prune(env: Mapping[str, str], keep: Optional[int] = None, days: Optional[float] = None,
          dry_run: bool = False, warn: Optional[Callable[[str], None]] = None) -> List[Run]:
    """Apply the retention (or the one given); the runs removed."""
    import shutil

    k, d = retention(env)
    gone = doomed(scan(env, summaries=False, warn=warn), k if keep is None else keep, d if days is None else days, time.time())
    for r in gone if not dry_run else []:
        if is_real_dir(r.path):  # rmtree works through directory descriptors: it never follows a link
            shutil.rmtree(r.path, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(r.path))  # the job's directory, once empty
        except OSError:
            pass
    return gone
