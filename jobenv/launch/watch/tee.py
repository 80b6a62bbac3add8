"""`--log-dir` with the terminal still told: the chosen ranks' logs (rank 0 by default, `--tee
RANKS`) are followed while the launch runs and copied to our stdout, so a run that sends every
rank to DIR/rank-<R>.log is not silent where it was started.

The per-rank wrapper writes the logs; this follows them from the launching host, which sees
every log when DIR is on a shared file system (and rank 0's when it runs here, as on the
job's first host).  Logs are opened as the failure summary opens them (readfile.open_regular:
a regular file, never a device or a FIFO planted under a log's name; the directory is the
user's own, ranks.prepare_log_dir).  With more than one rank followed, each line says whose it is.
"""
from __future__ import annotations

import os
import sys
import threading

from jobenv.core.errors import BadInput
from jobenv.core.numparse import parse_uint

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import AbstractSet, BinaryIO, Dict, List, Optional, Set

POLL = 0.2  # seconds between looks at the logs
CHUNK = 1 << 16


def parse_ranks(text: str) -> Optional[Set[int]]:
    """--tee RANKS: `0`, `0,3`, `0-3`, `all` (None: every rank) or `none` (the empty set)."""
    if text == "all":
        return None
    if text == "none":
        return set()
    out: Set[int] = set()
    for part in text.split(","):
        low, dash, high = part.partition("-")
        first = parse_uint(low, "--tee", 10**7)
        last = parse_uint(high, "--tee", 10**7) if dash else first
        if last < first or last - first > 10**5:
            raise BadInput(f"--tee: {part!r} is not a rank range like 0-3")
        out.update(range(first, last + 1))
    return out


class Follower(threading.Thread):
    """Copies what the followed ranks append to their logs to `out`, line by line."""

    def __init__(self, log_dir: str, ranks: List[int], out: BinaryIO) -> None:
        super().__init__(name="jobenv-tee", daemon=True)
        self.log_dir, self.ranks, self.out = log_dir, ranks, out
        self.label = len(ranks) > 1
        self.fds: Dict[int, int] = {}
        self.partial: Dict[int, bytes] = {}
        self.done = threading.Event()

    def _fd(self, rank: int) -> Optional[int]:
        from jobenv.core.readfile import open_regular

        if rank not in self.fds:
            try:
                self.fds[rank], _ = open_regular(os.path.join(self.log_dir, f"rank-{rank}.log"), nofollow=True)
            except (OSError, ValueError):
                return None  # not written yet (or not a regular file: never read)
        return self.fds[rank]

    def _emit(self, rank: int, data: bytes, final: bool) -> None:
        """One rank followed: its bytes as they come (a `\\r` progress bar shows as it moves).
        Several: whole lines, each with its rank; an unfinished line is held (less than CHUNK
        bytes: a longer one goes out in pieces), so memory stays bounded and each byte is copied once
        or twice, never again at every read (a 48 MiB line without a newline took 37 s)."""
        if not self.label:
            if final and self.partial.pop(rank, b""):
                data += b"\n"  # the log ends mid-line: our next line starts on a line of its own
            if data:
                self.out.write(data)
                self.out.flush()
                self.partial[rank] = b"" if data.endswith(b"\n") else b"-"  # only: mid-line or not
            return
        text = self.partial.pop(rank, b"") + data
        cut = len(text) if final else text.rfind(b"\n") + 1
        if len(text) - cut >= CHUNK:
            cut = len(text)
        if text[cut:]:
            self.partial[rank] = text[cut:]
        if cut:
            lines = text[:cut].split(b"\n")
            if not lines[-1]:
                lines.pop()
            prefix = f"[{rank}] ".encode()
            self.out.write(b"".join(prefix + line + b"\n" for line in lines))
            self.out.flush()

    def sweep(self, final: bool = False) -> None:
        for rank in self.ranks:
            fd = self._fd(rank)
            if fd is None:
                continue
            while True:
                data = os.read(fd, CHUNK)
                if not data:
                    break
                self._emit(rank, data, False)
            if final:
                self._emit(rank, b"", True)

    def run(self) -> None:
        try:
            while not self.done.wait(POLL):
                self.sweep()
        except (OSError, ValueError):
            pass  # our stdout closed: the logs keep every byte

    def finish(self) -> None:
        """Stop following, copy what is left, close the logs."""
        self.done.set()
        self.join()
        try:
            self.sweep(final=True)
        except (OSError, ValueError):
            pass
        for fd in self.fds.values():
            os.close(fd)


def start(log_dir: Optional[str], ranks: Optional[AbstractSet[int]], nranks: int) -> Optional[Follower]:
    """Follow the chosen ranks' logs in `log_dir` (None: no --log-dir, nothing to follow)."""
    chosen = sorted(range(nranks) if ranks is None else (r for r in ranks if r < nranks))
    if not log_dir or not chosen or sys.stdout is None:
        return None
    sys.stdout.flush()
    follower = Follower(log_dir, chosen, sys.stdout.buffer)
    follower.start()
    return follower


def stop(follower: Optional[Follower]) -> None:
    if follower is not None:
        follower.finish()
