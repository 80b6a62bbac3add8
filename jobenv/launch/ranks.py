"""What the ranks left behind: their run directory and log directory, and the phrases the
summaries make of them.

The hosts' ledgers and beats are read by jobenv.rank.ledger (`read`, re-exported here:
`ranks.read(run_dir)` is what the other modules call), how a rank ended by jobenv.rank.ends and
the attempt's verdict by jobenv.rank.verdict (below launch: run history reads them too); the
ranks' logs `rank-<R>.log` in JOBENV_LOG_DIR by `tail`.
"""
from __future__ import annotations

import os
import time

from jobenv.core.errors import one_line
# the API the other modules call: ranks.read(run_dir) and its types
from jobenv.rank.ledger import HostState as HostState, Ledgers as Ledgers, RankState as RankState
from jobenv.rank.ledger import RunState as RunState, read as read

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Callable, List, Optional, Tuple


def make_run_dir(base: str, tag: str) -> str:
    """A new private directory for one launch attempt (ranks on other hosts write here):
    under a directory of the user's own, created by us, so no name in it was planted."""
    from jobenv.store.paths import own_dir

    own_dir(base, "run directory")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(base, f"{stamp}-{os.getpid()}-{tag}")
    os.mkdir(path, 0o700)
    from jobenv.core.hostlist import this_host  # who runs the attempt: `jobenv stacks` finds a live one by it

    write_private(os.path.join(path, "supervisor"), f"{this_host()} {os.getpid()} {time.time():.3f}\n")
    return path


_LOG_HINT = "give --log-dir a directory of your own"


def prepare_log_dir(path: str) -> str:
    """--log-dir: a directory of the user's own (the store's rule: not another user's, not
    writable by others, nothing above it replaceable), created 0700 when missing, without
    the previous launch's rank logs, its earlier attempts' too (the wrapper creates each log
    new, never through an existing name).  Returns the absolute path; BadInput when it is not safe."""
    from jobenv.core.errors import BadInput, BadRecord
    from jobenv.store.paths import own_dir

    path = os.path.abspath(path)
    try:
        own_dir(path, "log directory", _LOG_HINT, _LOG_HINT)
    except BadRecord as exc:
        raise BadInput(str(exc)) from None
    stale, attempts = _previous_logs(path)
    for name in stale:
        try:
            os.unlink(os.path.join(path, name))  # unlink never follows a link
        except FileNotFoundError:
            pass
        except OSError as exc:  # a directory of that name: the rank could not write its log
            raise BadInput(f"log directory {path!r}: cannot remove the previous {name}: {exc.strerror}; "
                           f"remove it or {_LOG_HINT}") from None
    for name in attempts:
        try:
            os.rmdir(os.path.join(path, name))  # left when the user put files of their own in it
        except OSError:
            pass
    return path


def _previous_logs(path: str) -> Tuple[List[str], List[str]]:
    """(rank logs, attempt-N directories) a previous launch left in the log directory `path`;
    the logs of its earlier attempts are named `attempt-N/rank-R.log` (real directories only:
    a link named like one is never followed)."""
    with os.scandir(path) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    logs = [n for n, _ in entries if rank_of(n, "rank-", ("log",)) is not None]
    attempts = [n for n, is_dir in entries if is_dir and _attempt_of(n) is not None]
    for name in attempts:
        try:
            with os.scandir(os.path.join(path, name)) as it:
                logs += [f"{name}/{e.name}" for e in it if rank_of(e.name, "rank-", ("log",)) is not None]
        except OSError:
            pass
    return logs, attempts


def _attempt_of(name: str) -> Optional[int]:
    """N of a directory `attempt-N` in a log directory, else None."""
    num = name[len("attempt-"):]
    ok = name.startswith("attempt-") and 0 < len(num) <= 6 and num.isascii() and num.isdigit()
    return int(num) if ok else None


