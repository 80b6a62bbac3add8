"""`jobenv logs`: the batch output and each rank's log of a job, once or followed.

Which files: the submission's own (its -o file, and -e where the scheduler writes one) or
the one the scheduler names (Slurm StdOut=, PBS Output_Path), and the rank logs each launch
wrote (`rank-<R>.log` in its --log-dir: jobenv.batch.runlogs finds them from run history).
Every file is opened as hostile input (jobenv.core.readfile: a regular file, no FIFO or device,
no symbolic link: those are skipped with a warning), read in bounded chunks, and printed
through errors.visible (a log holds whatever the program printed: escape sequences are
shown, never acted on).  Follow mode is tail -F over the batch output and the newest
launch's logs, new rank logs included, until it has ended (then one last read).
"""
from __future__ import annotations

import os
import stat
import sys
import time
from typing import Callable, Dict, List, Optional, Set, Tuple, Union

from jobenv.core.errors import visible

CHUNK = 1 << 20  # bytes read from one file per pass
FIRST = 8 << 20  # at most this much of a file's end is printed at first
POLL = 0.5


class Note(str):
    """A line printed as it is, once, among the files (a launch's heading, or why it kept
    no rank logs): not a file name."""


Item = Union[str, Note]


def rank_logs(log_dir: str, rank: Optional[int]) -> List[str]:
    """The `rank-<R>.log` files in `log_dir`, in rank order (rank `rank`'s only, when given)."""
    from ..launch.ranks import rank_of

    try:
        names = os.listdir(log_dir)
    except OSError:
        return []
    found = sorted((r, n) for n in names
                   if (r := rank_of(n, "rank-", ("log",))) is not None and (rank is None or r == rank))
    return [os.path.join(log_dir, n) for _, n in found]


def _read(path: str, offset: int, limit: int) -> Tuple[bytes, int]:
    """New bytes of `path` from `offset` (at most `limit`), and the offset after them; a
    file that shrank (truncated, replaced) is read again from its start."""
    from jobenv.core.readfile import open_regular

    try:
        fd, st = open_regular(path, nofollow=True)
    except OSError:
        return b"", offset
    try:
        if st.st_size < offset:
            offset = 0
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, limit)
    finally:
        os.close(fd)
    return data, offset + len(data)


class Follower:
    """Offsets and unfinished last lines per file; prints whole lines under a header."""

    def __init__(self, write: Callable[[str], None], warn: Optional[Callable[[str], None]] = None) -> None:
        self.write, self.warn = write, warn
        self.offsets: Dict[str, int] = {}
        self.partial: Dict[str, bytes] = {}
        self.current: Optional[str] = None
        self.noted: Set[str] = set()  # notes printed and files refused: once each

    def _emit(self, path: str, data: bytes) -> None:
        if not data:
            return
        if self.current != path:
            self.write(f"{'' if self.current is None else chr(10)}==> {visible(path)} <==\n")
            self.current = path
        text = data.decode("utf-8", "replace")
        self.write("".join(visible(line) + "\n" for line in text.split("\n")[:-1]) +
                   (visible(text.rsplit("\n", 1)[-1]) if not text.endswith("\n") else ""))

    def _note(self, note: Note) -> None:
        if note not in self.noted:
            self.noted.add(note)
            self.write(f"{'' if self.current is None else chr(10)}{visible(note)}\n")
            self.current = ""

    def _first(self, path: str) -> bool:
        """A file first seen starts at its last FIRST bytes; anything but a regular file (a
        link, a FIFO: planted) is refused, with a warning once."""
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):
            if self.warn and path not in self.noted:
                self.warn(f"skipping {visible(path)}: not a regular file (a link, FIFO or device is never read)")
            self.noted.add(path)
            return False
        self.offsets[path] = max(0, st.st_size - FIRST)
        return True

    def poll(self, paths: List[Item], final: bool = False) -> None:
        for path in paths:
            if isinstance(path, Note):
                self._note(path)
                continue
            if path not in self.offsets and not self._first(path):
                continue
            while True:
                data, self.offsets[path] = _read(path, self.offsets[path], CHUNK)
                buf = self.partial.pop(path, b"") + data  # the partial is under CHUNK: bounded
                cut = len(buf) if final else buf.rfind(b"\n") + 1
                if len(buf) - cut >= CHUNK:  # a line longer than CHUNK goes out in pieces, copied once
                    cut = len(buf)
                self._emit(path, buf[:cut])
                if buf[cut:]:
                    self.partial[path] = buf[cut:]
                if len(data) < CHUNK:
                    break


def _stdout(text: str) -> None:
    sys.stdout.write(text)


def show(files: Callable[[], List[Item]], ended: Callable[[], bool], follow: bool,
         write: Callable[[str], None] = _stdout, poll: float = POLL, check_every: float = 2.0,
         later: Optional[Callable[[], List[Item]]] = None, warn: Optional[Callable[[str], None]] = None) -> int:
    """Print the files and notes (and, following, what the files of `later`, else the same
    ones, gain) until the job has ended; the number of files and notes printed."""
    f = Follower(write, warn)
    f.poll(files(), final=not follow)
    last = time.monotonic()
    while follow:
        sys.stdout.flush()
        time.sleep(poll)
        done = False
        if time.monotonic() - last >= check_every:
            done, last = ended(), time.monotonic()
        f.poll((later or files)(), final=done)
        if done:
            break
    sys.stdout.flush()
    return len(f.offsets) + len([n for n in f.noted if isinstance(n, Note)])
