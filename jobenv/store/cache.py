"""Caches that keep `jobenv get` fast in every new shell, under `$JOBENV_HOME/cache/`.

Nothing here decides anything; each file remembers a verdict `jobenv get` reached and the
exact conditions under which it still holds, so the verdict is reused only while they do:
- `host-<host>.idx`: the record a shell with no job of its own gets on this host (the
  newest on it) and the warnings the choice gave.  Valid while `jobs/` is unchanged
  (every save, update and removal renames an entry in it, which changes its mtime and
  ctime), so `get` with 10,000 records reads one record, not 10,000.
- `state-<key>`: the last liveness verdict of a job and until when to trust it, so most
  new shells fork no `qstat`/`squeue`.
- `host-<host>.sh`: the snippet `getjobenv` (shell/jobenv.sh) sources without Python.
  Its header is the proof: the `stat` line of the store directory, of `jobs/` and of
  the record as `jobenv get` saw them after its checks (owner, mode, symlink, schema,
  truncation, choice among several records, host), the snippet's own size, when the
  liveness verdict was reached and when it expires (a minute at most; a shell whose
  clock reads before the first holds it void), the shell's LOADEDMODULES (the one
  variable of a shell in no job that the plan reads: the modules warning), and the type,
  owner, mode, device and inode of the cache directory (as cache_dir judged it) and of
  every directory above the store that `get` judges (core.trust.dirs_above).  getjobenv
  opens it once and sources it only while one `stat` call (of those paths and of the open
  snippet) prints the same; otherwise it asks `jobenv get`, which rewrites it.
A file is written only when every time stamp it relies on is at least RACY seconds old,
so a change within the same clock tick cannot go unnoticed (git's "racy" rule).
"""
from __future__ import annotations

import os
import stat
import time

from jobenv.store import files as store
from jobenv.core.errors import BadRecord
from jobenv.core.trust import check_ancestors, dirs_above

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Any, Callable, List, Mapping, Optional, Sequence, Tuple

RACY = 2.0
VERDICT_TTL = 60.0
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
MAX_ABOVE = 64  # directories above the store that a proof lists (deeper: no cache)
MAGIC = "# jobenv restore cache 4 (written by `jobenv get` after its checks; do not edit)"


def store_home(env: Mapping[str, str]) -> str:
    return os.path.dirname(store.jobs_dir(env))


def cache_dir(env: Mapping[str, str], create: bool = False) -> Optional[str]:
    """The cache directory, if it is ours alone (else no cache is read or written)."""
    d = os.path.join(store_home(env), "cache")
    if create:
        try:
            os.mkdir(d, 0o700)
        except OSError:
            pass
    try:
        st = os.lstat(d)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        return None
    return d


def host_key(host: str) -> Optional[str]:
    """`host` as a file-name part, or None when it needs escaping (then: no host cache)."""
    if host and len(host) <= 200 and _SAFE.issuperset(host) and not host.startswith("."):
        return host
    return None


def sig(path: str) -> str:
    """The line `stat -c '%F|%u|%a|%d|%i|%h|%s|%Y|%Z' PATH` prints (GNU coreutils), from lstat."""
    try:
        st = os.lstat(path)
    except OSError:
        return "missing"
    m = st.st_mode
    kind = ("directory" if stat.S_ISDIR(m) else "symbolic link" if stat.S_ISLNK(m)
            else ("regular file" if st.st_size else "regular empty file") if stat.S_ISREG(m) else "other")
    return (f"{kind}|{st.st_uid}|{stat.S_IMODE(m):o}|{st.st_dev}|{st.st_ino}|{st.st_nlink}|{st.st_size}|"
            f"{int(st.st_mtime)}|{int(st.st_ctime)}")


def above(path: str) -> str:
    """sig without links, size and times: what the proof holds of a directory above the
    store (type, owner, mode, device, inode), whose times change with every file in $HOME."""
    return sig(path).rsplit("|", 4)[0]


def settled(path: str, now: float) -> bool:
    """Are `path`'s time stamps at least RACY seconds old (a later change will show)?"""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return max(st.st_mtime, st.st_ctime) <= now - RACY


