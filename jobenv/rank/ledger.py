"""Reading the hosts' ledgers: what every rank did, from one file per host.

One ledger per host in JOBENV_RUN_DIR, `host-<H>.ledger` (<H>: the kernel's node name,
jobenv/rank/keeper.py's host_key), lines appended by one write each (< LINE_BYTES: appends of
several processes never interleave), complete once they end in a newline:
  start R KPID KSTART PID PSTART EPOCH   the rank keeper started the program (KPID: the keeper,
                                         PID: the program; *START: start times in clock ticks
                                         after boot, so a pid is never taken for a reused one)
  end R exit:N|signal:S EPOCH            the keeper saw the program end (waitpid: exact)
  lost R EPOCH                           the host agent saw the keeper vanish without an `end`
  ack SEQ VERB EPOCH                     the host agent carried out request SEQ
  hook R PID START EPOCH                 the rank's Python hook armed in process PID
  clean R EPOCH                          that Python's main ended and its atexit callbacks ran
and the host agent (jobenv/rank/agent.py) touches `host-<H>.beat` every BEAT_S (utime: its mtime
moves, the directory's does not) and, after each beat in which the host's ledger grew, creates
`news/<H>`.  Reading is
tolerant: a line can be half-written, the directory is shared with user code (a FIFO or a huge
file under a ledger's name), so only regular files are read (jobenv.core.readfile), at most
LEDGER_BYTES of each per read, and a line that does not parse is skipped.  `Ledgers` reads
incrementally: only what was appended since is read.

Two ways to read, one state.  `poll` reads everything (every ledger stat'ed, every beat): one-off
readers (`jobenv stacks`, the summary) and the launch's last look.  `step` is the supervisor's
once-a-second poll, which must not cost a look at every host when nothing happened (1,000 hosts:
2,000 stats a second; 10,000: 20,000 on the shared file system).  News comes by `news/`: a
host's agent creates `news/<H>` after its host's ledger grew (a rank's `end` wakes the agent at
once; `hook`, `clean` and its own `lost`/`ack` lines within a beat), and `step` lists `news/`
(one small directory: an open, two getdents, a close when it is empty), removes each entry and
only then reads that host's ledger, so a line appended after the removal makes a new entry: no
news is ever lost, whatever the timing, and no clock or mtime granularity is trusted.  A
per-run change file appended by every host was the other candidate; appends from many hosts
to one file are not atomic on NFS (an overwritten line is a lost news), and a directory entry
is.  Liveness cannot come as news (a dead host says nothing): `step` also stats the beats of
STEP_HOSTS hosts in turn, so every host is looked at every ceil(hosts / STEP_HOSTS) polls; a
rotation starts with a directory listing that finds hosts whose agent never announced them
(their ledgers are read then).  Per quiet poll: the `news/` listing plus STEP_HOSTS stats plus
1/rotation of a listing: O(1) in hosts; the price is a lost host named up to
ceil(hosts / STEP_HOSTS) s later (jobenv.launch.watch.live).
"""
from __future__ import annotations

import os
import stat

from .lines import parse

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Tuple

LEDGER_BYTES = 4 << 20  # read from one ledger per poll (8 ranks write ~1 KiB): a flood is skipped
LINE_BYTES = 512  # the wrapper's lines are shorter (appends of that size never interleave)
NEWS = "news"  # the directory of news/<H> entries (jobenv/rank/agent.py's NEWS)
STEP_HOSTS = 100  # beats stat'ed per `step`: a host is looked at every ceil(hosts / 100) polls


