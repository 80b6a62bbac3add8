"""Reading a file whose name comes from the environment or a record (a nodefile, HOSTFILE,
an env file to import, JOBENV_HOSTFILE): the one way jobenv does it.

Such a name may point anywhere: a FIFO (opening or reading it blocks for ever), a device
(/dev/zero never ends; merely opening a tape drive or /dev/watchdog acts), a directory, a
file of gigabytes.  So the name is stat'ed first and anything but a regular file is
refused before it is opened; then it is opened with O_NONBLOCK|O_NOCTTY (should a FIFO or
a terminal be swapped in after the stat, the open neither blocks nor takes it as the
controlling terminal) and the *open descriptor* is checked to be that same regular file
(device and inode: the name could be swapped in between; a file replaced by rename, as a
record is by a concurrent save, is simply checked again), and at most `limit` bytes are
read; a file that is, or grows, larger is refused rather than cut.  Symbolic links are followed: a nodefile or a
HOSTFILE copy is often reached through one, and the file is only read, as the user, as
data that is validated line by line afterwards.  Every failure is one BadInput line.

Standard library only and nothing but `os`, `stat` (loaded at interpreter start-up) and
jobenv.core.errors: this runs in every rank that reads JOBENV_HOSTFILE.
"""
from __future__ import annotations

import os
import stat

from jobenv.core.errors import BadInput

TYPE_CHECKING = False  # `import typing` costs ~5 ms; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Tuple

# A nodefile or hostfile holds one host per line (a PBS nodefile one per MPI slot): room
# for jobenv's limit of 1,000,000 hosts at the longest legal name (253 bytes + newline).
MAX_HOSTFILE_BYTES = 256 << 20

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class Refused(OSError):
    """Not a regular file, or larger than the limit; str() says which."""


class NotRegular(Refused):
    """A FIFO, device, directory or socket."""


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def open_regular(path: str, nofollow: bool = False) -> Tuple[int, os.stat_result]:
    """A descriptor open on the regular file `path`, and its fstat: the name is checked
    before the open (a device is never opened) and the descriptor after it (the same file).
    `nofollow`: `path` itself may not be a symbolic link (its caller judged every link)."""
    for _ in range(3):
        named = os.lstat(path) if nofollow else os.stat(path)
        if not stat.S_ISREG(named.st_mode):
            raise NotRegular(f"is {_kind(named.st_mode)}, not a regular file")
        fd = os.open(path, _OPEN_FLAGS | (os.O_NOFOLLOW if nofollow else 0))
        try:
            st = os.fstat(fd)
        except OSError:
            os.close(fd)
            raise
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == (named.st_dev, named.st_ino):
            return fd, st
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(f"is {_kind(st.st_mode)}, not a regular file")
    raise Refused("was replaced again and again while being opened")


def read_bytes(path: str, limit: int) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them.  Raises NotRegular
    or Refused (too large) for anything else, and the OSError of open or read as it is
    (FileNotFoundError...)."""
    fd, st = open_regular(path)
    try:
        return read_open(fd, st, limit)
    finally:
        os.close(fd)


def read_open(fd: int, st: os.stat_result, limit: int) -> bytes:
    """The bytes of the file open on `fd` (open_regular's), at most `limit` of them, else Refused."""
    if st.st_size > limit:
        raise Refused(f"is {st.st_size:,} bytes, more than the {limit >> 20} MiB such a file may be")
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, min(max(st.st_size, 1 << 16), limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise Refused(f"grew past {limit >> 20} MiB while being read")
    return b"".join(chunks)


def read_regular(path: str, limit: int, what: str, missing: str = "") -> str:
    """The text of the regular file `path` (undecodable bytes kept as surrogates), at most
    `limit` bytes; BadInput naming `what` and `path` for anything else (`missing` is added
    to the message when the file does not exist)."""
    where = f"{what} {path!r}"
    try:
        return read_bytes(path, limit).decode("utf-8", "surrogateescape")
    except Refused as exc:
        raise BadInput(f"{where} {exc}: refusing to read it") from None
    except FileNotFoundError:
        dangling = " (a dangling symbolic link)" if os.path.islink(path) else ""
        raise BadInput(f"{where} does not exist{dangling}{missing}") from None
    except OSError as exc:
        raise BadInput(f"cannot read {where}: {exc.strerror}") from None