def set_aside(log_dir: str, attempt: int) -> str:
    """Before a retry: move attempt `attempt`'s rank logs (1 = the first) from `log_dir` into
    `log_dir/attempt-<attempt>/`, made 0700 here (an existing one is refused: not ours), so the
    next attempt's logs never overwrite them.  Returns `log_dir`."""
    from jobenv.core.errors import BadInput

    aside = os.path.join(log_dir, f"attempt-{attempt}")
    try:
        os.mkdir(aside, 0o700)
        with os.scandir(log_dir) as it:
            names = [e.name for e in it if rank_of(e.name, "rank-", ("log",)) is not None]
        for name in names:
            os.rename(os.path.join(log_dir, name), os.path.join(aside, name))  # never follows a link
    except OSError as exc:
        raise BadInput(f"log directory {log_dir!r}: cannot keep attempt {attempt}'s logs in {aside}: "
                       f"{exc.strerror}; {_LOG_HINT}") from None
    return log_dir


def write_private(path: str, text: str) -> None:
    """Write a file that only its owner can read or write, replacing it atomically."""
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def rank_of(name: str, prefix: str, kinds: Tuple[str, ...]) -> Optional[int]:
    """R of a name `<prefix>R.<kind>` with R in ASCII digits (int() refuses '²', which
    isdigit() accepts; the run directory is shared with user code), else None."""
    stem, _, kind = name.rpartition(".")
    num = stem[len(prefix):]
    ok = kind in kinds and stem.startswith(prefix) and 0 < len(num) <= 9 and num.isascii() and num.isdigit()
    return int(num) if ok else None


def lines_of(lines: List[str], family: str, rank: int) -> List[str]:
    """The lines of `rank` in output labelled by `family`'s --label flag (families.py); empty
    when the output carries no labels or the family is not known."""
    from jobenv.runtime.families import BY_NAME, label_rank

    row = BY_NAME.get(family)
    return [line for line in lines if row is not None and label_rank(row, line) == rank]


def host_lost(host: str, silent: List[int], when: Optional[float]) -> str:
    """'host node2 lost: ranks 2,3 stopped reporting at 12:00:01' (one phrasing, live and after)."""
    at = time.strftime(" at %H:%M:%S", time.localtime(when)) if when else ""
    return f"host {host} lost: rank{'s' if len(silent) > 1 else ''} {','.join(map(str, silent))} stopped reporting{at}"


def unfinished(state: RunState, nranks: int, host_of: Callable[[int], Optional[str]]) -> List[str]:
    """One phrase per rank that never finished: started and running, or never started."""
    out = []
    for rank in range(nranks):
        r = state.ranks.get(rank)
        if r is None or r.started is None and r.how is None:
            where = host_of(rank)
            out.append(f"rank {rank} never started" + (f" (placed on {where})" if where else ""))
        elif r.how is None:
            out.append(f"rank {rank} on {r.host} still running")
    return out


def tail(path: str, lines: int = 10, limit: int = 65536) -> List[str]:
    """The last lines of a log, decoded leniently (ranks may print any bytes); nothing
    when it is not a regular file (opened non-blocking: a FIFO named like a log must not
    block the summary)."""
    from jobenv.core.readfile import open_regular

    try:
        fd, st = open_regular(path)  # never opens a FIFO or device planted under that name
    except OSError:
        return []
    try:
        data = os.pread(fd, limit, max(0, st.st_size - limit))
    except OSError:
        return []
    finally:
        os.close(fd)
    text = data.decode("utf-8", "replace").replace("\r", "")
    if not text.strip():
        return []
    return [one_line(line) for line in text.split("\n")[:-1][-lines:]] if text.endswith("\n") else \
        [one_line(line) for line in text.split("\n")[-lines:]]


def compact(items: List[str], most: int = 8) -> str:
    if len(items) <= most:
        return "; ".join(items)
    return "; ".join(items[:most]) + f"; and {len(items) - most} more"
