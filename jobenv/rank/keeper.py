"""The per-rank parent on the supervised path: runs the rank's program as its only child, waits
for it with waitid, and records exactly how it ended.

Why a parent, in Python: only the parent of a process learns whether it exited with 143 or died
of SIGTERM; a shell's `$?` says 128+N for both, and its job table races with `wait` (four
submissions went to that inference).  The wrapper (jobenv/rankwrap.sh) maps the launcher's
variables, then execs this file as `PYTHON -I -S keeper.py LAUNCHER SIGIGN PROGRAM [ARG...]`:
-I -S keep the working directory, PYTHONPATH and site-packages out of it (nothing a user or
another local user put there runs here), and it imports the standard library alone: nothing of
jobenv's files is looked up on a rank's way (they may sit on a shared file system, once per rank).
The host agent it forks imports agent.py and lines.py from this directory (put first on sys.path:
`_sibling`), never this file a second time, and is handed `started` (the imports go one way:
keeper -> agent -> lines).

The program is forked and exec'd so that it is the rank the bare launcher would have started, but
one process down:
- signal dispositions as the launcher left them: Python ignores SIGPIPE and SIGXFSZ at start,
  so they go back to default unless SIGIGN (the wrapper's /proc/self/status SigIgn, read
  before this exec) says the launcher had them ignored; SIGINT is never ignored here (a sh
  background job's is: the old wrapper's);
- the launcher's blocked mask (this process blocks the signals it waits for, not the child);
- stdin and every descriptor the launcher passed (PMI_FD, sockets); ours are close-on-exec;
- one process down in the same process group and session (the group or session the launcher
  gave the rank is led by this process).
The program stays in this process's group and session, so a signal the launcher sends the rank's
group (Hydra, Open MPI, torchrun) or step (srun, Flux) reaches it directly, as it reached the
bare rank, and so does SIGKILL.  `forwards` (one rule) says which signals this process passes
on itself, by the siginfo of each: none the kernel sent a whole group (a terminal's ^C), none
from our parent when it is a launcher of GROUP_SIGNALLING (passing them on would deliver them
twice); any other sender's (a launcher that signals the rank's pid, a user's `kill` of this pid,
the host agent) TERM, INT, HUP, QUIT, USR1 and USR2 go on.

Ledger lines (one write each, < 512 bytes, appended to the host's ledger; format in
jobenv/rank/ledger.py): `start R KPID KSTART PID PSTART EPOCH` once the program runs, `end R
exit:N|signal:S EPOCH` when it ended.  KSTART/PSTART: start times in clock ticks after boot
(/proc/PID/stat field 22): with the pid they name one process, so the host agent never signals
a pid that was reused.  The first keeper of a host starts the host agent (jobenv/rank/agent.py).

Exit status: the program's; when it died of signal S, this process dies of S too (no core of
its own), so the launcher sees what it would have seen.  5 for a refused environment (an
unwritable ledger or log, a log name that exists), 127 for a program not found, 126 for one
that cannot be run, as a shell says.
"""
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typeshed has no _signal; the same names and calls, with ints for enums
    import signal
    from types import ModuleType
else:  # not `signal`: its enum import costs more than the rest of the keeper
    import _signal as signal

if not __package__:  # the wrapper's `python -I -S .../rank/keeper.py`: no directory of ours is on sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # this one, for _sibling

# Signals this process catches (blocked, then taken with sigwaitinfo) and may pass to the program.
FORWARD = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# Launchers that signal the rank's whole process group (or every process of the step) themselves:
# the program, in the keeper's group, gets the signal as the keeper does (the wrapper's detected row;
# seen here: Hydra's proxy and Open MPI's orted kill(-pgid), torchrun killpg(), slurmstepd the step).
GROUP_SIGNALLING = ("mpich", "openmpi", "torchrun", "srun", "flux")
SI_KERNEL = 0x80  # si_code of a signal the kernel sent (a terminal's ^C, ^\ to the foreground group)
# Python's own start-up changes these from the default (to ignored); the child gets them back.
PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)
REFUSED = 5
LINE_BYTES = 512


def _die(msg: str, code: int = REFUSED) -> "None":
    os.write(2, f"jobenv: error: {msg}\n".encode("utf-8", "replace"))
    os._exit(code)


def _sibling(name: str) -> "ModuleType":
    """A module beside this file (the agent's, in the forked agent), imported on first use, after
    the program started: jobenv.rank.NAME when this is jobenv.rank.keeper, else NAME from this
    directory."""
    if __package__:
        return __import__(f"{__package__}.{name}", fromlist=[name])
    return __import__(name)


