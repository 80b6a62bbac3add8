"""How a stage ends: which hosts failed, whether enough succeeded, and what the broadcast
read from the shared file system.

With --min-hosts N / --min-fraction F a stage with failed hosts still succeeds when enough
hosts have a verified copy; the failed ones are named (one warning line each) and entered
in the job's bad-host ledger (jobenv.launch.verdict.badhosts), so that the next `jobenv launch`
runs on the rest, as after a failover.
"""
from __future__ import annotations

import math
import os
import sys
from typing import Any, Dict, List, Optional

import click

from jobenv.core.errors import EXIT_ERROR, one_line
from jobenv.core.numparse import is_decimal
from jobenv.store.record import JobRecord


class Fraction(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """A fraction above 0 and at most 1, in ASCII digits (float() takes nan, inf and 1e-300)."""

    name = "fraction"

    def convert(self, value: object, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        text = str(value)
        x = float(text) if len(text) <= 20 and is_decimal(text) else -1.0
        if not 0 < x <= 1:
            self.fail(f"give a fraction above 0 and at most 1 (like 0.9), not {text!r}", param, ctx)
        return x


def needed(nhosts: int, min_hosts: Optional[int], min_fraction: Optional[float]) -> int:
    """Hosts that must succeed: all by default, else the larger of the two bounds (at most all)."""
    if min_hosts is None and min_fraction is None:
        return nhosts
    want = max(min_hosts or 0, math.ceil((min_fraction or 0) * nhosts - 1e-9))
    return max(1, min(want, nhosts))


def finish(rec: JobRecord, results: Dict[str, Dict[str, Any]], need: int, ledger: bool) -> None:
    """Name every failed host; exit EXIT_ERROR when fewer than `need` succeeded, else (when
    `ledger`) retire the failed hosts in the bad-host ledger."""
    bad = [h for h in rec.hosts if not results[h].get("ok")]
    fatal = rec.nhosts - len(bad) < need
    for h in bad:
        line = f"{h}: {results[h].get('error')}"
        sys.stderr.write(f"jobenv: {'error' if fatal else 'warning'}: {one_line(line)}\n")
    if fatal:
        raise click.exceptions.Exit(EXIT_ERROR)
    if bad and ledger:
        retire(rec, bad, results)


def retire(rec: JobRecord, bad: List[str], results: Dict[str, Dict[str, Any]]) -> None:
    from jobenv.store import files as store
    from jobenv.launch.verdict import badhosts

    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(os.environ))
    os.makedirs(runs, 0o700, exist_ok=True)
    for h in bad:
        why = one_line(str(results[h].get("error")))[:300]
        badhosts.add(runs, {"host": h, "rank": None, "how": "stage failed", "evidence": "stage", "run": "stage",
                            "why": why}, dict(os.environ), _warn)
    sys.stderr.write(f"jobenv: warning: {len(bad)} host(s) left out of later launches "
                     f"(bad-host ledger {badhosts.path(runs)}): {', '.join(bad)}\n")


def shared_read(results: Dict[str, Dict[str, Any]], archive_bytes: int) -> Optional[str]:
    """'shared file system read: 1.0x the archive (...)' for a broadcast, else None."""
    relays = [r["relay"] for r in results.values() if isinstance(r.get("relay"), dict)]
    if not relays:
        return None
    total = sum(int(r.get("shared_bytes") or 0) for r in relays)
    fell = [str(r.get("fallback")) for r in relays if r.get("fallback")]
    times = total / archive_bytes if archive_bytes else 0.0
    line = (f"shared file system read: {total / 1e6:,.1f} MB, {times:.2f}x the archive "
            f"({sum(1 for r in relays if r.get('source') == 'parent')} host(s) received it from a peer")
    return line + (f"; {len(fell)} fell back to the shared file system: {'; '.join(fell)[:300]})" if fell else ")")


def _warn(msg: str) -> None:
    sys.stderr.write(f"jobenv: warning: {one_line(msg)}\n")
