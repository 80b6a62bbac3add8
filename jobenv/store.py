"""Where records live, and how they are written and read safely.

Layout: `$JOBENV_HOME/jobs/<key>.{json,env,hosts}` (default `~/.jobenv`, which HPC sites
share between login and compute nodes), one set per job so concurrent jobs coexist.
Writers take a per-job lock and replace files atomically (temp + fsync + rename);
readers take no lock: a rename is atomic, so they see the old or the new file, never a
torn one.  The store refuses directories and files that another user could have written,
because a record defines a `launch` function that the user's shell will run.
"""
from __future__ import annotations

import os
import stat
import time

from .errors import BadRecord
from .record import JobRecord, from_json

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Iterator, List, Optional, Tuple, Union

    Loaded = Tuple[str, Union[JobRecord, BadRecord]]

# Paths are plain strings here: pathlib costs ~3 ms to import on the `get` path.
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def home(env: Optional[dict] = None) -> str:
    env = os.environ if env is None else env
    return env.get("JOBENV_HOME") or os.path.join(os.path.expanduser("~"), ".jobenv")


def jobs_dir(env: Optional[dict] = None) -> str:
    return os.path.join(home(env), "jobs")


def key_for(scheduler: str, jobid: str) -> str:
    """A file-name-safe key; ids with `[]`, `/` and such get a hash to stay unique."""
    import zlib

    safe = "".join(c if c in _KEY_CHARS else "_" for c in jobid).strip(".") or "job"
    if safe != jobid:
        safe = f"{safe}-{zlib.crc32(jobid.encode('utf-8', 'surrogateescape')):08x}"
    return f"{scheduler}-{safe[:150]}"


def check_safe(path: str, is_dir: bool) -> None:
    """Refuse paths owned by another user or writable by group/others (injection risk)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    what = "store directory" if is_dir else "record"
    uid = os.getuid()
    if st.st_uid != uid:
        raise BadRecord(f"{what} {path} is owned by uid {st.st_uid}, not you (uid {uid}); "
                        "refusing it: set JOBENV_HOME to a directory of your own")
    if stat.S_ISLNK(st.st_mode):
        raise BadRecord(f"{what} {path} is a symbolic link; refusing it")
    if st.st_mode & 0o022:
        raise BadRecord(f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                        f"fix with: chmod go-w {path}")


def ensure_dirs(env: Optional[dict] = None) -> str:
    """Create the store (0700) and check that nobody else can write to it."""
    d = jobs_dir(env)
    for p in (os.path.dirname(d), d):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        check_safe(p, is_dir=True)
    return d


def _tmp_name(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, f".{name}.tmp.{os.getpid()}.{os.urandom(4).hex()}")


def _tmp_pid(name: str) -> Optional[int]:
    """The writer's pid in a temp file name `.<file>.tmp.<pid>.<hex>`, else None."""
    parts = name.rsplit(".", 3)
    if len(parts) == 4 and name.startswith(".") and parts[1] == "tmp" and parts[2].isdigit():
        return int(parts[2])
    return None


def _write_atomic(path: str, data: bytes) -> None:
    tmp = _tmp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _fsync_dir(d: str) -> None:
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_temps(d: str, max_age: float = 600.0) -> int:
    """Remove temp files left by writers that died (their pid is gone, or they are old)."""
    removed = 0
    now = time.time()
    for entry in os.scandir(d):
        pid = _tmp_pid(entry.name)
        if pid is None:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > max_age
            if old or not _pid_alive(pid):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            pass
    return removed


def job_lock(lock_path: str, env: Optional[dict] = None, timeout: float = 60.0):
    """A per-job writer lock: flock by default, a soft (O_EXCL) lock when JOBENV_LOCK=soft.

    flock is unreliable on some NFS/Lustre mounts; the soft lock works there and a lock
    file older than JOBENV_LOCK_STALE seconds (default 120) is taken as left by a dead
    writer and removed.
    """
    import filelock  # only writers pay for this import

    env = os.environ if env is None else env
    if env.get("JOBENV_LOCK", "").lower() == "soft":
        stale = float(env.get("JOBENV_LOCK_STALE", "120"))
        try:
            if time.time() - os.stat(lock_path).st_mtime > stale:
                os.unlink(lock_path)
        except OSError:
            pass
        return filelock.SoftFileLock(str(lock_path), timeout=timeout)
    return filelock.FileLock(str(lock_path), timeout=timeout, mode=0o600)


def paths_for(key: str, env: Optional[dict] = None) -> Tuple[str, str, str]:
    d = jobs_dir(env)
    return tuple(os.path.join(d, key + suffix) for suffix in (".json", ".env", ".hosts"))  # type: ignore


def write_job(record: JobRecord, env_text: str, hosts_text: Optional[str],
              env: Optional[dict] = None) -> str:
    """Write hostfile, env file, then JSON (the source of truth) under the job's lock."""
    d = ensure_dirs(env)
    key = key_for(record.scheduler, record.jobid)
    json_path, env_path, hosts_path = paths_for(key, env)
    with job_lock(os.path.join(d, key + ".lock"), env):
        clean_temps(d)
        if hosts_text is not None:
            _write_atomic(hosts_path, hosts_text.encode("utf-8", "surrogateescape"))
        _write_atomic(env_path, env_text.encode("utf-8", "surrogateescape"))
        _write_atomic(json_path, record.to_json().encode("utf-8", "surrogateescape"))
        _fsync_dir(d)
    return json_path


def update_status(json_path: str, changes: dict, env: Optional[dict] = None) -> JobRecord:
    """Merge `changes` into a record's status: re-read, change, replace, all under the job's
    lock, so a `jobenv save` of the same job in between is never overwritten."""
    with job_lock(json_path[: -len(".json")] + ".lock", env):
        rec = load(json_path)
        rec.status.update(changes)
        _write_atomic(json_path, rec.to_json().encode("utf-8", "surrogateescape"))
    return rec


def load(path: str) -> JobRecord:
    """Read one record; BadRecord names the file on any defect."""
    check_safe(path, is_dir=False)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise BadRecord(f"{path}: record vanished (removed by another process)") from None
    except OSError as exc:
        raise BadRecord(f"{path}: cannot read record ({exc.strerror})") from None
    return from_json(data.decode("utf-8", "surrogateescape"), path)


def iter_records(env: Optional[dict] = None) -> Iterator[Loaded]:
    """Every record in the store, newest first; defective ones come back as BadRecord."""
    d = jobs_dir(env)
    check_safe(os.path.dirname(d), is_dir=True)
    check_safe(d, is_dir=True)
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
    for _, path in sorted(items, key=lambda t: t[0], reverse=True):
        try:
            yield path, load(path)
        except BadRecord as exc:
            yield path, exc


def remove(json_path: str) -> None:
    """Delete a job's files (JSON first, so readers never see a record without its env)."""
    stem = json_path[: -len(".json")]
    for suffix in (".json", ".env", ".hosts", ".lock", ".pid", ".watch.log"):
        try:
            os.unlink(stem + suffix)
        except FileNotFoundError:
            pass
