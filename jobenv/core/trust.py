"""Whether a path can be trusted: every directory crossed to reach it is one no other user
can change, judged the way ssh judges `~/.ssh`.

Every directory above the path must be owned by the user or root and not writable by
others unless sticky (like /tmp): otherwise another user could rename a directory away and
put their own in its place between our check and our use.  A symbolic link on the way (a
symlinked /home is common on HPC sites) must be the user's or root's too, since its owner
may repoint it at any time, and then the directories it leads to are judged in turn, link
by link, as the kernel crosses them.  The store (jobenv.store.paths), the stage, run and log
directories, profiles, the rc file and PBS's copy of a job script are all judged by it.
Standard library only: `jobenv get` loads it.
"""
from __future__ import annotations

import os
import stat

from jobenv.core.errors import BadRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

MAX_LINKS = 40  # symbolic links followed on one path, as the kernel allows (then ELOOP)


def _walk(path: str, last: bool = False) -> Tuple[List[Tuple[str, Optional[os.stat_result]]], bool]:
    """Every directory entry the kernel crosses to reach `path`'s directory, in order, each
    with its lstat (None: missing or unreadable, and the walk stops there), and whether too
    many links stopped it.  A symbolic link is listed itself, then each component of what
    it points to, in turn, so a chain of links is judged link by link.  Each name listed
    runs through real directories only (a link met on the way is replaced by its target),
    so an lstat of it, now or in getjobenv's `stat` later, sees that one entry.  `last`:
    `path` itself is crossed too when it is a link (a file written through a link), so
    the links to it and the directories of what they lead to are listed, not the file."""
    todo = os.path.abspath(path).split("/")[1:None if last else -1]
    cur, out, links = "/", [("/", _lstat("/"))], 0
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        entry = os.path.join(cur, name)
        st = _lstat(entry)
        if last and not todo and (st is None or not stat.S_ISLNK(st.st_mode)):
            break  # the file itself (or where it will be): its owner is the caller's to judge
        out.append((entry, st))
        if st is None:
            break
        if not stat.S_ISLNK(st.st_mode):
            cur = entry
            continue
        links += 1
        if links > MAX_LINKS:
            return out, True
        try:
            target = os.readlink(entry)
        except OSError:  # removed since the lstat: nothing further to judge (nor to reach)
            break
        todo[:0] = target.split("/")
        if target.startswith("/"):
            cur = "/"
    return out, False


def _lstat(p: str) -> Optional[os.stat_result]:
    try:
        return os.lstat(p)
    except OSError:
        return None


def dirs_above(path: str) -> List[str]:
    """Every entry check_ancestors judges above `path` (links and what they lead to), each
    once: getjobenv's cached proof re-checks their lstat (jobenv.store.cache)."""
    out: List[str] = []
    for p, _ in _walk(path)[0]:
        if p not in out:
            out.append(p)
    return out


OWN_HINT = "set JOBENV_HOME to a directory of your own"


def check_ancestors(path: str, what: str = "the store", hint: str = OWN_HINT, last: bool = False) -> None:
    """Every entry crossed to reach `path` (each component as written; for a symbolic link,
    the link and then each component of what it points to): owned by you or root, and a
    directory not writable by group/others unless sticky.  A sticky directory (/tmp) is
    safe to cross: only an entry's owner (or root) may rename or remove it there; so a
    link another user owns there is refused (ssh's rule), whatever it points to now: they
    may point it elsewhere at any time.  `last`: `path` is a file to be written, and when
    it is a link it is crossed too (the link and where it leads judged alike)."""
    uid = os.getuid()
    entries, looped = _walk(path, last)
    if looped:
        raise BadRecord(f"too many levels of symbolic links above {what} {path}; {hint}")
    for p, st in entries:
        if st is None:
            continue
        at = f"{what} {p}" if p == os.path.abspath(path) else f"{p}, above {what} {path},"
        if st.st_uid not in (0, uid):
            kind = "a symbolic link owned" if stat.S_ISLNK(st.st_mode) else "owned"
            raise BadRecord(f"{at} is {kind} by uid {st.st_uid}: another user could replace {what}; {hint}")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX and not stat.S_ISLNK(st.st_mode):
            raise BadRecord(f"{at} is writable by others and not sticky "
                            f"(mode {stat.S_IMODE(st.st_mode):o}): another user could replace {what}; "
                            f"fix with: chmod go-w {p}, or {hint}")