def _dumps(value: object) -> str:
    """JSON for lists of str/int/float (json.dumps would import json.decoder and re)."""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value)) if isinstance(value, float) else str(value)
    out = ['"']
    for ch in str(value):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch < " " or "\ud800" <= ch <= "\udfff" or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _read(path: str) -> Any:
    from jobenv.core.jsonread import loads

    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return None
        with open(path, "rb") as f:
            return loads(f.read().decode("utf-8", "surrogateescape"))
    except (OSError, ValueError, RecursionError):
        return None


def _write(path: str, text: str) -> None:
    try:
        store.write_atomic(path, text.encode("utf-8", "surrogateescape"))
    except OSError:
        pass  # a cache: a read-only or full store only makes the next shell slower


def _index_path(env: Mapping[str, str], host: str, create: bool = False) -> Optional[str]:
    d, key = cache_dir(env, create), host_key(host)
    return os.path.join(d, f"host-{key}.idx") if d and key else None


def read_index(env: Mapping[str, str], host: str) -> Optional[Tuple[str, str, List[str]]]:
    """(record path, why, warnings) remembered for this host, while `jobs/` is unchanged."""
    p = _index_path(env, host)
    data = _read(p) if p else None
    if not isinstance(data, list) or len(data) != 5 or data[0] != 1:
        return None
    jobs = store.jobs_dir(env)
    if data[1] != sig(jobs):
        return None
    path, why, warnings = data[2], data[3], data[4]
    if not (isinstance(path, str) and isinstance(why, str) and isinstance(warnings, list)):
        return None
    return path, why, [w for w in warnings if isinstance(w, str)]


def write_index(env: Mapping[str, str], host: str, path: str, why: str, warnings: Sequence[str],
                now: float) -> None:
    jobs = store.jobs_dir(env)
    if not settled(jobs, now):
        return
    p = _index_path(env, host, create=True)
    if p:
        _write(p, _dumps([1, sig(jobs), path, why, list(warnings)]) + "\n")


def read_verdict(env: Mapping[str, str], key: str, now: float) -> Optional[Tuple[str, str, float]]:
    """(state, reason, until) of a recent liveness verdict, or None once it has expired."""
    d = cache_dir(env)
    data = _read(os.path.join(d, f"state-{key}")) if d else None
    if (isinstance(data, list) and len(data) == 4 and data[0] == 1 and data[1] in ("live", "ended", "unknown")
            and isinstance(data[2], str) and isinstance(data[3], (int, float)) and now < data[3] <= now + 2 * VERDICT_TTL):
        return data[1], data[2], float(data[3])
    return None


def write_verdict(env: Mapping[str, str], key: str, state: str, reason: str, until: float) -> None:
    d = cache_dir(env, create=True)
    if d:
        _write(os.path.join(d, f"state-{key}"), _dumps([1, state, reason, until]) + "\n")


def snippet_path(env: Mapping[str, str], host: str, create: bool = False) -> Optional[str]:
    d, key = cache_dir(env, create), host_key(host)
    return os.path.join(d, f"host-{key}.sh") if d and key else None


def proof(env: Mapping[str, str], record_path: str, until: float) -> Optional[List[str]]:
    """The header lines getjobenv checks, or None when the snippet must not be cached."""
    home = store_home(env)
    jobs = store.jobs_dir(env)
    rel = os.path.relpath(record_path, jobs)
    if (not os.path.isabs(home) or rel.startswith("..") or not _SAFE.union("/").issuperset(rel)
            or not os.path.isabs(record_path)):
        return None
    now = time.time()
    paths = (home, jobs, record_path)
    if not all(settled(p, now) for p in paths):
        return None
    # The plan also relied on files the proof does not stat (the saved venv, staged copies,
    # the `launch` program): a snippet serves for VERDICT_TTL at most, even for a local job
    # whose verdict holds a day, so a vanished venv is noticed within a minute.
    until = min(until, now + VERDICT_TTL)
    modules = env.get("LOADEDMODULES", "")
    up = _above(jobs)
    cache = _cache_sig(env)
    if "\n" in modules or "\r" in modules or up is None or cache is None:
        return None
    # `since`: a shell whose clock reads earlier (stepped back) holds the verdict void.
    return [MAGIC, "# size %010d", f"# since {int(now)}", f"# until {int(until)}", f"# record {rel}",
            *(f"# stat {sig(p)}" for p in paths), f"# cache {cache}", "# modules " + modules.replace("%", "%%"),
            *up, "# end"]


