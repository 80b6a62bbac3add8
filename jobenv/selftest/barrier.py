"""The selftest's check-in and watchdog: ranks that never arrive, or never reach a phase,
are named with their hosts instead of hanging."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, List, Optional

from ..runtime import DistInfo
from ..runtime.checkin import CheckinError, Client, Server, checkin_port, ranks_hosts
from .codes import EXIT_TIMEOUT


def process_start_time() -> Optional[float]:
    """When the OS started this process (wall clock), from /proc: 10 ms resolution."""
    try:
        with open("/proc/self/stat", "rb") as f:
            ticks = int(f.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


class Link:
    """This rank's connection to the check-in barrier (rank 0 holds the server)."""

    def __init__(self, info: DistInfo, host: str, deadline: float) -> None:
        self.info = info
        self.server: Optional[Server] = None
        self.client: Optional[Client] = None
        if info.world_size == 1:
            return
        me = {"rank": info.rank, "host": host, "pid": os.getpid()}
        addr = info.master_addr or "127.0.0.1"  # the caller has refused a missing MASTER_ADDR
        if info.rank == 0:
            self.server = Server(addr, checkin_port(info), info.world_size, me)
            missing = self.server.wait_hello(deadline)
            if missing:
                raise CheckinError(f"ranks {ranks_hosts(missing, info)} never checked in within the timeout; "
                                   f"{info.world_size - len(missing)} of {info.world_size} did")
        else:
            self.client = Client(addr, checkin_port(info), me, deadline)

    def mark(self, phase: str) -> None:
        end = self.server or self.client
        if end is not None:
            end.mark(phase)

    def not_at(self, phase: str) -> List[int]:
        return self.server.not_at(phase) if self.server else []


class Watchdog:
    """Ends the process when a phase outlives the run's deadline, naming who is missing."""

    def __init__(self, info: DistInfo, host: str, link: Link, deadline: float) -> None:
        self.info, self.host, self.link, self.deadline = info, host, link, deadline

    def phase(self, name: str) -> Any:
        wd = self

        class _Phase:
            def __enter__(self) -> Any:
                wd.link.mark(name)
                self.timer = threading.Timer(max(0.0, wd.deadline - time.time()), wd.fire, args=(name,))
                self.timer.daemon = True
                self.timer.start()
                self.t0 = time.time()
                return self

            def __exit__(self, *exc: object) -> None:
                self.timer.cancel()
                self.seconds = time.time() - self.t0

        return _Phase()

    def fire(self, name: str) -> None:
        msg = f"jobenv.selftest: TIMEOUT: phase {name} did not finish before the deadline on rank {self.info.rank} ({self.host})"
        missing = self.link.not_at(name)
        if missing:
            msg += f"; ranks that never reached it: {ranks_hosts(missing, self.info)}"
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()
        os._exit(EXIT_TIMEOUT)