def ignored_at_start(sigign: str) -> "set[int]":
    """The signals the launcher left ignored, from a SigIgn hex mask (empty or bad: none)."""
    if not sigign or len(sigign) > 32 or any(c not in "0123456789abcdefABCDEF" for c in sigign):
        return set()
    mask = int(sigign, 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def forwards(sig: int, code: int, sender: int, launcher: str) -> bool:
    """Whether a signal this process got goes on to the program (see the module docstring): not
    one the kernel sent a whole group, nor one our parent sent when it is a launcher that signals
    the rank's group; any other sender's (a user's `kill` of this pid, a launcher of another kind)."""
    if code == SI_KERNEL:
        return False
    return not (launcher in GROUP_SIGNALLING and sender == os.getppid())


def started(pid: int, running: bool = False) -> str:
    """When `pid` started, in clock ticks after boot (field 22 of /proc/PID/stat); '' when gone
    (with `running`, also when it is a zombie: the host agent's test of a process it may signal)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
        return "" if running and fields[0] in (b"Z", b"X") else fields[19].decode("ascii")
    except (OSError, ValueError, IndexError):
        return ""


def host_key() -> str:
    """This host's name in the run directory's files: the kernel's node name (never a variable a
    user's environment carries to every host), anything outside [A-Za-z0-9._-] as _."""
    name = os.uname().nodename or "_"
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name)[:200]


def now() -> str:
    return f"{time.time():.6f}"


def open_append(path: str) -> int:
    """The host's ledger for appending: created when missing, never through a link, FIFO or
    device, and never one another user owns."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                 0o600)
    st = os.fstat(fd)
    if not (st.st_mode & 0o170000 == 0o100000 and st.st_uid == os.geteuid()):
        os.close(fd)
        raise OSError(f"{path} is not a regular file of ours")
    return fd


def _log_fd(log_dir: str, rank: str) -> int:
    path = os.path.join(log_dir, f"rank-{rank}.log")
    try:  # new, never through a planted name (link, FIFO, device); the umask decides its mode
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except FileExistsError:
        _die(f"{path} exists; refusing to write through it")
    except OSError as e:
        _die(f"cannot write {path}: {e.strerror}")
    return -1


def _spawn(argv: "list[str]", env: "dict[str, str]", log: int, mask: "set[int]", ign: "set[int]") -> int:
    """fork and exec (not posix_spawn: glibc's leaves its own signals 32 and 33 ignored in the
    program); the child's pid.  An exec that fails ends the child as a shell would: 127 for a
    program not found, 126 for one that cannot be run, with one line on its stderr."""
    pid = os.fork()
    if pid:
        return pid
    code = 126
    try:
        for s in PYTHON_IGNORES:
            if s not in ign:
                signal.signal(s, signal.SIG_DFL)
        if log >= 0:
            os.dup2(log, 1)
            os.dup2(log, 2)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        msg, code = "not found", 127
    except PermissionError:
        msg = "Permission denied"
    except BaseException as e:
        msg = getattr(e, "strerror", None) or "cannot run"
    try:
        os.write(2, f"jobenv: {argv[0]}: {msg}\n".encode("utf-8", "replace"))
    finally:
        os._exit(code)


def _agent(run_dir: str, key: str) -> None:
    """Start this host's agent when no agent holds agent-<H> (O_EXCL): forked twice, so that it is
    no child of ours and outlives this rank; it holds none of the launcher's descriptors."""
    lock = os.path.join(run_dir, f"agent-{key}")
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    pid = os.fork()
    if pid == 0:
        try:
            if os.fork() != 0:
                os._exit(0)
            agent = _sibling("agent")
            agent.detach(fd)
            agent.Agent(run_dir, key, lock, started).run()
        finally:
            os._exit(0)
    os.close(fd)
    os.waitpid(pid, 0)