class RankState:
    __slots__ = ("rank", "host", "started", "how", "code", "signal", "ended", "pid", "wrapper_pid", "hook_pid",
                 "hook_start", "clean", "clean_pid", "lost")

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.host: Optional[str] = None
        self.started: Optional[float] = None
        # how it ended, as integers (never words): "exit" with `code`, "signal" with `signal` (the
        # keeper's waitpid, exact), "lost" (the agent saw its keeper vanish without an end),
        # "vanished" (no end and no agent left to tell: jobenv.rank.verdict); None: no end yet
        self.how: Optional[str] = None
        self.code: Optional[int] = None
        self.signal: Optional[int] = None
        self.ended: Optional[float] = None
        self.pid: Optional[int] = None  # the program's
        self.wrapper_pid: Optional[int] = None  # the rank keeper's (jobenv/rank/keeper.py)
        # the rank's running hooked Python, the one the host agent sends the dump signal: the newest
        # `hook` line's pid and start time (clock ticks after boot), None once that Python wrote
        # `clean` (it is exiting) or when the line has no start time (an older hook's: not signalled)
        self.hook_pid: Optional[int] = None
        self.hook_start: Optional[int] = None
        self.clean = False  # the hook saw the (newest hooked Python's) main finish (atexit)
        # the pid of the Python that wrote `clean`: the excuse for a teardown abort holds only when it
        # is the program the keeper started and saw end (not `python3 prep.py && exec ./solver`)
        self.clean_pid: Optional[int] = None
        self.lost = False

    @property
    def failed(self) -> bool:
        return self.how is not None and not (self.how == "exit" and self.code == 0)

    @property
    def status(self) -> Optional[int]:
        """The exit code this end stands for, as a shell or torchrun reports it: N for an exit,
        128+S for signal S; None for an end that has none (lost, vanished) or no end yet."""
        return self.code if self.how == "exit" else 128 + self.signal if self.signal is not None else None


def set_end(r: RankState, status: str, when: Optional[float]) -> None:
    """Rank `r` ended as the keeper's `exit:N` or `signal:S` says (as parse checked it), at `when`."""
    how, _, value = status.partition(":")
    r.how, r.ended = how, when
    r.code, r.signal = (int(value), None) if how == "exit" else (None, int(value))


class HostState:
    __slots__ = ("name", "beat", "ranks", "acks")

    def __init__(self, name: str) -> None:
        self.name = name
        self.beat: Optional[float] = None  # mtime of host-<H>.beat: the agent's last beat
        self.ranks: List[int] = []
        self.acks: Dict[int, float] = {}  # request seq -> when this host's agent carried it out


class RunState:
    def __init__(self) -> None:
        self.ranks: Dict[int, RankState] = {}
        self.hosts: Dict[str, HostState] = {}


def _apply(state: RunState, host: HostState, line: str) -> None:
    """One ledger line into `state`; a line that does not parse (jobenv.rank.lines) changes nothing."""
    parsed = parse(line)
    if parsed is None:
        return
    kind, num, mid, when = parsed
    if kind == "ack":
        host.acks[num] = when
        return
    r = state.ranks.get(num)
    if r is None:
        r = state.ranks[num] = RankState(num)
    if r.host != host.name:
        r.host = host.name
        host.ranks.append(num)
    if kind == "start":  # start R KPID KSTART PID PSTART EPOCH
        r.wrapper_pid, r.pid, r.started = int(mid[0]), int(mid[2]), when
    elif kind == "end":  # exit:N | signal:S, both checked by parse
        set_end(r, mid[0], when)
    elif kind == "hook":  # the rank's next Python (`prep.py; train.py`) supersedes the last
        r.hook_pid, r.hook_start, r.clean = int(mid[0]), int(mid[1]), False
    elif kind == "clean":
        r.clean, r.clean_pid, r.hook_pid, r.hook_start = True, r.hook_pid, None, None
    elif kind == "lost":
        r.lost = True
        if r.how is None:
            r.how, r.ended = "lost", when


