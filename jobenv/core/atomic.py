"""Atomic file replacement, writer temp files that name their host, and a per-job lock.

Temp files are `.<name>~tmp~<host>~<pid>~<random>`: the store is often a home directory
shared by every node, so a writer's pid alone says nothing on another node.  A temp file
is judged left by a dead writer only when it comes from this host and its pid is gone,
or when it is older than `max_age` whatever its host (a save takes milliseconds).

The lock is our own (flock, or O_EXCL with JOBENV_LOCK=soft for file systems where flock
does not work across nodes) so that `jobenv rm` can delete the lock file while holding
it: a waiter that then gets the lock on the deleted file notices that the name now points
elsewhere (or nowhere) and tries again, so two writers never both hold "the" lock.
"""
from __future__ import annotations

import os
import time

from jobenv.core.errors import BadInput, JobenvError
from jobenv.core.pids import pid_alive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional, Tuple

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


def host_tag() -> str:
    """This host's name, reduced to characters that are safe and unambiguous in a file name."""
    return "".join(c if c in _SAFE else "-" for c in os.uname().nodename)[:64] or "host"


def tmp_name(path: str) -> str:
    head, name = os.path.split(path)
    return os.path.join(head, f".{name}~tmp~{host_tag()}~{os.getpid()}~{os.urandom(4).hex()}")


def tmp_owner(name: str) -> Optional[Tuple[str, int]]:
    """(host, pid) of a temp file name written by tmp_name, else None."""
    if not name.startswith("."):
        return None
    parts = name.split("~")
    if len(parts) != 5 or parts[1] != "tmp" or not parts[3].isascii() or not parts[3].isdigit():
        return None
    return parts[2], int(parts[3])


def clean_temps(d: str, max_age: float = 600.0) -> int:
    """Remove temp files left by dead writers: this host's whose pid is gone, anyone's
    older than max_age.  Another node's fresh temp file is that node's save in flight."""
    removed = 0
    now = time.time()
    me = host_tag()
    for entry in os.scandir(d):
        owner = tmp_owner(entry.name)
        if owner is None:
            continue
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > max_age
            if old or (owner[0] == me and not pid_alive(owner[1])):
                os.unlink(entry.path)
                removed += 1
        except OSError:
            pass
    return removed


def write_atomic(path: str, data: bytes, mtime: Optional[float] = None, mode: int = 0o600,
                 exact_mode: bool = False) -> None:
    """Replace `path` with `data`: temp file, fsync, optional mtime, rename.  On any failure
    (ENOSPC half way, a signal) the temp file is removed and `path` is untouched.

    The file gets `mode` less the umask, as open(2) gives it: group and other bits are never
    set past the umask (a report, a batch script may hold a token).  Owner bits the umask took
    from `mode` are put back (a program jobenv runs must stay runnable).  `exact_mode`: `mode`
    exactly, for a file that had it before (the rc file `jobenv init --install` edits)."""
    tmp = tmp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            have = os.fstat(f.fileno()).st_mode & 0o7777
            want = mode & 0o7777 if exact_mode else have | (mode & 0o700)
            if want != have:
                os.fchmod(f.fileno(), want)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mtime is not None:
            os.utime(tmp, (mtime, mtime))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_output(path: str, data: bytes, executable: bool = False) -> bool:
    """Write a file the user named (`report --html FILE`, `submit --script-out FILE`); True
    when that was this process's standard output (`/dev/stdout`), which then holds `data`
    (standard error likewise gets it for `/dev/stderr`, written where the stream is).

    A regular file (or none yet) is replaced whole (write_atomic: mode 0666, 0777 for
    `executable`, less the umask).  What is not a regular file is written in place, never
    renamed over (as root, a rename put a regular file at /dev/null): standard output, a
    FIFO, a character device such as /dev/null or a terminal, directly or through links,
    when it is the user's own or root's (a FIFO another user planted in /tmp would read
    the data).  A link to a regular file, a link to nothing, a directory, a block device
    or a socket is refused with one line (BadInput): a link is not followed to a file
    that would be replaced."""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is None or stat.S_ISREG(st.st_mode):
        write_atomic(path, data, mode=0o777 if executable else 0o666)
        return False
    try:
        target = os.stat(path)
    except OSError:
        raise BadInput(f"{path}: a symbolic link to nothing: name the file itself") from None
    for std in (1, 2):  # /dev/stdout, /dev/stderr, /dev/fd/N: whatever the stream is, a regular file too
        if _is_open_as(target, std):
            import sys

            (sys.stdout if std == 1 else sys.stderr).flush()
            _write_all(std, data)
            return std == 1
    if stat.S_ISREG(target.st_mode):
        raise BadInput(f"{path} is a symbolic link to the regular file {os.path.realpath(path)}: name that "
                       "file itself (jobenv replaces a file whole, never through a link)")
    if not (stat.S_ISFIFO(target.st_mode) or stat.S_ISCHR(target.st_mode)):
        raise BadInput(f"{path} is neither a regular file, a FIFO nor a character device: refusing to write it")
    if target.st_uid not in (os.geteuid(), 0):
        raise BadInput(f"{path} belongs to uid {target.st_uid}, not to you: refusing to write into it")
    nofollow = 0 if stat.S_ISLNK(st.st_mode) else os.O_NOFOLLOW
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC | nofollow)
    try:
        if not os.path.samestat(os.fstat(fd), target):  # replaced since: judge it again
            raise BadInput(f"{path} changed while jobenv opened it: refusing to write it")
        _write_all(fd, data)
    finally:
        os.close(fd)
    return False


