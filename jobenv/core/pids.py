"""Whether a pid names a live process: the one answer for every reader of a pid another
process wrote down (a writer's temp file, a staging copy's, a launch's `supervisor` file).

`os.kill(pid, 0)` sends nothing and says whether the pid exists.  Its EPERM
(PermissionError) means the process exists and belongs to another user: it is alive, so a
file it may still be writing is never removed on a guess.  Whether a live pid is one of
ours is a second question (`mine=True`): a pid reused by another user's process is not the
launch we wrote down.  A pid that no single process can have (0 or less, which kill()
reads as a process group or every process; one too large for the kernel) is not alive.
"""
import os


def pid_alive(pid: int, mine: bool = False) -> bool:
    """Whether process `pid` exists (another user's included); with `mine`, whether it exists
    and is this user's (its /proc entry's owner)."""
    if pid <= 0:
        return False
    if mine:
        try:
            return os.stat(f"/proc/{pid}").st_uid == os.getuid()
        except (OSError, OverflowError):
            return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # exists, another user's
        return True
    except (ProcessLookupError, OverflowError):
        return False
    return True
