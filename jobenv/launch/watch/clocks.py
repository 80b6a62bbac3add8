"""The clocks of one supervised attempt, and what they decide.

--timeout and --idle-timeout (a rank writing only to its log counts as output), a failure
the launcher left the other ranks running after (jobenv.launch.watch.live), a pre-emption's
grace (--requeue): each ends the launch with SIGTERM to its group (and a cancel by name
under srun or flux run), then SIGKILL after GRACE_S.  jobenv.launch.watch.supervise moves the
output and asks these clocks once per pass of its loop.
"""
from __future__ import annotations

import os
import signal
import time

from jobenv.launch.watch import live as live_mod

from jobenv.launch.watch import reaper

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Callable, Dict, Optional, Tuple

    from jobenv.launch.types import Preempt
    from jobenv.launch.types import Limits

GRACE_S = 5.0  # from SIGTERM to SIGKILL of the launch's group


def _newest_mtime(log_dir: Optional[str]) -> float:
    """When any rank last wrote to its log (ranks may log there instead of the pipe)."""
    newest = 0.0
    if not log_dir:
        return newest
    try:
        with os.scandir(log_dir) as it:
            for e in it:
                try:
                    newest = max(newest, e.stat().st_mtime)
                except OSError:
                    pass
    except OSError:
        pass
    return newest


def _expiry(limits: Limits, start: float, now: float, last_output: float, log_dir: Optional[str]
            ) -> Tuple[Optional[str], float]:
    """Which limit ran out, if any, and when output was last seen (a rank writing only to
    its log counts as output)."""
    if limits.timeout is not None and now - start >= limits.timeout:
        return "timeout", last_output
    if limits.idle_timeout is not None and now - last_output >= limits.idle_timeout:
        logged = _newest_mtime(log_dir)
        if logged and time.time() - logged < limits.idle_timeout:
            return None, now - (time.time() - logged)
        return "idle-timeout", last_output
    return None, last_output


class Watch:
    """The clocks of one attempt: when it started, when output was last seen, which limit ran
    out, and when the SIGTERMed group gets SIGKILL."""

    def __init__(self, limits: Limits, log_dir: Optional[str], pgid: int, mark: bytes,
                 on_expire: Optional[Callable[[], None]], before_kill: Optional[Callable[[], None]]) -> None:
        self.limits, self.log_dir, self.pgid, self.mark = limits, log_dir, pgid, mark
        self.on_expire, self.before_kill = on_expire, before_kill
        self.start = self.last_output = time.monotonic()
        self.expired: Optional[str] = None
        self.kill_at: Optional[float] = None
        self.live: Optional[live_mod.Live] = None  # names failures from the ledgers as they happen
        self.ended = False  # ended by us after a failure the launcher left running
        self.stacks: Optional[Callable[[bool], None]] = None  # prints the ranks' stacks (at a limit?)
        self.preempt: Optional[Preempt] = None
        self.preempt_at: Optional[float] = None  # the end of the ranks' grace after a pre-emption

    def preempted(self, forwarded: Dict[str, int], now: float) -> bool:
        """Tell the ranks of a pre-emption signal the handler noted; True once their grace is over."""
        if self.preempt is None or "preempt" not in forwarded:
            return False
        if self.preempt_at is None:
            self.preempt.deliver(forwarded["preempt"])
            self.preempt_at = now + self.preempt.grace
        return now >= self.preempt_at

    def wait(self) -> float:
        """How long the next select may block: until the --timeout runs out, at most 1 s."""
        if self.limits.timeout is None or self.expired is not None:
            return 1.0
        return min(1.0, max(0.0, self.start + self.limits.timeout - time.monotonic()))

    def _terminate(self, now: float) -> None:
        reaper.kill_group(self.pgid, signal.SIGTERM)
        reaper.signal_marked(self.mark, signal.SIGTERM)  # what left the group (setsid)
        if self.on_expire:
            self.on_expire()
        self.kill_at = now + GRACE_S

    def past_deadline(self) -> bool:
        """Whether the --timeout has run out (the output still queued is then given up)."""
        return self.limits.timeout is not None and time.monotonic() >= self.start + self.limits.timeout

    def tick(self, forwarded: Dict[str, int]) -> None:
        """Enforce the limits: SIGTERM (and cancel) when one runs out, a failure was named and
        the launcher left the rest running, or a pre-emption's grace is over; SIGKILL after the grace."""
        now = time.monotonic()
        if self.expired is None and not self.ended:
            self.expired, self.last_output = _expiry(self.limits, self.start, now, self.last_output, self.log_dir)
            if self.expired is None and self.preempted(forwarded, now):
                self.expired = "preempted"
            if self.expired:
                if self.before_kill:  # what the ranks had done when time ran out, before we kill them
                    self.before_kill()
                if self.stacks and self.expired != "preempted":  # where each one is, stopped ones resumed to tell
                    self.stacks(True)
                self._terminate(now)
            elif self.live is not None and "sig" not in forwarded and self.live.poll(now):
                # (after a user's signal the ranks' ends are its doing, not failures to name)
                self.ended = True
                self._terminate(now)
        if self.kill_at is not None and now >= self.kill_at:
            reaper.kill_group(self.pgid, signal.SIGKILL)
            reaper.signal_marked(self.mark, signal.SIGKILL)
            self.kill_at = None
