"""What `jobenv stage` shows while the hosts stage: hosts done / total, bytes and rate (rich on a
terminal, one plain line per host otherwise), and each host's report in one phrase.

Apart from jobenv.cli.stage because it is the one place that turns a worker's JSON report
(jobenv.stage.worker's `emit`) into words: the stage, its --clean and the tests read the same
phrases ("staged ... verified, received from a peer"), and nothing here decides anything.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Dict

import click

from jobenv.core.errors import one_line


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


class Progress:
    """hosts done / total, bytes, rate: rich on a terminal, plain lines otherwise."""

    def __init__(self, nhosts: int, per_host: int, tty: bool) -> None:
        self.nhosts, self.per_host, self.t0 = nhosts, per_host, time.time()
        self.bytes: Dict[str, int] = {}
        self.done = 0
        self.bar = None
        if tty:
            from rich.progress import BarColumn, DownloadColumn, Progress as RP, TextColumn, TransferSpeedColumn

            from jobenv.core.output import console

            self.bar = RP(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                          TransferSpeedColumn(), transient=True, console=console(sys.stderr))
            self.task = self.bar.add_task(f"hosts 0/{nhosts}", total=max(1, nhosts * per_host))
            self.bar.start()

    def event(self, rep: Dict[str, Any]) -> None:
        host = str(rep.get("host"))
        if rep.get("event") == "progress":
            self.bytes[host] = int(rep.get("bytes", 0))
        else:
            self.done += 1
            self.bytes[host] = self.per_host
            if self.bar is None:
                click.echo(one_line(f"{host}: {describe(rep)} [{self.done}/{self.nhosts} hosts]"))
        if self.bar is not None:
            self.bar.update(self.task, completed=sum(self.bytes.values()),
                            description=f"hosts {self.done}/{self.nhosts}")

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def describe(rep: Dict[str, Any]) -> str:
    if not rep.get("ok"):
        return f"FAILED: {rep.get('error')}"
    if "removed" in rep or "would_remove" in rep:
        return ("would remove " if rep.get("would_remove") else "removed " if rep.get("removed") else "nothing at ") + str(rep.get("prefix"))
    if rep.get("unchanged"):
        return f"unchanged {rep.get('prefix')} ({rep.get('entries')} entries verified)"
    secs = float(rep.get("seconds") or 0)
    rate = f", {mb(rep['bytes'] / secs)}/s" if secs else ""
    got = rep.get("relay")
    relay: Dict[str, Any] = got if isinstance(got, dict) else {}
    how = {"shared": ", read from the shared file system", "parent": ", received from a peer",
           "fallback": f", read from the shared file system (relay: {relay.get('fallback')})"}.get(str(relay.get("source")), "")
    return f"staged {rep.get('prefix')}: {mb(rep.get('bytes', 0))} in {secs:.1f} s{rate}, verified{how}"