def _is_open_as(st: os.stat_result, fd: int) -> bool:
    try:
        return os.path.samestat(st, os.fstat(fd))
    except OSError:  # started with that stream closed
        return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def fsync_dir(d: str) -> None:
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


def lock_settings(env: Mapping[str, str]) -> Tuple[bool, float]:
    """(soft, stale seconds) from JOBENV_LOCK and JOBENV_LOCK_STALE, checked."""
    soft = env.get("JOBENV_LOCK", "").lower() == "soft"
    raw = env.get("JOBENV_LOCK_STALE", "").strip()
    stale = 120.0
    if raw:
        try:
            stale = float(raw) if raw.isascii() and "_" not in raw else float("nan")
        except ValueError:
            stale = float("nan")
        if not (stale == stale and 1 <= stale <= 86400):
            raise BadInput(f"JOBENV_LOCK_STALE must be a number of seconds from 1 to 86400, not {raw!r}")
    return soft, stale


def flock_current(path: str) -> Optional[int]:
    """An fd holding an exclusive flock on the file named `path` now, or None while another
    process holds it.  The file may be removed (`jobenv rm`, a watcher leaving) as we lock it,
    and a lock on a removed file guards nothing: then the file there now is locked instead."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        try:
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


class JobLock:
    """Exclusive per-job writer lock; see the module docstring."""

    def __init__(self, path: str, env: Optional[Mapping[str, str]] = None, timeout: float = 60.0) -> None:
        self.path, self.timeout = path, timeout
        self.soft, self.stale = lock_settings(os.environ if env is None else env)
        self.fd: Optional[int] = None

    def __enter__(self) -> JobLock:
        deadline = time.monotonic() + self.timeout
        delay = 0.002
        while not self._try():
            if time.monotonic() > deadline:
                raise JobenvError(f"timed out after {self.timeout:g} s waiting for the lock {self.path} "
                                  "(another jobenv is writing this job; with JOBENV_LOCK=soft, a dead "
                                  "writer's lock goes after JOBENV_LOCK_STALE seconds)")
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self

    def _try(self) -> bool:
        if self.soft:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                try:
                    if time.time() - os.stat(self.path).st_mtime > self.stale:
                        os.unlink(self.path)
                except OSError:
                    pass
                return False
            os.write(fd, f"{host_tag()} {os.getpid()} {time.time():.0f}\n".encode())
            os.close(fd)
            return True
        self.fd = flock_current(self.path)
        return self.fd is not None

    def __exit__(self, *exc: object) -> None:
        if self.soft:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        elif self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def unlink_while_held(self) -> None:
        """Remove the lock file (jobenv rm); safe because waiters re-check the name."""
        if not self.soft:
            try:
                os.unlink(self.path)
            except OSError:
                pass
