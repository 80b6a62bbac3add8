"""The bad-host ledger of a job: each host a failover retired, with its evidence.

One JSON file beside the job's run directories (`<runs>/bad-hosts.json`, jobenv.store.files.runs_dir),
replaced atomically under the job's lock so that two launches of one job never lose each
other's entries.  `jobenv launch` leaves the hosts listed out (unless --hosts names them) and
`jobenv show` lists them.  The file is read as hostile: entries that are not what this module
writes are skipped, and a file that is not a ledger at all is reported and ignored.
"""
from __future__ import annotations

import json
import os
import time

from jobenv.core.atomic import JobLock, write_atomic
from jobenv.core.errors import visible
from jobenv.core.hostlist import is_valid_host

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Optional

NAME = "bad-hosts.json"
MAX_BYTES = 1 << 20
MAX_ENTRIES = 1000  # the newest kept: a ledger grows by one entry per failover
MAX_AT = 1e10  # a time localtime can name (year 2286)
_TEXT = {"host": 253, "how": 200, "evidence": 10, "run": 200, "why": 300}


def path(runs: str) -> str:
    return os.path.join(runs, NAME)


def _entry(item: Any) -> Optional[Dict[str, Any]]:
    """One entry as this module writes it, else None."""
    if not isinstance(item, dict):
        return None
    out: Dict[str, Any] = {}
    for key, most in _TEXT.items():
        value = item.get(key, "")
        if not isinstance(value, str) or len(value) > most:
            return None
        out[key] = value
    at, rank = item.get("at"), item.get("rank")
    if not is_valid_host(out["host"]) or not isinstance(at, (int, float)) or isinstance(at, bool) or \
            not 0 <= at <= MAX_AT:  # NaN fails too: `describe` gives it to localtime
        return None
    out["at"] = float(at)
    out["rank"] = rank if isinstance(rank, int) and not isinstance(rank, bool) and rank >= 0 else None
    return out


def load(runs: str, warn: Callable[[str], None]) -> List[Dict[str, Any]]:
    """The ledger's entries, oldest first; none when there is no ledger, and a warning (then
    none) when the file is not one."""
    from jobenv.core.readfile import read_bytes

    where = path(runs)
    try:
        data = json.loads(read_bytes(where, MAX_BYTES).decode("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, RecursionError) as exc:
        warn(f"bad-host ledger {where} cannot be read ({visible(str(exc))[:200]}): ignoring it; remove it")
        return []
    items = data.get("retired") if isinstance(data, dict) else None
    if not isinstance(items, list):
        warn(f"bad-host ledger {where} is not a ledger: ignoring it; remove it")
        return []
    return [e for e in map(_entry, items) if e is not None]


def add(runs: str, entry: Dict[str, Any], env: Dict[str, str], warn: Callable[[str], None]) -> None:
    """Append one entry (host, rank, how, evidence, run, why; `at` is now)."""
    entry = dict(entry, at=round(time.time(), 3))
    with JobLock(path(runs) + ".lock", env):
        items = (load(runs, warn) + [entry])[-MAX_ENTRIES:]
        text = json.dumps({"version": 1, "retired": items}, indent=1) + "\n"
        write_atomic(path(runs), text.encode("utf-8"))


def retired(entries: List[Dict[str, Any]]) -> List[str]:
    return list(dict.fromkeys(e["host"] for e in entries))


def describe(e: Dict[str, Any]) -> str:
    """One line for an entry: 'node2: signal 9 (SIGKILL) of rank 2, named; run X at T'."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["at"]))
    rank = f" of rank {e['rank']}" if e.get("rank") is not None else ""
    return visible(f"{e['host']}: {e['how']}{rank}, {e['evidence']}; run {e['run']} at {when}")
