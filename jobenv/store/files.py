"""Where records live, and how a save is written and read as one unit.

Layout, in `$JOBENV_HOME/jobs/` (default `~/.jobenv`, which HPC sites share between login
and compute nodes), per job `<key>`:

    <key>.json              the record: the commit point of a save
    <key>@<sha>.hosts       the hostfile that save wrote  (record field `hostfile`)
    <key>@<sha>.env         the sourceable env file       (record field `env_file`)

Why the JSON is the commit point (and not a generation directory swapped by a rename):
the companions are named by a hash of their content, written completely (temp, fsync,
rename) *before* the JSON that names them, and never changed after.  One rename of the
JSON switches a reader from one whole save to the next; a crash (SIGKILL at any
instruction), ENOSPC or a read-only file system before that rename leaves the previous
JSON naming the previous, still present, files.  A reader opens the JSON, then the files
it names, so it can never pair files of two saves; if a save replaced them in between it
finds one missing and starts over.  The hostfile's name depends only on the hosts, so a
re-save of the same job keeps the path that running shells and launchers already hold.
A directory swap would need a symlink (which the store refuses) or two renames.

Writers (save, status updates, rm, clean) hold the job's lock; files that no record names
any more are removed only when older than a grace period, so a reader in flight, or a
save on another node whose lock did not hold, never loses a file it was given.
"""
from __future__ import annotations

import os

from jobenv.core.atomic import JobLock, clean_temps, fsync_dir, write_atomic
from jobenv.core.errors import BadInput, BadRecord
from jobenv.core.hostlist import hostfile_text
from jobenv.store.record import JobRecord, from_json
from jobenv.store.paths import check_safe, ensure_dirs, home, jobs_dir, open_jobs, open_store, runs_dir, write_error

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Set, Tuple, Union

    Loaded = Tuple[str, Union[JobRecord, BadRecord]]

__all__ = ["home", "jobs_dir", "runs_dir", "check_safe", "ensure_dirs", "open_store", "open_jobs", "key_for",
           "paths_for", "hostfile_path", "job_lock", "write_job", "update", "update_status", "load",
           "iter_records", "remove", "write_atomic", "clean_temps"]

_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
KEY_MAX = 150
GRACE = 120.0  # seconds an unnamed companion file is kept for readers in flight
MAX_RECORD_BYTES = 256 << 20


def key_for(scheduler: str, jobid: str) -> str:
    """A file-name-safe key, unique per (scheduler, job id).

    Ids with characters outside [A-Za-z0-9._-] get a hash of the id (crc32, as before, so
    existing keys stay), and ids longer than KEY_MAX are cut *then* given a sha256 suffix,
    so two long ids never share a file set.  (write_job also refuses a key that holds
    another job's record.)
    """
    safe = "".join(c if c in _KEY_CHARS else "_" for c in jobid).strip(".") or "job"
    raw = jobid.encode("utf-8", "surrogateescape")
    if len(safe) + 9 > KEY_MAX:
        import hashlib

        safe = f"{safe[:KEY_MAX - 17]}-{hashlib.sha256(raw).hexdigest()[:16]}"
    elif safe != jobid:
        import zlib

        safe = f"{safe}-{zlib.crc32(raw):08x}"
    return f"{scheduler}-{safe}"


def paths_for(key: str, env: Optional[Mapping[str, str]] = None) -> Tuple[str, str, str]:
    """(record JSON, version-1 env file, version-1 hostfile) of a key.  Only the JSON path is
    fixed now: a version-2 record names its env file and hostfile (`env_file`, `hostfile`)."""
    d = jobs_dir(env)
    return tuple(os.path.join(d, key + suffix) for suffix in (".json", ".env", ".hosts"))  # type: ignore


def _companion(key: str, text: str, suffix: str) -> str:
    import hashlib

    return f"{key}@{hashlib.sha256(text.encode('utf-8', 'surrogateescape')).hexdigest()[:16]}{suffix}"


def hostfile_path(key: str, hosts: List[str], env: Optional[Mapping[str, str]] = None) -> str:
    """Where a save of `hosts` writes its hostfile (the same path for the same hosts): named
    by the hash of its text.  Save asks once and records it (the launch line names it too);
    write_job writes the record's `hostfile`, never computing the name again."""
    return os.path.join(jobs_dir(env), _companion(key, hostfile_text(hosts), ".hosts"))


def job_lock(lock_path: str, env: Optional[Mapping[str, str]] = None, timeout: float = 60.0) -> JobLock:
    """A per-job writer lock: flock by default, O_EXCL when JOBENV_LOCK=soft (NFS/Lustre
    mounts where flock is unreliable); a soft lock older than JOBENV_LOCK_STALE seconds
    (default 120) is taken as left by a dead writer."""
    return JobLock(lock_path, env, timeout)


def _stem(json_path: str) -> str:
    return json_path[: -len(".json")]


def _companions(d: str, key: str) -> List[str]:
    """Names of the companion files of `key` (exactly `<key>@<16 hex>.env|.hosts`)."""
    out = []
    prefix = key + "@"
    for name in os.listdir(d):
        if name.startswith(prefix):
            rest = name[len(prefix):]
            h, dot, suffix = rest.partition(".")
            if dot and suffix in ("env", "hosts") and len(h) == 16:
                out.append(name)
    return out


def _gc(d: str, key: str, keep: Set[str], grace: float) -> None:
    import time

    now = time.time()
    for name in _companions(d, key):
        if name in keep:
            continue
        try:
            p = os.path.join(d, name)
            if now - os.lstat(p).st_mtime >= grace:
                os.unlink(p)
        except OSError:
            pass


