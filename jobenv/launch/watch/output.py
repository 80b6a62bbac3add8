"""Copy the launcher's output to ours without ever letting our reader stall the launch.

The supervisor reads the launcher's pipes as fast as they fill; each of our outputs gets
a writer thread with a queue.  A slow reader (a pager, a full pipe nobody drains, a
terminal stopped with Ctrl-S) then holds up only that thread: the ranks, the clocks and
the signal forwarding go on.  Past LIMIT bytes queued the rest is dropped and counted
(--log-dir keeps every byte); an output that cannot be written at all (closed, a reader
gone: EPIPE, EBADF, EIO) is dropped from then on, silently.  A reader gone (EPIPE) is
also told to the supervisor (`on_epipe`), which ends the launch as `cmd | head` expects
of a plain launcher (mpiexec dies of SIGPIPE): nobody reads what the ranks would print.
"""
from __future__ import annotations

import errno
import os
import threading
import time
from collections import deque

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Deque, Optional

LIMIT = 64 << 20  # bytes queued per output before the rest is dropped


def ensure_std_fds() -> None:
    """Open /dev/null on any of 0, 1, 2 that is closed (`jobenv launch >&-`): a pipe made
    now must not take fd 1, and output for a closed stdout is output for nobody."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _write_all(fd: int, data: bytes) -> Optional[OSError]:
    """Write everything (blocking as long as the reader takes); the error that ends it."""
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:  # someone set O_NONBLOCK on the file we share
            time.sleep(0.01)
            continue
        except OSError as exc:
            return exc
        view = view[n:]
    return None


class Sink:
    """One output (fd) written by its own thread from a bounded queue."""

    def __init__(self, fd: int, on_epipe: Optional[Callable[[], None]] = None) -> None:
        self.fd, self.on_epipe = fd, on_epipe
        self.queue: Deque[bytes] = deque()
        self.queued = 0
        self.dropped = 0  # bytes not written because the reader was too slow
        self.failed: Optional[OSError] = None
        self.closing = False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, name=f"jobenv-output-{fd}", daemon=True)
        self.thread.start()

    def put(self, data: bytes) -> None:
        with self.cond:
            if self.failed is not None:
                return
            if self.queued + len(data) > LIMIT:
                self.dropped += len(data)
                return
            self.queue.append(data)
            self.queued += len(data)
            self.cond.notify()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue and not self.closing:
                    self.cond.wait()
                if not self.queue:
                    return
                data = self.queue.popleft()
            err = _write_all(self.fd, data)
            with self.cond:
                self.queued -= len(data)
                if err is not None:
                    self.failed = err
                    self.queue.clear()
                    self.queued = 0
            if err is not None and err.errno == errno.EPIPE and self.on_epipe is not None:
                self.on_epipe()

    def drain(self, give_up: Callable[[], bool]) -> None:
        """Wait until everything queued is written (or cannot be), unless `give_up()` turns
        true first (a forwarded signal: the user wants the launch over, not its output; the
        --timeout: a reader that never reads must not hold the launch past it)."""
        with self.cond:
            self.closing = True
            self.cond.notify()
        while self.thread.is_alive() and not give_up():
            self.thread.join(0.2)
        with self.cond:
            if self.thread.is_alive():  # given up: what is still queued is lost, and counted
                self.dropped += self.queued
