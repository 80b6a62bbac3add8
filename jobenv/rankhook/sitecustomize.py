"""jobenv's hook in a rank's Python: imported by `site` at start-up because `jobenv launch` puts
this directory first on the ranks' PYTHONPATH (`--no-hook` leaves it out).

It arms only in the process the rank wrapper started (the wrapper exports JOBENV_LEDGER, its
host's ledger, and JOBENV_HOOK_RANK), and then:
- appends `hook <R> <pid> <start> <epoch>` to the ledger (<start>: when this process started, in
  clock ticks after boot, field 22 of /proc/<pid>/stat: the host agent signals the pid only while
  it still names this process, never one that got the pid after we exited), and at exit
  `clean <R> <epoch>` when the program's main finished without an unhandled exception or a
  non-zero sys.exit, exit() or quit(): the supervisor tells a rank that aborted during
  interpreter teardown from one that failed, and the agent signals the rank's Python no more
  (it is exiting);
- waits, at exit, until torch's gloo worker threads are idle (see `_quiesce`);
- turns faulthandler on for fatal signals, and on JOBENV_DUMP_SIGNAL writes every thread's
  stack to <JOBENV_RUN_DIR>/stacks/rank-<R>.<seq>.txt, even while the main thread is blocked
  in a C call (a collective): faulthandler's C handler writes it into a pipe, a daemon thread
  files it.
Armed, it leaves no trace for children (its variables and its PYTHONPATH entry leave os.environ; its
directory leaves sys.path in any case), then runs the sitecustomize it shadows.  It runs in any Python 3.9+
the rank uses, so it imports nothing from jobenv; any error inside disarms it silently: the
hook must never break a program.
"""
import os
import stat  # os imported it already
import sys

TYPE_CHECKING = False  # `typing` is not imported in a rank for this
if TYPE_CHECKING:
    from typing import Callable

_DIR = os.path.dirname(os.path.abspath(__file__))
_RANK_VARS = ("JOBENV_LEDGER", "JOBENV_HOOK_RANK")
# torch's ProcessGroupGloo worker threads (thread names are cut to 15 bytes by the kernel)
_GLOO_WORKERS = (b"pt_gloo_runloop",)
_QUIESCE_S = 0.5
_PIPE_BYTES = 1 << 16  # one read: Linux's default pipe size
_DUMP_MAX = 1 << 22  # one dump at most (faulthandler writes 100 frames per thread)


def _strip_environ() -> None:
    """Take the wrapper's variables and our PYTHONPATH entry out of os.environ (children must
    not arm).  Only once armed: a Python between launcher and wrapper (torchrun) passes them on."""
    for k in _RANK_VARS:
        os.environ.pop(k, None)
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if _DIR in parts:
        parts.remove(_DIR)
        if any(parts):
            os.environ["PYTHONPATH"] = os.pathsep.join(parts)
        else:
            del os.environ["PYTHONPATH"]


def _open_ledger(path: str) -> int:
    """The host's ledger, for appending: a regular file of our own.  Created when missing: the
    wrapper starts the program before it appends its `start` line, so the first rank of a host
    may get here first.  Never through a link; a FIFO does not block us (O_NONBLOCK)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()):
        os.close(fd)
        raise OSError("ledger")
    return fd


class _Armed:
    """What an armed hook holds: the ledger's descriptor, the rank, our pid and start time, the exit status."""

    def __init__(self, fd: int, rank: str) -> None:
        self.fd, self.rank, self.pid, self.started = fd, rank, os.getpid(), _started()
        self.status: object = None  # the code of the last SystemExit an exit raised
        self.ident = _ident(fd)

    def note(self, line: str) -> None:
        """One line, one write: appends from the ranks of a host never interleave.  Never into
        a file of the program's: one that closed descriptors it did not open (os.closerange, a
        daemon library) may have our number now; the line is then not written."""
        import time

        if _ident(self.fd) == self.ident:
            os.write(self.fd, f"{line} {time.time():.3f}\n".encode())

    def at_exit(self) -> None:
        """Last atexit callback (registered first): the program's own ran already."""
        if os.getpid() != self.pid:  # a forked child exiting through Python
            return
        try:
            failed = hasattr(sys, "last_value") or hasattr(sys, "last_exc")  # set for an unhandled exception
            if not failed and (self.status is None or self.status == 0):
                self.note(f"clean {self.rank}")
        except Exception:
            pass
        _quiesce()