def _around(paths: List[str], passes: Callable[[], bool]) -> Optional[List[str]]:
    """`above` of each of `paths`, taken before and after `passes()` judges them, so what a
    proof records is what passed (a change in between voids it); None: no cache."""
    sigs = [above(p) for p in paths]
    if "missing" in sigs or not passes() or sigs != [above(p) for p in paths]:
        return None
    return sigs


def _cache_sig(env: Mapping[str, str]) -> Optional[str]:
    """`above` of the cache directory, as cache_dir's check passed it (another user who
    could write there could swap the snippet), or None: no cache."""
    sigs = _around([os.path.join(store_home(env), "cache")], lambda: cache_dir(env) is not None)
    return sigs[0] if sigs else None


def _ancestors_pass(jobs: str) -> bool:
    try:
        check_ancestors(jobs)
    except BadRecord:
        return False
    return True


def _above(jobs: str) -> Optional[List[str]]:
    """`# above SIG|PATH` for every directory core.trust.check_ancestors judges, as that
    check passed them, or None: no cache."""
    dirs = dirs_above(jobs)
    if len(dirs) > MAX_ABOVE or any(c in p for p in dirs for c in "\n\r"):
        return None
    sigs = _around(dirs, lambda: _ancestors_pass(jobs))
    return None if sigs is None else [f"# above {s}|{p}".replace("%", "%%") for s, p in zip(sigs, dirs)]


def write_snippet(env: Mapping[str, str], host: str, header: List[str], body: str) -> None:
    """Write the cached snippet unless the same one is there already."""
    p = snippet_path(env, host, create=True)
    if not p:
        return
    head = "\n".join(header) + "\n"
    size = len((head % 0).encode("utf-8", "surrogateescape")) + len(body.encode("utf-8", "surrogateescape"))
    text = head % size + body
    try:
        with open(p, "rb") as f:
            if f.read(len(text) + 1) == text.encode("utf-8", "surrogateescape") and sig(p).startswith(
                    f"regular file|{os.getuid()}|600|1|{size}|"):
                return
    except OSError:
        pass
    _write(p, text)


def drop_snippet(env: Mapping[str, str], host: str) -> None:
    p = snippet_path(env, host)
    if p:
        try:
            os.unlink(p)
        except OSError:
            pass


MAX_BUILDS = 16  # interpreters remembered by `mpi-builds` (the newest first)


def read_builds(env: Mapping[str, str], key: str) -> Optional[List[str]]:
    """`launch`'s remembered answer of an interpreter's MPI probe (jobenv.launch.plan.mpibuilds),
    as [package, flavor, ...], while `key` (the interpreter and the mtimes of its package
    directories, the probe's caller's condition) is the same; None otherwise."""
    d = cache_dir(env)
    data = _read(os.path.join(d, "mpi-builds")) if d else None
    if not (isinstance(data, list) and len(data) == 2 and data[0] == 1 and isinstance(data[1], list)):
        return None
    for entry in data[1]:
        if isinstance(entry, list) and entry[:1] == [key] and len(entry) % 2 == 1:
            found = entry[1:]
            return found if all(isinstance(v, str) for v in found) else None
    return None


def write_builds(env: Mapping[str, str], key: str, found: Sequence[str], paths: Sequence[str], now: float) -> None:
    """Remember `found` for `key` when every path it depends on is settled (RACY)."""
    if not all(settled(p, now) for p in paths):
        return
    d = cache_dir(env, create=True)
    if not d:
        return
    old = _read(os.path.join(d, "mpi-builds"))
    keep = [e for e in (old[1] if isinstance(old, list) and len(old) == 2 and isinstance(old[1], list) else [])
            if isinstance(e, list) and e[:1] != [key] and all(isinstance(v, str) for v in e)]
    _write(os.path.join(d, "mpi-builds"), _dumps([1, [[key, *found], *keep][:MAX_BUILDS]]) + "\n")
