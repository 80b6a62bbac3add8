"""Where the store is, and whether it is safe to read code from and write records into.

A record defines a `launch` function that the user's shell runs, so the store is checked
the way ssh checks `~/.ssh`: the store directories themselves must be real directories
owned by the user and writable by nobody else, and every directory above them must be
owned by the user or root and not writable by others unless sticky (like /tmp): otherwise
another user could rename the store away and put their own in its place between our
check and our write.  A symbolic link on the way (a symlinked /home is common on HPC
sites) must be the user's or root's too, since its owner may repoint it at any time, and
then the directories it leads to are judged in turn, link by link, as the kernel crosses them
(that walk is jobenv.core.trust's: the stage, log and run directories and PBS's copy of a job
script are judged by it too).
"""
from __future__ import annotations

import errno
import os
import stat

from jobenv.core.errors import BadRecord, JobenvError
from jobenv.core.trust import OWN_HINT, check_ancestors

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional, Set

WRITABLE_HINT = "set JOBENV_HOME to a writable directory"


def home(env: Optional[Mapping[str, str]] = None) -> str:
    """The store's root, always absolute (a relative JOBENV_HOME is taken from the cwd now,
    so every path written into a record stays valid from any other directory)."""
    env = os.environ if env is None else env
    return os.path.abspath(env.get("JOBENV_HOME") or os.path.join(os.path.expanduser("~"), ".jobenv"))


def jobs_dir(env: Optional[Mapping[str, str]] = None) -> str:
    return os.path.join(home(env), "jobs")


def bin_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """Where `jobenv save` writes the `launch` program (jobenv.launch.plan.executable); the
    restore plan puts it first on PATH."""
    return os.path.join(home(env), "bin")


def runs_dir(key: str, env: Optional[Mapping[str, str]] = None) -> str:
    """A job's launch runs (rank states, hostfiles), one directory per attempt below it."""
    return os.path.join(home(env), "runs", key)


LAUNCH_PROGRAM = "launch"  # the program's name in bin_dir


def check_safe(path: str, is_dir: bool, what: str = "", hint: str = OWN_HINT) -> None:
    """Refuse a store directory or record (or, named by `what`, another directory jobenv
    trusts) owned by another user, a symlink, or writable by group/others (injection
    risk).  A missing path passes: callers handle absence."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    what = what or ("store directory" if is_dir else "record")
    uid = os.getuid()
    if st.st_uid != uid:
        raise BadRecord(f"{what} {path} is owned by uid {st.st_uid}, not you (uid {uid}); "
                        f"refusing it: {hint}")
    if stat.S_ISLNK(st.st_mode):
        raise BadRecord(f"{what} {path} is a symbolic link; refusing it")
    if is_dir and not stat.S_ISDIR(st.st_mode):
        raise BadRecord(f"{what} {path} is not a directory")
    if st.st_mode & 0o022:
        raise BadRecord(f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                        f"fix with: chmod go-w {path}")


def own_dir(path: str, what: str = "store directory", hint: str = OWN_HINT, write_hint: str = WRITABLE_HINT
            ) -> None:
    """Make `path` a directory of the user's own, by the rules above: check what is above
    it, create each missing level 0700, and refuse any level that another user owns or
    could write to, or that is a link (ssh's rule for ~/.ssh)."""
    path = os.path.abspath(path)
    check_ancestors(path, f"the {what}", hint)
    missing = []
    p = path
    while p != "/" and not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise write_error(exc, f"the {what} {p}", write_hint) from None
        check_safe(p, True, what, hint)
    check_safe(path, True, what, hint)


_opened: Set[str] = set()


def open_jobs(d: str, again: bool = False) -> str:
    """The jobs directory `d`, checked by the rules above: it and the store's home above it
    yours alone, every directory above them safe.  This is the one place the store is
    judged: every reader (`get` and its cached paths, list/show/clean, doctor, the runtime)
    opens it through here (store.load, store.iter_records), so none can skip it.  Once per
    process for a store that exists; a missing one passes (callers handle absence) and is
    judged again the next time, since another user could create it meanwhile.  `again`:
    judge it anew (the runtime's detect(), which a long-lived process may call many times)."""
    if again:
        _opened.discard(d)
    if d not in _opened:
        h = os.path.dirname(d)
        check_ancestors(h)
        check_safe(h, is_dir=True)
        check_safe(d, is_dir=True)
        if os.path.isdir(d):
            _opened.add(d)
    return d


def open_store(env: Optional[Mapping[str, str]] = None) -> str:
    """Open the store of `env` for reading (open_jobs); returns the jobs directory."""
    return open_jobs(jobs_dir(env))


def write_error(exc: OSError, what: str, hint: str = WRITABLE_HINT) -> JobenvError:
    """One line for a failed write: read-only or not ours, or full (the old save stays)."""
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return JobenvError(f"cannot write {what}: {exc.strerror}; {hint}")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return JobenvError(f"cannot write {what}: {exc.strerror}; the previous save (if any) is unchanged")
    return JobenvError(f"cannot write {what}: {exc.strerror or exc}")


def ensure_dirs(env: Optional[Mapping[str, str]] = None) -> str:
    """Create the store (each missing directory 0700) after checking what is above it, then
    check that nobody else can write to it.  Returns the jobs directory."""
    d = jobs_dir(env)
    own_dir(os.path.dirname(d))
    own_dir(d)
    _opened.add(d)  # own_dir judged both by open_jobs's rules
    return d
