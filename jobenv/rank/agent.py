"""The host agent: one per host and launch, started by the first rank keeper of the host
(jobenv/rank/keeper.py, which forks it twice: it is nobody's child that waits for it).

Each beat (BEAT_S, or at once when a keeper's WINCH says its rank ended) it:
- touches host-<H>.beat (utime; created by a rename the first time): its mtime is the heartbeat
  the supervisor watches.  A rename each beat moved the run directory's mtime too, so nothing
  in the directory could say "nothing changed"; an utime changes the one file;
- reads what was appended to host-<H>.ledger since the last beat (the one reader of the ledger
  format is jobenv/rank/ledger.py; this is the host's side of it, and reads the lines it acts on);
- writes `lost R EPOCH` for a rank whose keeper is gone (two beats running) without an `end`;
- carries out the run directory's `request` (`<seq> <verb>`, jobenv/launch/watch/requests.py) once,
  with an `ack <seq> <verb> EPOCH` line: `stacks`/`stacks:cont` (the dump signal to each rank's
  hooked Python, only while the pid still names the process that wrote its `hook` line and that
  process catches the signal), `kill` (TERM to every running program, KILL from 5 s on to
  programs and keepers still running), `signal:NAME` (to every running program);
- creates news/<H> when host-<H>.ledger grew since the last beat (its own lines included): the
  supervisor lists news/ each poll instead of stat'ing every host's ledger, and removes the
  entry before it reads the ledger (jobenv/rank/ledger.py says why a directory entry);
- ends, removing agent-<H>, when no rank of the host runs.
A pid is signalled only while /proc/PID/stat gives the start time its ledger line recorded: never
a process that got the pid since, never another host's (a ledger is this host's alone: its name is
the kernel's node name, jobenv.rank.keeper.host_key).  Standard library only, like the keeper.
"""
import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typeshed has no _signal; the same names and calls, with ints for enums
    import signal
    from typing import Callable
else:  # as the keeper (no enum import)
    import _signal as signal

if __package__:  # jobenv.rank.agent (tests, mypy)
    from .lines import number, parse
else:  # `agent`, beside it, in the keeper's isolated Python (sys.path[0]: this directory alone);
    # never the keeper itself (run as __main__, it would be loaded a second time as `keeper`)
    from lines import number, parse  # type: ignore[import-not-found, no-redef]

BEAT_S = 1.0
KILL_AFTER_S = 5.0
READ_BYTES = 4 << 20
NEWS = "news"  # jobenv.rank.ledger.NEWS
SIGNALS = {"USR1": signal.SIGUSR1, "USR2": signal.SIGUSR2, "TERM": signal.SIGTERM, "INT": signal.SIGINT,
           "HUP": signal.SIGHUP}


def detach(keep: int) -> None:
    """The agent holds nothing of the launcher's (its pipes would keep the launcher waiting),
    takes no signal the step's processes all get as a warning (USR1, USR2), and leaves the rank's
    process group and session (setsid): a launcher that ends a rank by SIGKILL to its group
    (Hydra's proxy after another rank failed, Open MPI's orted, a terminal's ^C to the foreground
    group) kills that keeper outright, and the agent, outside the group, is the one left to
    write its `lost`.  It ends by itself within two beats of the host's last keeper, so it never
    outlives the launch; a step's cgroup (srun, Flux) still ends it with the step."""
    try:
        os.setsid()
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    signal.pthread_sigmask(signal.SIG_SETMASK, {signal.SIGWINCH})
    for s in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(s, signal.SIG_IGN)
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGPIPE):
        signal.signal(s, signal.SIG_DFL)