class Ledgers:
    """The run directory's ledgers, read incrementally: each `poll` reads what was appended
    since the last one (a partial last line waits for its newline) and stats the beats."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.state = RunState()
        self._seen: Dict[str, Tuple[Tuple[int, int], int, bytes]] = {}  # name -> (dev, ino), offset, partial
        self._turn: List[str] = []  # the hosts of this rotation of `step`'s beat stats
        self._at = 0  # the next of them
        self.changed = False  # a line was applied since the caller last cleared it

    def step(self, hosts: int = STEP_HOSTS) -> List[str]:
        """The supervisor's poll: read the ledgers of the hosts with news, stat the beats of the
        next `hosts` hosts (a new rotation starts with a directory listing); the hosts whose
        beats were stat'ed."""
        self._news()
        if self._at >= len(self._turn):
            self._discover()
            self._turn, self._at = sorted(self.state.hosts), 0
        turn = self._turn[self._at:self._at + hosts]
        self._at += hosts
        for name in turn:
            self._beat(self.state.hosts[name])
        return turn

    def reread(self, name: str) -> None:
        """Read host `name`'s ledger now (news its agent could not give: it may be dead)."""
        host = self.state.hosts.get(name)
        if host is not None:
            self._read(f"host-{name}.ledger", host)

    def _news(self) -> None:
        """Each `news/<H>` removed, then host H's ledger read (never through a link: entries
        are removed only inside the run directory's own `news`)."""
        try:
            fd = os.open(os.path.join(self.run_dir, NEWS), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            with os.scandir(fd) as it:
                names = [e.name for e in it]
            for name in names:
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    continue
                if not name.startswith("."):
                    self._read(f"host-{name}.ledger", self._host(name))
        finally:
            os.close(fd)

    def _discover(self) -> None:
        """The directory listed: hosts not known yet get their ledger read."""
        for stem, _ in self._listing():
            if stem not in self.state.hosts:
                self._read(f"host-{stem}.ledger", self._host(stem))

    def _beat(self, host: HostState) -> None:
        try:
            st = os.lstat(os.path.join(self.run_dir, f"host-{host.name}.beat"))
            host.beat = st.st_mtime if stat.S_ISREG(st.st_mode) else host.beat
        except OSError:
            pass

    def poll(self) -> RunState:
        for stem, kind in self._listing():
            host = self._host(stem)
            if kind == "beat":
                self._beat(host)
            else:
                self._read(f"host-{stem}.ledger", host)
        return self.state

    def _listing(self) -> List[Tuple[str, str]]:
        """(host, "ledger" or "beat") for each host-<H>.ledger and host-<H>.beat the run directory
        lists (none when it cannot be listed)."""
        try:
            with os.scandir(self.run_dir) as it:
                names = [e.name for e in it if e.name.startswith("host-")]
        except OSError:
            return []
        pairs = [name[5:].rpartition(".") for name in names]
        return [(stem, kind) for stem, _, kind in pairs if stem and kind in ("ledger", "beat")]

    def _host(self, name: str) -> HostState:
        host = self.state.hosts.get(name)
        if host is None:
            host = self.state.hosts[name] = HostState(name)
        return host

    def _read(self, name: str, host: HostState) -> None:
        from jobenv.core.readfile import open_regular

        path = os.path.join(self.run_dir, name)
        seen = self._seen.get(name)
        try:
            st = os.stat(path)
            if seen is not None and seen[0] == (st.st_dev, st.st_ino) and seen[1] == st.st_size:
                return  # nothing appended: no open
            fd, st = open_regular(path)  # never a FIFO or device
        except OSError:
            return
        try:
            ident, offset, partial = seen or ((st.st_dev, st.st_ino), 0, b"")
            if ident != (st.st_dev, st.st_ino) or st.st_size < offset:  # replaced or cut: read afresh
                offset, partial = 0, b""
            if st.st_size - offset > LEDGER_BYTES:  # a flood: its head (the starts), then its newest lines
                half = LEDGER_BYTES // 2
                if offset == 0:
                    self._lines(host, os.pread(fd, half, 0), b"", False)
                offset, partial = st.st_size - half, b""
                data = os.pread(fd, half, offset)
                rest = self._lines(host, data, partial, True)
            else:
                data = os.pread(fd, st.st_size - offset, offset)
                rest = self._lines(host, data, partial, False)
        except OSError:
            return
        finally:
            os.close(fd)
        self._seen[name] = ((st.st_dev, st.st_ino), offset + len(data), rest)

    def _lines(self, host: HostState, data: bytes, partial: bytes, skip_first: bool) -> bytes:
        """Apply the complete lines of `partial + data` (the first skipped: it began before the
        piece read); the partial last line, kept for the next read."""
        lines = (partial + data).split(b"\n")
        rest = lines.pop()
        for i, raw in enumerate(lines):
            if len(raw) <= LINE_BYTES and not (skip_first and i == 0):
                _apply(self.state, host, raw.decode("ascii", "replace"))
                self.changed = True
        return rest[-LINE_BYTES - 1:]


def read(run_dir: str) -> RunState:
    """Every rank of every host ledger, with the hosts' last beats."""
    return Ledgers(run_dir).poll()