def _stat(path: str) -> "tuple[bytes, list[bytes]]":
    """A /proc stat file: the name in parentheses (it may hold anything, `)` too) and the fields
    after it, from field 3 (the state) on."""
    with open(path, "rb") as f:
        line = f.read()
    end = line.rindex(b")")
    return line[line.index(b"(") + 1:end], line[end + 2:].split()


def _started() -> str:
    """This process's start time, clock ticks after boot (field 22): with the pid, it names this process alone."""
    return _stat("/proc/self/stat")[1][19].decode("ascii")


def _quiesce() -> None:
    """torch's gloo worker drops its last reference to a finished collective's tensors after the
    caller was woken; when that lands after the interpreter began finalizing, the decref asks for
    the GIL, CPython ends the thread with pthread_exit, and its unwinding through a noexcept
    destructor calls std::terminate ("terminate called without an active exception", SIGABRT).
    Before finalizing, give those threads time (at most _QUIESCE_S) until each is seen asleep twice."""
    if "torch.distributed" not in sys.modules:
        return
    import time

    deadline = time.monotonic() + _QUIESCE_S
    quiet = 0
    try:
        while quiet < 2 and time.monotonic() < deadline:
            states = _worker_states()
            if not states:
                return
            quiet = quiet + 1 if all(s == b"S" for s in states) else 0
            time.sleep(0.002)  # lets a worker waiting for the GIL take it
    except Exception:
        pass


def _worker_states() -> "list[bytes]":
    """The scheduler state (R, S, D...) of each gloo worker thread of this process."""
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            name, fields = _stat(f"/proc/self/task/{tid}/stat")
        except OSError:
            continue
        if name in _GLOO_WORKERS:
            out.append(fields[0][:1])
    return out