def _catches(pid: int, sig: int) -> bool:
    """The process has a handler for `sig` (SigCgt): a Python that exec'd another program has none."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


class Rank:
    __slots__ = ("keeper", "kstart", "pid", "pstart", "ended", "gone", "hook")

    def __init__(self, keeper: int, kstart: str, pid: int, pstart: str) -> None:
        self.keeper, self.kstart, self.pid, self.pstart = keeper, kstart, pid, pstart
        self.ended, self.gone = False, 0
        self.hook: "tuple[int, str] | None" = None


def _num(word: str) -> int:
    return -1 if number(word) is None else int(word)


class Agent:
    """`started(pid, running)`: when a process started (jobenv.rank.keeper.started, handed over by
    the keeper that forks this agent, so that neither imports the other)."""

    def __init__(self, run_dir: str, key: str, lock: str, started: "Callable[[int, bool], str]") -> None:
        self.run_dir, self.lock, self.started = run_dir, lock, started
        self.ledger = os.path.join(run_dir, f"host-{key}.ledger")
        self.beat = os.path.join(run_dir, f"host-{key}.beat")
        self.request = os.path.join(run_dir, "request")
        self.news = os.path.join(run_dir, NEWS, key)
        self.told = 0  # the ledger's size at the last news
        self.beating = False  # host-<H>.beat made: from then on touched in place
        self.ranks: "dict[int, Rank]" = {}
        self.offset, self.partial = 0, b""
        self.done: "set[int]" = set()
        self.kill_at: "float | None" = None
        dump = os.environ.get("JOBENV_DUMP_SIGNAL", "")
        self.dump = int(dump) if dump.isdigit() and len(dump) < 3 else 38
        self.me = f"{os.getpid()} {started(os.getpid(), True)}\n"

    def _same(self, pid: int, start: str) -> bool:
        """`pid` still names the process that started at `start` (and is no zombie)."""
        return bool(start) and self.started(pid, True) == start

    def run(self) -> None:
        fd = os.open(self.lock, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        os.write(fd, self.me.encode())
        os.close(fd)
        grace = 2  # beats the keeper that forked us may take to write its `start`
        while True:
            self.scan()
            if self.ranks:  # a rank was seen: the agent ends with the host's last one, at once
                grace = 0
            if not self.running():
                if grace > 0:
                    grace -= 1
                elif not self.leave():
                    self.tell()  # the host's last `end`
                    return
            self.write_beat()
            self.carry_out()
            self.enforce_kill()
            self.tell()
            signal.sigtimedwait({signal.SIGWINCH}, BEAT_S)

    def running(self) -> "list[Rank]":
        return [r for r in self.ranks.values() if not r.ended]

    def leave(self) -> bool:
        """Remove agent-<H>; False (end) unless a rank started since and no keeper made a new agent."""
        try:
            os.unlink(self.lock)
        except OSError:
            pass
        self.scan()
        if not self.running():
            return False
        try:
            fd = os.open(self.lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            return False  # that rank's keeper made agent-<H>: its agent carries on
        os.write(fd, self.me.encode())
        os.close(fd)
        return True

    def scan(self) -> None:
        try:
            fd = os.open(self.ledger, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            data = os.pread(fd, READ_BYTES, self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()[-512:]
        for raw in lines:
            parsed = parse(raw.decode("ascii", "replace"))
            if parsed is not None:
                self.apply(*parsed[:3])
        for rank, r in self.ranks.items():
            if r.ended:
                continue
            if self._same(r.keeper, r.kstart):
                r.gone = 0
                continue
            r.gone += 1
            if r.gone >= 2:  # its keeper vanished without an `end` (SIGKILL): say so once
                self.note(f"lost {rank}")
                r.ended = True

    def apply(self, kind: str, rank: int, mid: "list[str]") -> None:
        """One parsed ledger line (jobenv/rank/lines.py, the one reader of the format)."""
        if kind == "start":
            self.ranks[rank] = Rank(int(mid[0]), mid[1], int(mid[2]), mid[3])
        elif kind in ("end", "lost") and rank in self.ranks:
            self.ranks[rank].ended = True
        elif kind == "hook" and rank in self.ranks:  # the rank's newest Python
            self.ranks[rank].hook = (int(mid[0]), mid[1])
        elif kind == "clean" and rank in self.ranks:
            self.ranks[rank].hook = None  # exiting: the dump signal could kill it
        elif kind == "ack":
            self.done.add(rank)

    def note(self, line: str) -> None:
        try:
            fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                os.write(fd, f"{line} {time.time():.6f}\n".encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def tell(self) -> None:
        """news/<H> when the ledger grew since the last news (`mkdir news` the first time)."""
        try:
            size = os.stat(self.ledger, follow_symlinks=False).st_size
        except OSError:
            return
        if size == self.told:
            return
        for _ in range(2):
            try:  # news/ itself never through a link (a rank may have planted one)
                fd = os.open(os.path.dirname(self.news), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except FileNotFoundError:
                try:
                    os.mkdir(os.path.dirname(self.news), 0o700)
                except OSError:
                    pass
                continue
            except OSError:
                return
            try:
                os.close(os.open(os.path.basename(self.news), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                                 | os.O_CLOEXEC, 0o600, dir_fd=fd))
                self.told = size
            except OSError:
                pass
            finally:
                os.close(fd)
            return

    def write_beat(self) -> None:
        if self.beating:
            try:
                os.utime(self.beat, follow_symlinks=False)
                return
            except OSError:
                pass  # removed: made again
        tmp = f"{self.beat}.{os.getpid()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.write(fd, f"{time.time():.6f}\n".encode())
            os.close(fd)
            os.rename(tmp, self.beat)
            self.beating = True
        except OSError:
            pass

    def programs(self) -> "list[int]":
        """The running programs, each only while its pid names the process the keeper started."""
        return [r.pid for r in self.running() if self._same(r.pid, r.pstart)]

    def _signal(self, pids: "list[int]", sig: int) -> None:
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def carry_out(self) -> None:
        try:
            fd = os.open(self.request, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                words = os.read(fd, 128).decode("ascii", "replace").split()
            finally:
                os.close(fd)
        except OSError:
            return
        if len(words) != 2 or _num(words[0]) < 0 or _num(words[0]) in self.done:
            return
        seq, verb = _num(words[0]), words[1]
        self.done.add(seq)
        if verb in ("stacks", "stacks:cont"):
            for r in self.running():
                if r.hook and self._same(*r.hook) and _catches(r.hook[0], self.dump):
                    self._signal([r.hook[0]], self.dump)
                    if verb == "stacks:cont":
                        self._signal([r.hook[0]], signal.SIGCONT)
        elif verb == "kill":
            self._signal(self.programs(), signal.SIGTERM)
            self.kill_at = time.monotonic() + KILL_AFTER_S
        elif verb.startswith("signal:") and verb[7:] in SIGNALS:
            self._signal(self.programs(), SIGNALS[verb[7:]])
        else:
            return
        self.note(f"ack {seq} {verb}")

    def enforce_kill(self) -> None:
        if self.kill_at is None or time.monotonic() < self.kill_at:
            return
        self._signal(self.programs(), signal.SIGKILL)
        self._signal([r.keeper for r in self.running() if self._same(r.keeper, r.kstart)], signal.SIGKILL)
