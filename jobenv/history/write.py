"""Writing run history (jobenv.history.runs reads, lists and prunes it): an attempt's summary and
its noted log directory, written by launch; the program's start-up phases, by its rank 0.

All of it is advisory: nothing here may change a launch's verdict, so a failure to write
is a lost file (and at most one warning line), never an exception out of these functions.
"""
from __future__ import annotations

import os
import time

from jobenv.core.errors import JobenvError
from jobenv.history.runs import LOG_DIR, PHASES, SUMMARY, SUMMARY_VERSION, is_real_dir, prune

TYPE_CHECKING = False  # `import typing` costs ~5 ms; launch imports this module on every run
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional, Sequence

    from jobenv.rank.verdict import Verdict


def record(run_dir: str, rec: Any, command: Sequence[str], plan: Any, attempt: int, verdict: Verdict,
           started: float, env: Mapping[str, str], warn: Optional[Callable[[str], None]] = None) -> None:
    """launch, at an attempt's end: write its summary (with the attempt's verdict, as decided:
    jobenv.rank.verdict), then prune the history.  History is
    advisory, so nothing here can change the launch's verdict: whatever the ranks left in
    the run directories (they write there) or a full disk does, the summary is lost with
    one line through `warn`, and the launch's exit code stands."""
    try:
        _record(run_dir, rec, command, plan, attempt, verdict, started, env)
    except Exception as exc:  # advisory: no failure of it may become the launch's
        if warn is not None:
            from jobenv.core.errors import one_line

            warn(f"run history not recorded for {run_dir}: {one_line(str(exc) or type(exc).__name__)}")


def _record(run_dir: str, rec: Any, command: Sequence[str], plan: Any, attempt: int, verdict: Verdict,
            started: float, env: Mapping[str, str]) -> None:
    import json

    from jobenv.core.atomic import write_atomic
    from jobenv.core.hostlist import compress

    size = plan.size
    summary = {"version": SUMMARY_VERSION, "command": list(command), "job": rec.jobid, "scheduler": rec.scheduler,
               "hosts": compress(list(size.hosts)), "nhosts": len(size.hosts), "nranks": size.nranks,
               "ppn": size.ppn, "launcher": os.path.basename(plan.launcher[0]) if plan.launcher else "",
               "attempt": attempt, "started": started, "duration": round(time.time() - started, 3),
               **verdict.to_json()}
    write_atomic(os.path.join(run_dir, SUMMARY), json.dumps(summary).encode())
    try:
        prune(env)
    except JobenvError:  # a bad JOBENV_RUNS_KEEP or an unsafe runs directory: no pruning
        pass


def note_log_dir(run_dir: str, log_dir: Optional[str]) -> None:
    """launch, as an attempt starts: the --log-dir (absolute) its ranks write `rank-<R>.log`
    in, for `jobenv logs`; None (no --log-dir): nothing.  A full disk only loses the note."""
    import json

    from jobenv.core.atomic import write_atomic

    if log_dir:
        try:
            write_atomic(os.path.join(run_dir, LOG_DIR), json.dumps({"log_dir": log_dir}).encode())
        except OSError:
            pass


def write_phases(rows: Sequence[Mapping[str, Any]], env: Optional[Mapping[str, str]] = None) -> bool:
    """Rank 0 of a program that timed every rank's start-up (the selftest) leaves them in
    its run directory: rows of {"rank", "host", "phases": {name: seconds}}.  False when the
    program runs outside `jobenv launch` (no JOBENV_RUN_DIR) or cannot write there."""
    import json

    from jobenv.core.atomic import write_atomic

    run_dir = (os.environ if env is None else env).get("JOBENV_RUN_DIR", "")
    if not run_dir or not is_real_dir(run_dir):
        return False
    keep = [{"rank": r.get("rank"), "host": r.get("host"), "phases": r.get("phases")} for r in rows]
    try:
        write_atomic(os.path.join(run_dir, PHASES), json.dumps({"version": 1, "ranks": keep}).encode())
    except (OSError, TypeError, ValueError):  # a full disk, a value JSON cannot hold
        return False
    return True