def write_job(record: JobRecord, env_text: str, env: Optional[Mapping[str, str]] = None) -> str:
    """Commit a save: companions first, then the JSON naming them (see the module doc).
    The hostfile goes where the record says (save's `hostfile_path` of these very hosts)."""
    d = ensure_dirs(env)
    key = key_for(record.scheduler, record.jobid)
    json_path = os.path.join(d, key + ".json")
    keep = set()
    try:
        with job_lock(os.path.join(d, key + ".lock"), env):
            clean_temps(d)
            _check_owner(json_path, record)
            if record.hostfile is not None:
                write_atomic(record.hostfile, hostfile_text(record.hosts).encode("utf-8", "surrogateescape"))
                keep.add(os.path.basename(record.hostfile))
            record.env_file = _companion(key, env_text, ".env")
            keep.add(record.env_file)
            write_atomic(os.path.join(d, record.env_file), env_text.encode("utf-8", "surrogateescape"))
            fsync_dir(d)  # the companions are on disk before the record that names them
            write_atomic(json_path, record.to_json().encode("utf-8", "surrogateescape"), record.created_at)
            fsync_dir(d)
            _gc(d, key, keep, GRACE)
    except OSError as exc:
        raise write_error(exc, f"the record in {d}") from None
    return json_path


def _check_owner(json_path: str, record: JobRecord) -> None:
    """Refuse to overwrite a record of another job that shares the key.  Only the two
    names are read (validating a 100,000-host record again would double a save's time)."""
    from jobenv.core.jsonread import loads

    try:
        old = loads(_read(json_path).decode("utf-8", "surrogateescape"))
    except (BadRecord, ValueError, RecursionError):
        return  # missing, unreadable or not a file: a new save replaces it
    if not isinstance(old, dict) or not isinstance(old.get("jobid"), str):
        return
    if (old.get("scheduler"), old["jobid"]) != (record.scheduler, record.jobid):
        raise BadInput(f"{json_path} holds job {old['jobid']!r}, not {record.jobid!r}: refusing to overwrite it")


def update(json_path: str, change: Callable[[JobRecord], None], env: Optional[Mapping[str, str]] = None
           ) -> JobRecord:
    """The one writer of a saved record: re-read it, `change` it in place, replace it, under
    the job's lock, so a save in between is never overwritten.  The file keeps its saved
    time as mtime (list, get's newest-record rule): an update never reorders records."""
    try:
        with job_lock(_stem(json_path) + ".lock", env):
            rec = load(json_path)
            change(rec)
            write_atomic(json_path, rec.to_json().encode("utf-8", "surrogateescape"), rec.created_at)
    except OSError as exc:
        raise write_error(exc, json_path) from None
    return rec


def update_status(json_path: str, changes: Dict[str, Any], env: Optional[Mapping[str, str]] = None,
                  drop: Tuple[str, ...] = ()) -> JobRecord:
    """Merge `changes` into a record's status and remove the keys in `drop` (update)."""
    def change(rec: JobRecord) -> None:
        for k in drop:
            rec.status.pop(k, None)
        rec.status.update(changes)

    return update(json_path, change, env)


def load(path: str) -> JobRecord:
    """Read one record; BadRecord names the file on any defect (or on an unsafe store)."""
    open_jobs(os.path.dirname(os.path.abspath(path)))  # once per process: none can skip it
    check_safe(path, is_dir=False)
    return from_json(_read(path).decode("utf-8", "surrogateescape"), path)


def _read(path: str) -> bytes:
    """A record, read as every file named by the environment or a record is
    (jobenv.core.readfile: non-blocking, a regular file, at most MAX_RECORD_BYTES): a FIFO
    there (JOBENV_RECORD names any path) is refused as unsafe instead of blocking."""
    from jobenv.core.readfile import NotRegular, Refused, read_bytes

    try:
        return read_bytes(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        raise BadRecord(f"{path}: record vanished (removed by another process)", kind="gone") from None
    except Refused as exc:  # not a regular file: unsafe (never deleted as corrupt); too large: corrupt
        raise BadRecord(f"{path}: record refused: it {exc}",
                        kind="unsafe" if isinstance(exc, NotRegular) else "corrupt") from None
    except OSError as exc:
        raise BadRecord(f"{path}: cannot read record ({exc.strerror})", kind="corrupt") from None


def iter_records(env: Optional[Mapping[str, str]] = None) -> Iterator[Loaded]:
    """Every record, most recently saved first (a record's mtime is its saved time; readers
    that need exact order sort by `created_at`); defective ones come back as BadRecord."""
    d = open_store(env)
    try:
        entries = [e for e in os.scandir(d) if e.name.endswith(".json") and not e.name.startswith(".")]
    except FileNotFoundError:
        return
    items: List[Tuple[float, str]] = []
    for e in entries:
        try:
            items.append((e.stat(follow_symlinks=False).st_mtime, e.path))
        except OSError:
            continue
    items.sort(key=lambda t: t[0], reverse=True)
    for _, path in items:
        try:
            yield path, load(path)
        except BadRecord as exc:
            yield path, exc


def remove(json_path: str, env: Optional[Mapping[str, str]] = None) -> None:
    """Delete a job's files under its lock (JSON first, so no reader finds a record
    without its files; then everything the key owns, whatever the record's state)."""
    d, name = os.path.split(json_path)
    key = name[: -len(".json")]
    try:
        with job_lock(os.path.join(d, key + ".lock"), env) as lock:
            for p in [json_path] + [os.path.join(d, n) for n in _companions(d, key)] + \
                    [os.path.join(d, key + s) for s in (".env", ".hosts", ".pid", ".watch.log")]:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
            lock.unlink_while_held()
    except OSError as exc:
        raise write_error(exc, json_path) from None
