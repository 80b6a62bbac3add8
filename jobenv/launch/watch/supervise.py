"""Run one launch attempt under supervision: pass output through, watch the clocks, kill.

The launcher runs in its own session (so it is one process group we can kill whole, and
a terminal's job control cannot stop it); SIGINT, SIGTERM and SIGHUP sent to `jobenv
launch` (Ctrl-C, `timeout`, a closing terminal) are forwarded to it; SIGUSR1 prints the ranks' stacks (jobenv.launch.watch.stacks) and the launch goes on.  On --timeout or
--idle-timeout the group gets SIGTERM, then SIGKILL after a grace period; under srun or flux run
the launch is also cancelled by name (scancel, flux pkill: the launcher family's `cancel`), since
tasks on other nodes are not in our group.

If `jobenv launch` itself dies, of anything (SIGKILL from the OOM killer, Ctrl-\\, a
stray SIGUSR2), the launcher gets SIGTERM from the kernel and a watchdog ends what is left
of the launch on this host (jobenv.launch.watch.reaper).  On expiry or a forwarded signal, the
processes that left the group (a rank's `setsid` daemon, Open MPI's ranks) are ended too;
after a normal end, what a rank deliberately left running is left alone.

Output is copied byte for byte (a rank may print anything, UTF-8 or not) by one thread
per output (jobenv.launch.watch.output), so a slow or closed reader never holds up the ranks;
the last lines are kept for the failure summary when the ranks left no logs.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections import deque
from functools import partial as partial_

from jobenv.launch.watch import live as live_mod, output, reaper


from jobenv.launch.watch.clocks import GRACE_S, Watch

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Tuple

    from jobenv.launch.types import Preempt
    from jobenv.launch.types import Limits

# The failure summary quotes the failed rank's last lines from the last `keep_lines` lines
# of all output (the other ranks' and the launcher's dying words come after them: 20 was
# too few for 8 srun ranks), each cut to LINE_BYTES: at most ~800 KiB held.
LINE_BYTES = 4096


class Supervised:
    """What supervising one attempt saw: the launcher's own exit code (a signal as 128+N), a limit
    that ran out, a signal forwarded to it (the user's, or SIGPIPE when our reader went away), a
    pre-emption (--requeue), and the output kept for the summary.  No verdict: the attempt's
    verdict (jobenv.rank.verdict) is decided once from this and the ranks' ledgers."""

    def __init__(self, launcher_exit: int, expired: Optional[str] = None, signalled: Optional[int] = None,
                 last_lines: Optional[List[bytes]] = None, seconds: float = 0.0, dropped: int = 0,
                 preempted: Optional[int] = None) -> None:
        self.launcher_exit = launcher_exit
        self.preempted = preempted  # the pre-emption signal (--requeue) that ended the launch
        self.expired = expired  # "timeout" | "idle-timeout"
        self.signalled = signalled  # a signal we forwarded (Ctrl-C, timeout(1))
        self.last_lines = last_lines or []
        self.seconds = seconds
        self.dropped = dropped  # bytes of output our own reader was too slow to take


def _pump(fd: int, sel: selectors.BaseSelector, partial: Dict[int, bytes], last: Deque[bytes], out_for: Dict[int, output.Sink],
          keep_lines: int, stamps: Optional[Deque[float]] = None) -> bool:
    """Move what the launcher wrote on `fd` to our output; True when there was some.
    `stamps` gets when each line kept in `last` came (monotonic), line for line."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return False
    if not data:
        sel.unregister(fd)
        if partial[fd]:
            last.append(partial[fd][:LINE_BYTES])
            if stamps is not None:
                stamps.append(time.monotonic())
        del partial[fd]
        return False
    out_for[fd].put(data)
    lines = (partial[fd] + data).split(b"\n")
    partial[fd] = lines.pop()[-LINE_BYTES:]
    last.extend(line[:LINE_BYTES] for line in lines[-keep_lines:])
    if stamps is not None:
        stamps.extend([time.monotonic()] * len(lines[-keep_lines:]))
    return True


def _start(argv: List[str], env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """The launcher, in a session of its own, SIGTERMed if we die; JobenvError 127 when it
    cannot be started at all (and only then: a failure after the start is not "not found")."""
    from jobenv.core.errors import JobenvError

    try:
        return subprocess.Popen(argv, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=reaper.parent_death_signal())
    except OSError as exc:
        raise JobenvError(f"cannot run {argv[0]!r}: {exc.strerror} (is it on PATH?)", 127) from None


def _report_stacks(on_stacks: Callable[[List[Tuple[float, bytes]], bool], List[str]], last: Deque[bytes],
                   stamps: Deque[float], err: output.Sink, at_limit: bool) -> None:
    """The report of the ranks' stacks, given the output kept with each line's age, on our
    stderr's writer (never inside a rank's line)."""
    now = time.monotonic()
    for line in on_stacks([(now - t, b) for t, b in zip(stamps, last)], at_limit):
        err.put(f"jobenv: {line}\n".encode())


def _forward_signals(pgid: int, forwarded: Dict[str, int], asked: Optional[Dict[str, int]] = None,
                     preempt: Tuple[int, ...] = ()) -> Dict[signal.Signals, Any]:
    """SIGINT, SIGTERM and SIGHUP to us go to the launcher's group; a first `preempt` signal
    (--requeue) is only noted: the loop tells the ranks (clocks.Watch.preempted); SIGUSR1, when it is
    no pre-emption signal, asks for the ranks' stacks (`asked`, served by the loop: the launch
    goes on); the old handlers, to restore."""
    def forward(signum: int, _frame: Any) -> None:
        if signum in preempt and "preempt" not in forwarded:
            forwarded["preempt"] = signum
            return
        forwarded["sig"] = signum
        reaper.kill_group(pgid, signum)

    old: Dict[signal.Signals, Any] = {}
    for sig in dict.fromkeys((signal.SIGINT, signal.SIGTERM, signal.SIGHUP, *map(signal.Signals, preempt))):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup: keep ignoring SIGHUP
            old[sig] = signal.signal(sig, forward)
    if asked is not None and signal.SIGUSR1 not in old:  # unless it is taken above (a pre-emption signal)
        old[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda _s, _f: asked.update(stacks=1))
    return old


def run(argv: List[str], env: Mapping[str, str], limits: Limits, log_dir: Optional[str] = None,
        on_expire: Optional[Callable[[], None]] = None, before_kill: Optional[Callable[[], None]] = None,
        keep_lines: int = 200, preempt: Optional[Preempt] = None,
        stdout_fd: int = 1, stderr_fd: int = 2,
        on_stacks: Optional[Callable[[List[Tuple[float, bytes]], bool], List[str]]] = None) -> Supervised:
    """Start argv, copy its output, enforce the limits; JobenvError if it cannot start.
    `on_stacks(last lines with their age in s, at a limit)` gives the report of the ranks' stacks, printed when
    a limit runs out (before the kill) and on SIGUSR1 (unless --requeue takes SIGUSR1 as pre-emption)."""
    output.ensure_std_fds()
    proc = _start(argv, env)
    pgid = proc.pid
    mark = reaper.marker(env.get("JOBENV_RUN_DIR", ""))
    watchdog = reaper.Watchdog(pgid, mark, on_expire) if env.get("JOBENV_RUN_DIR") else None
    last: Deque[bytes] = deque(maxlen=keep_lines)
    stamps: Deque[float] = deque(maxlen=keep_lines)  # when each line of `last` came
    watch = Watch(limits, log_dir, pgid, mark, on_expire, before_kill)
    watch.preempt = preempt
    forwarded: Dict[str, int] = {}
    asked: Dict[str, int] = {}
    old = _forward_signals(pgid, forwarded, asked if on_stacks else None, preempt.signals if preempt else ())
    sinks = _sinks(pgid, forwarded, stdout_fd, stderr_fd)
    out_for = {proc.stdout.fileno(): sinks[stdout_fd], proc.stderr.fileno(): sinks[stderr_fd]}  # type: ignore[union-attr]
    if on_stacks:
        watch.stacks = partial_(_report_stacks, on_stacks, last, stamps, sinks[stderr_fd])
    if env.get("JOBENV_RUN_DIR"):
        err = sinks[stderr_fd]
        watch.live = live_mod.Live(env["JOBENV_RUN_DIR"], lambda msg: err.put(f"jobenv: {msg}\n".encode()))
    kept: Optional[List[bytes]] = None
    try:
        kept = _copy(out_for, watch, forwarded, asked, last, stamps, keep_lines)
    finally:
        rc = proc.wait()
        _wind_up(watch, watchdog, pgid, mark, sinks, forwarded, old)
    return _outcome(rc, watch, forwarded, list(last) if kept is None else kept, sinks)


def _sinks(pgid: int, forwarded: Dict[str, int], stdout_fd: int, stderr_fd: int) -> Dict[int, output.Sink]:
    """Our stdout and stderr writers; EPIPE on either ends the launch as SIGPIPE ends mpiexec."""
    def reader_gone() -> None:
        if not forwarded:
            forwarded["sig"] = signal.SIGPIPE
            reaper.kill_group(pgid, signal.SIGTERM)
    return {stdout_fd: output.Sink(stdout_fd, reader_gone), stderr_fd: output.Sink(stderr_fd, reader_gone)}


def _copy(out_for: Dict[int, output.Sink], watch: Watch, forwarded: Dict[str, int], asked: Dict[str, int],
          last: Deque[bytes], stamps: Deque[float], keep_lines: int) -> Optional[List[bytes]]:
    """Copy the launcher's output until both its pipes close, asking the clocks between reads;
    the output as it was when we ended the launch after a failure (None: we did not)."""
    kept: Optional[List[bytes]] = None
    partial = {fd: b"" for fd in out_for}
    sel = selectors.DefaultSelector()
    for fd in partial:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    try:
        while partial:
            for key, _ in sel.select(timeout=watch.wait()):
                if _pump(int(key.fd), sel, partial, last, out_for, keep_lines, stamps):
                    watch.last_output = time.monotonic()
            watch.tick(forwarded)
            if asked.pop("stacks", 0) and watch.stacks:
                watch.stacks(False)
            if watch.ended and kept is None:  # what the output said before we ended the rest of the launch
                kept = list(last)
    finally:
        sel.close()
    return kept


def _wind_up(watch: Watch, watchdog: Optional[reaper.Watchdog], pgid: int, mark: bytes,
             sinks: Dict[int, output.Sink], forwarded: Dict[str, int], old: Dict[signal.Signals, Any]) -> None:
    """After the launcher's end: end stragglers where we ended the launch, stop the watchdog,
    flush our output, give back the signal handlers.  (A failure the polls had not named is the
    failure summary's to name: jobenv.launch.verdict.summary.)"""
    if watch.expired or watch.ended or forwarded:  # stragglers that closed their output or left the group
        reaper.end_launch(pgid, mark, grace=0.0 if watch.expired else GRACE_S)
    if watchdog is not None:
        watchdog.done()
    for sink in sinks.values():
        sink.drain(lambda: "sig" in forwarded or watch.past_deadline())
    for sig, handler in old.items():
        signal.signal(sig, handler)


def _outcome(rc: int, watch: Watch, forwarded: Dict[str, int], last_lines: List[bytes],
             sinks: Dict[int, output.Sink]) -> Supervised:
    """What this attempt's supervision saw; the launcher's exit code as a shell gives it (128+N
    for signal N)."""
    preempted = forwarded.get("preempt") if watch.preempt_at is not None else None
    expired = None if watch.expired == "preempted" else watch.expired
    return Supervised(launcher_exit=128 - rc if rc < 0 else rc, expired=expired, signalled=forwarded.get("sig"),
                      preempted=preempted, last_lines=last_lines, seconds=time.monotonic() - watch.start,
                      dropped=sum(s.dropped for s in sinks.values()))


def cancel_step(how: str, env: Mapping[str, str], name: str, signame: str = "") -> None:
    """Cancel the launch named `name` in this job, whose tasks on other nodes are not in our
    process group: `how` is the launcher family's `cancel` (jobenv.runtime.families).  With
    `signame` (USR1...), Slurm sends that signal to every process of the step instead."""
    try:
        if how == "slurm-step":
            _scancel_step(env, name, signame)
        elif how == "flux-pkill" and not signame:
            subprocess.run(["flux", "pkill", name], env=dict(env), capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        pass


def _scancel_step(env: Mapping[str, str], step_name: str, signame: str = "") -> None:
    """Cancel the Slurm step(s) named `step_name` in this job (scancel --name names jobs, not steps)."""
    jobid = env.get("SLURM_JOB_ID")
    if not jobid:
        return
    out = subprocess.run(["squeue", "-h", "-s", "-j", jobid, "-o", "%i %j"], env=dict(env),
                         capture_output=True, text=True, timeout=20).stdout
    for line in out.splitlines():
        step, _, name = line.partition(" ")
        if name.strip() == step_name:
            subprocess.run(["scancel", *([f"--signal={signame}"] if signame else []), step], env=dict(env),
                           capture_output=True, timeout=20)
