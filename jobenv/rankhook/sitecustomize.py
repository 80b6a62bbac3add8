"""jobenv's hook in a rank's Python: imported by `site` at start-up because `jobenv launch` puts
this directory first on the ranks' PYTHONPATH (`--no-hook` leaves it out).

It must be invisible (tests/test_rank_transparency.py compares a rank with and without it): it
starts no thread, installs no signal handler, wraps no builtin, keeps no descriptor open, imports
nothing after start-up (when the working directory may be on sys.path) and leaves sys.path,
sys.modules and os.environ as it found them.  It arms only in a process the rank keeper started
(JOBENV_LEDGER, JOBENV_HOOK_RANK), and then:
- appends `hook <R> <pid> <start> <epoch>` to the host's ledger (<start>: this process's start
  time in clock ticks after boot, /proc/<pid>/stat field 22: with the pid it names this process);
- registers one atexit callback (the first registered, so it runs last) that waits until torch's
  gloo worker threads are idle (see `_quiesce`), then appends `clean <R> <epoch>`: this process's
  main ended without an unhandled exception and every atexit callback ran.  The supervisor excuses a teardown abort only when
  the pid that wrote `clean` is the program the keeper saw end (jobenv/rank/teardown.py).
With JOBENV_STACKS=1 (`jobenv launch --stacks`, a documented difference) it also registers
faulthandler for JOBENV_DUMP_SIGNAL, writing every thread's stack into
<JOBENV_RUN_DIR>/stacks/rank-<R>.<pid>.txt straight from the C handler (no thread), and
unregisters it in forked children.
Children never arm: its variables and PYTHONPATH entry leave os.environ.  It runs in any Python
3.9+ the rank uses, so it imports nothing from jobenv; any error disarms it silently.
"""
import os
import sys

_DIR = os.path.dirname(os.path.abspath(__file__))
_RANK_VARS = ("JOBENV_LEDGER", "JOBENV_HOOK_RANK", "JOBENV_STACKS")
# torch's ProcessGroupGloo worker threads (thread names are cut to 15 bytes by the kernel)
_GLOO_WORKERS = (b"pt_gloo_runloop",)
_QUIESCE_S = 0.5


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


def _note(path: str, line: str, epoch: float) -> None:
    """One line, one write, to the host's ledger: opened for it and closed at once (a descriptor
    kept open would be the program's to see, and could be one it closed and reused).  Never
    through a link, nor into a FIFO (O_NONBLOCK), nor a file of another user's."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if st.st_mode & 0o170000 == 0o100000 and st.st_uid == os.geteuid():
            os.write(fd, f"{line} {epoch:.6f}\n".encode())
    finally:
        os.close(fd)


def _stat(path: str) -> "tuple[bytes, list[bytes]]":
    """A /proc stat file: the name in parentheses (it may hold anything, `)` too) and the fields
    after it, from field 3 (the state) on."""
    with open(path, "rb") as f:
        line = f.read()
    end = line.rindex(b")")
    return line[line.index(b"(") + 1:end], line[end + 2:].split()


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


def _quiesce(sleep: "object") -> None:
    """torch's gloo worker drops its last reference to a finished collective's tensors after the
    caller was woken; when that lands after the interpreter began finalizing, the decref asks for
    the GIL, CPython ends the thread with pthread_exit, and its unwinding through a noexcept
    destructor calls std::terminate ("terminate called without an active exception", SIGABRT).
    Before finalizing, give those threads time (at most _QUIESCE_S) until each is seen asleep twice.
    Sleeps on a lock of its own (`sleep`, made at start-up): nothing is imported at exit."""
    if "torch.distributed" not in sys.modules:
        return
    deadline = os.times()[4] + _QUIESCE_S
    quiet = 0
    while quiet < 2 and os.times()[4] < deadline:
        states = _worker_states()
        if not states:
            return
        quiet = quiet + 1 if all(s == b"S" for s in states) else 0
        sleep.acquire(timeout=0.002)  # type: ignore[attr-defined]  # lets a worker waiting for the GIL take it


def _arm_stacks(run_dir: str, rank: str, pid: int) -> None:
    """faulthandler on JOBENV_DUMP_SIGNAL into stacks/rank-<R>.<pid>.txt (appended, one file per
    Python: a dump is what was appended after the request), only in this process."""
    import faulthandler

    sig = os.environ.get("JOBENV_DUMP_SIGNAL", "")
    if not (sig.isdigit() and len(sig) < 4 and os.path.isabs(run_dir)):
        return
    dfd = os.open(os.path.join(run_dir, "stacks"), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(dfd)
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(f"rank-{rank}.{pid}.txt", flags, 0o600, dir_fd=dfd)
    finally:
        os.close(dfd)
    faulthandler.register(int(sig), file=fd, all_threads=True, chain=False)
    if not faulthandler.is_enabled():
        faulthandler.enable(file=sys.stderr)
    def in_child() -> None:  # a forked child is not the rank: no handler, no descriptor of ours
        faulthandler.unregister(int(sig))
        os.close(fd)

    os.register_at_fork(after_in_child=in_child)


def _arm(ledger: str, rank: str) -> None:
    if not (rank.isascii() and rank.isdigit() and len(rank) < 10 and os.path.isabs(ledger)):
        return
    import atexit  # a builtin module: `_main` takes it out of sys.modules again
    import time  # in sys.modules already (site), as is _thread

    pid = os.getpid()
    _note(ledger, f"hook {rank} {pid} {_stat('/proc/self/stat')[1][19].decode('ascii')}", time.time())
    sleep = sys.modules["_thread"].allocate_lock()
    sleep.acquire()
    clock = time.time

    def at_exit() -> None:
        if os.getpid() != pid:  # a forked child exiting through Python
            return
        try:
            _quiesce(sleep)
            # an unhandled exception leaves sys.last_value (last_exc, 3.12+); a non-zero sys.exit() leaves
            # nothing an atexit callback can see, and wrapping sys.exit would change the program: a clean
            # ending exit N is still exit N, and only a death by signal after it is ever excused
            if not (hasattr(sys, "last_value") or hasattr(sys, "last_exc")):
                _note(ledger, f"clean {rank}", clock())
        except Exception:
            pass

    atexit.register(at_exit)
    if os.environ.get("JOBENV_STACKS") == "1":
        _arm_stacks(os.environ.get("JOBENV_RUN_DIR", ""), rank, pid)


def _chain() -> bool:
    """Run the sitecustomize this one shadows (Debian's python3 has one), as `site` would have;
    whether there was one."""
    bootstrap = sys.modules["_frozen_importlib"]  # importlib's core, loaded in every Python
    spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return False
    mod = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)
    return True


def _main() -> None:
    sys.path[:] = [p for p in sys.path if p != _DIR]
    before = set(sys.modules)
    try:
        ledger, rank = (os.environ.get(k, "") for k in _RANK_VARS[:2])
        if ledger and rank:
            stacks = os.environ.get("JOBENV_STACKS") == "1"
            _strip_environ()
            if stacks:
                os.environ["JOBENV_STACKS"] = "1"  # read once more by _arm, then gone
            _arm(ledger, rank)
            os.environ.pop("JOBENV_STACKS", None)
    except Exception:
        pass
    for name in set(sys.modules) - before:  # what we imported (atexit; faulthandler with --stacks)
        if name != "faulthandler":
            del sys.modules[name]
    _chain()  # its errors are reported by `site`, as without us.  Without one, this module stays
    # sys.modules["sitecustomize"] (importlib puts it back after its import): the one documented trace


_main()
