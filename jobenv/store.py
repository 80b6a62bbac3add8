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
import re
import stat
import time
import zlib
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, Union

from .errors import BadRecord
from .record import JobRecord, from_json

SUFFIXES = (".json", ".env", ".hosts")
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp\.(?P<pid>\d+)\.[0-9a-f]+$")


def home(env: Optional[dict] = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("JOBENV_HOME") or os.path.join(os.path.expanduser("~"), ".jobenv")
    return Path(base)


def jobs_dir(env: Optional[dict] = None) -> Path:
    return home(env) / "jobs"


def key_for(scheduler: str, jobid: str) -> str:
    """A file-name-safe key; ids with `[]`, `/` and such get a hash to stay unique."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", jobid).strip(".") or "job"
    if safe != jobid:
        safe = f"{safe}-{zlib.crc32(jobid.encode('utf-8', 'surrogateescape')):08x}"
    return f"{scheduler}-{safe[:150]}"


def check_safe(path: Path, is_dir: bool) -> None:
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


def ensure_dirs(env: Optional[dict] = None) -> Path:
    """Create the store (0700) and check that nobody else can write to it."""
    d = jobs_dir(env)
    for p in (d.parent, d):
        try:
            p.mkdir(mode=0o700)
        except FileExistsError:
            pass
        check_safe(p, is_dir=True)
    return d


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{os.urandom(4).hex()}")
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


def _fsync_dir(d: Path) -> None:
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


def clean_temps(d: Path, max_age: float = 600.0) -> int:
    """Remove temp files left by writers that died (their pid is gone, or they are old)."""
    removed = 0
    now = time.time()
    for entry in os.scandir(d):
        m = _TMP_RE.match(entry.name)
        if not m:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > max_age
            if old or not _pid_alive(int(m.group("pid"))):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            pass
    return removed


def job_lock(lock_path: Path, env: Optional[dict] = None, timeout: float = 60.0):
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
            if time.time() - lock_path.stat().st_mtime > stale:
                lock_path.unlink()
        except OSError:
            pass
        return filelock.SoftFileLock(str(lock_path), timeout=timeout)
    return filelock.FileLock(str(lock_path), timeout=timeout, mode=0o600)


def paths_for(key: str, env: Optional[dict] = None) -> Tuple[Path, Path, Path]:
    d = jobs_dir(env)
    return d / f"{key}.json", d / f"{key}.env", d / f"{key}.hosts"


def write_job(record: JobRecord, env_text: str, hosts_text: Optional[str],
              env: Optional[dict] = None) -> Path:
    """Write hostfile, env file, then JSON (the source of truth) under the job's lock."""
    d = ensure_dirs(env)
    key = key_for(record.scheduler, record.jobid)
    json_path, env_path, hosts_path = paths_for(key, env)
    with job_lock(d / f"{key}.lock", env):
        clean_temps(d)
        if hosts_text is not None:
            _write_atomic(hosts_path, hosts_text.encode("utf-8", "surrogateescape"))
        _write_atomic(env_path, env_text.encode("utf-8", "surrogateescape"))
        _write_atomic(json_path, record.to_json().encode("utf-8", "surrogateescape"))
        _fsync_dir(d)
    return json_path


def update_record(json_path: Path, record: JobRecord, env: Optional[dict] = None) -> None:
    """Rewrite one record's JSON (status changes) under its lock."""
    d = json_path.parent
    with job_lock(d / (json_path.name[:-5] + ".lock"), env):
        _write_atomic(json_path, record.to_json().encode("utf-8", "surrogateescape"))


def load(path: Path) -> JobRecord:
    """Read one record; BadRecord names the file on any defect."""
    check_safe(path, is_dir=False)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise BadRecord(f"{path}: record vanished (removed by another process)") from None
    except OSError as exc:
        raise BadRecord(f"{path}: cannot read record ({exc.strerror})") from None
    return from_json(data.decode("utf-8", "surrogateescape"), str(path))


Loaded = Tuple[Path, Union[JobRecord, BadRecord]]


def iter_records(env: Optional[dict] = None) -> Iterator[Loaded]:
    """Every record in the store, newest first; defective ones come back as BadRecord."""
    d = jobs_dir(env)
    check_safe(d.parent, is_dir=True)
    check_safe(d, is_dir=True)
    try:
        entries = [e for e in os.scandir(d) if e.name.endswith(".json") and not e.name.startswith(".")]
    except FileNotFoundError:
        return
    items: List[Tuple[float, Path]] = []
    for e in entries:
        try:
            items.append((e.stat(follow_symlinks=False).st_mtime, Path(e.path)))
        except OSError:
            continue
    for _, path in sorted(items, key=lambda t: t[0], reverse=True):
        try:
            yield path, load(path)
        except BadRecord as exc:
            yield path, exc


def remove(json_path: Path) -> None:
    """Delete a job's files (JSON first, so readers never see a record without its env)."""
    stem = json_path.name[: -len(".json")]
    for suffix in (".json", ".env", ".hosts", ".lock", ".pid"):
        try:
            os.unlink(json_path.with_name(stem + suffix))
        except FileNotFoundError:
            pass