def agent_pid(path: str) -> int:
    """The pid of the host agent that the lock file `path` (agent-<H>) names, while it is still
    the process that started when the file says (never a pid reused since); 0 when none.  The
    one reader of the lock: the keeper wakes that agent, the reaper spares it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            words = os.read(fd, 64).split()
        finally:
            os.close(fd)
    except OSError:
        return 0
    if len(words) == 2 and words[0].isdigit() and len(words[0]) < 11 and started(int(words[0])) == \
            words[1].decode("ascii", "replace"):
        return int(words[0])
    return 0


def _wake(run_dir: str, key: str) -> None:
    """WINCH to the host agent (the pid and start time its lock names, only while they match):
    after the host's last rank it ends now, not at its next beat, and so do the launcher and step."""
    pid = agent_pid(os.path.join(run_dir, f"agent-{key}"))
    if pid:
        try:
            os.kill(pid, signal.SIGWINCH)
        except OSError:
            pass


def outcome(status: int) -> "tuple[str, int, int]":
    """(ledger text, exit code, signal) from a wait status."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"signal:{sig}", 128 + sig, sig
    code = os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128
    return f"exit:{code}", code, 0


def _wait(pid: int, launcher: str) -> int:
    """Wait for the program, passing on the signals `forwards` allows; its wait status."""
    waitset = set(FORWARD) | {signal.SIGCHLD}
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return status
        info = signal.sigwaitinfo(waitset)
        if info.si_signo != signal.SIGCHLD and forwards(info.si_signo, info.si_code, info.si_pid, launcher):
            try:
                os.kill(pid, info.si_signo)
            except OSError:
                pass


def _exit_as(code: int, sig: int) -> None:
    if sig:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the program dumped its own core
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, nor set
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
    os._exit(code)


def local_rank_arg(prog: "list[str]", at: str, local_rank: str) -> "list[str]":
    """`launch --local-rank-arg`: DeepSpeed's launcher's `--local_rank=N` (this rank's LOCAL_RANK),
    put after the first `at` words of the program's (its script: JOBENV_LOCAL_RANK_ARG, set by the
    launch); here because only each rank knows its N, and the keeper alone runs the words."""
    if not at:
        return prog
    if not (at.isascii() and at.isdigit() and 0 < int(at) <= len(prog)):
        _die(f"JOBENV_LOCAL_RANK_ARG={at[:20]!r} is not a position in the program's {len(prog)} words")
    if not (local_rank.isascii() and local_rank.isdigit() and len(local_rank) < 10):
        _die(f"LOCAL_RANK={local_rank[:20]!r} is not a local rank")
    n = int(at)
    return [*prog[:n], f"--local_rank={int(local_rank)}", *prog[n:]]


def main(argv: "list[str]") -> None:
    if len(argv) < 4:
        _die("usage: keeper.py LAUNCHER SIGIGN PROGRAM [ARGUMENT...]", 2)
    launcher, sigign, prog = argv[1], argv[2], argv[3:]
    env = dict(os.environ)
    rank = env.get("RANK", "0")
    if not (rank.isascii() and rank.isdigit() and len(rank) < 10):
        _die(f"RANK={rank[:20]!r} is not a rank")
    prog = local_rank_arg(prog, env.pop("JOBENV_LOCAL_RANK_ARG", ""), env.get("LOCAL_RANK", ""))
    run_dir, log_dir = env.get("JOBENV_RUN_DIR", ""), env.get("JOBENV_LOG_DIR", "")
    key, led = host_key(), -1
    if run_dir:
        path = os.path.join(run_dir, f"host-{key}.ledger")
        try:
            led = open_append(path)
        except OSError as e:
            _die(f"{path} exists and is not a regular file of ours ({e.strerror or e}); refusing to write through it")
        env["JOBENV_LEDGER"], env["JOBENV_HOOK_RANK"] = path, rank  # for the rank's Python hook
    log = _log_fd(log_dir, rank) if log_dir else -1
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(FORWARD) | {signal.SIGCHLD})
    if run_dir:
        _agent(run_dir, key)
    pid = _spawn(prog, env, log, set(mask), ignored_at_start(sigign))
    if log >= 0:
        os.close(log)
    if led >= 0:
        line = f"start {rank} {os.getpid()} {started(os.getpid())} {pid} {started(pid)} {now()}\n"
        try:
            os.write(led, line.encode())
        except OSError as e:
            os.kill(pid, signal.SIGKILL)
            _die(f"cannot write the ledger: {e.strerror}")
        _agent(run_dir, key)  # again: the host's agent may have ended since (its last rank ended)
    how, code, sig = outcome(_wait(pid, launcher))
    if led >= 0:
        try:
            os.write(led, f"end {rank} {how} {now()}\n".encode())
        except OSError:
            pass
        _wake(run_dir, key)
    _exit_as(code, sig)


if __name__ == "__main__":
    main(sys.argv)