def _dump(run_dir: str, rank: str, text: bytes) -> None:
    """A dump into stacks/rank-<R>.<seq>.txt, <seq> from the run's `request`; the file is
    created new (never through a planted name) in a directory of our own."""
    seq = "0"
    try:
        fd = os.open(os.path.join(run_dir, "request"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            head = os.read(fd, 64).split()
        finally:
            os.close(fd)
        if head and head[0].isdigit() and len(head[0]) < 20:
            seq = head[0].decode()
    except OSError:
        pass
    dfd = os.open(os.path.join(run_dir, "stacks"), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(dfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(f"rank-{rank}.{seq}.txt", flags, 0o600, dir_fd=dfd)
    finally:
        os.close(dfd)
    try:
        os.write(fd, text)
    finally:
        os.close(fd)


def _ident(fd: int) -> "tuple[int, int]":
    """What `fd` is (device, inode): (-1, -1) when it is closed."""
    try:
        st = os.fstat(fd)
    except OSError:
        return (-1, -1)
    return (st.st_dev, st.st_ino)


def _collector(rfd: int, run_dir: str, rank: str) -> None:
    """The dump thread: a dump arrives on the pipe in one burst; 0.2 s of quiet ends it.  It
    ends when the pipe is gone (closed, or its number reused by the program): silently."""
    try:
        import select

        ident = _ident(rfd)
        while _ident(rfd) == ident:
            chunks = [os.read(rfd, _PIPE_BYTES)]
            if not chunks[0]:
                return
            while select.select([rfd], [], [], 0.2)[0] and _ident(rfd) == ident and sum(map(len, chunks)) < _DUMP_MAX:
                more = os.read(rfd, _PIPE_BYTES)
                if not more:
                    break
                chunks.append(more)
            try:
                _dump(run_dir, rank, b"".join(chunks))
            except Exception:
                pass
    except BaseException:
        return


def _arm_dump(rank: str) -> None:
    """On JOBENV_DUMP_SIGNAL, faulthandler's C handler writes every thread's stack, from the
    thread the signal lands on and without the GIL, into a non-blocking pipe (what does not
    fit while the collector drains it is cut, never a hang); a daemon thread files it, so a
    rank blocked in a call that released the GIL (a collective) answers; one stuck holding
    the GIL writes its dump into the pipe but cannot file it.  Nothing is blocked, so no
    child inherits a signal mask, and exec resets the handler.  Nothing when the variable or
    the run directory is missing."""
    import _thread
    import faulthandler

    sig, run_dir = os.environ.get("JOBENV_DUMP_SIGNAL", ""), os.environ.get("JOBENV_RUN_DIR", "")
    if not (sig.isdigit() and len(sig) < 4 and os.path.isabs(run_dir)):
        return
    rfd, wfd = os.pipe()  # close-on-exec: children get neither end; the system's default size
    os.set_blocking(wfd, False)
    faulthandler.register(int(sig), file=wfd, all_threads=True, chain=False)
    _thread.start_new_thread(_collector, (rfd, run_dir, rank))


def _exit_noting(armed: _Armed, real: "Callable[..., None]", args: "tuple[object, ...]",
                 kwargs: "dict[str, object]") -> None:
    """Call an exit (sys.exit, exit, quit) as it was called, remembering the status of the
    SystemExit it raises for `clean` (a bare `raise SystemExit(n)` leaves no trace an atexit
    callback can see)."""
    try:
        real(*args, **kwargs)
    except SystemExit as e:
        armed.status = e.code
        raise


def _noting(real: "Callable[..., None]", armed: _Armed) -> "Callable[..., None]":
    """sys.exit, remembering its status."""
    return lambda *args, **kwargs: _exit_noting(armed, real, args, kwargs)


def _watch_quitters(armed: _Armed) -> None:
    """exit() and quit(), site's Quitter objects, which scripts call too: each replaced by an
    instance of a subclass that notes the status, so that repr, isinstance, `eof` and
    `exit(code=3)` stay as they were."""
    import builtins

    for name in ("exit", "quit"):
        old = getattr(builtins, name, None)
        if old is None or not callable(old) or not hasattr(old, "__dict__"):
            continue

        class Noting(type(old)):  # type: ignore[misc]
            def __call__(self, *args: object, **kwargs: object) -> None:
                _exit_noting(armed, super().__call__, args, kwargs)

        new = object.__new__(Noting)
        new.__dict__.update(old.__dict__)
        setattr(builtins, name, new)


def _arm(ledger: str, rank: str) -> None:
    import atexit
    import faulthandler

    if not (rank.isdigit() and len(rank) < 10 and os.path.isabs(ledger)):
        return
    armed = _Armed(_open_ledger(ledger), rank)
    armed.note(f"hook {rank} {armed.pid} {armed.started}")
    atexit.register(armed.at_exit)
    sys.exit = _noting(sys.exit, armed)  # type: ignore[assignment]
    _watch_quitters(armed)
    if not faulthandler.is_enabled():
        faulthandler.enable()
    _arm_dump(rank)


def _chain() -> None:
    """Run the sitecustomize this one shadows (Debian's python3 has one), as `site` would have."""
    bootstrap = sys.modules["_frozen_importlib"]  # importlib's core, loaded in every Python
    spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    mod = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


def _main() -> None:
    sys.path[:] = [p for p in sys.path if p != _DIR]
    try:
        ledger, rank = (os.environ.get(k, "") for k in _RANK_VARS)
        if ledger and rank:
            _strip_environ()
            _arm(ledger, rank)
    except Exception:
        pass
    _chain()  # its errors are reported by `site`, as without us


_main()
