"""The failure summary: which rank failed first, where, how, and its last lines of output;
after a timeout, which ranks never finished.  A pure function of what the ranks left
behind (jobenv.launch.ranks) and what the supervisor saw (jobenv.launch.supervise)."""
from __future__ import annotations

import os

from jobenv.core.errors import one_line
from . import ranks, sizing, supervise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

    from .types import Options


def summarize(out: supervise.Outcome, run_dir: str, log_dir: Optional[str], size: sizing.Size, opts: Options,
              family: str = "", at_expiry: Optional[ranks.RunState] = None) -> Tuple[List[str], Optional[str]]:
    """Lines naming what went wrong, and the host of the first failed rank (for --exclude-failed).

    After a timeout the ranks' state is the one seen just before the kill: the exits the
    kill itself caused say nothing about what went wrong."""
    state = at_expiry if out.expired and at_expiry is not None else ranks.read(run_dir)
    if not out.expired:  # the launch is over: a rank with no end vanished
        ranks.infer_vanished(state)
    lines: List[str] = []
    if out.expired:
        limit = opts.limits.timeout if out.expired == "timeout" else opts.limits.idle_timeout
        what = "ran past" if out.expired == "timeout" else "printed nothing for"
        lines.append(f"launch {what} --{out.expired} {limit:g} s: killed it")
        left = ranks.unfinished(state, size.nranks, size.host_of)
        if state.ranks:
            lines.append("ranks that never finished: " + (ranks.compact(left) or "none recorded"))
        else:
            lines.append(f"no rank records in {run_dir} (no per-rank wrapper); hosts: "
                         f"{', '.join(size.hosts)}")
    first = ranks.first_failure(state)
    if first is not None:
        count = ranks.failure_count(state, first, size.nranks)
        silent = ranks.host_silent(state, first.host or "") if first.exit == "vanished" else []
        alike = same_failure(state, first)
        if silent:
            lines.append(f"{ranks.host_lost(first.host or '', silent, first.ended)} first {count}")
        elif alike:
            lines.append(f"ranks {named(alike)} failed the same way: {ranks.describe_exit(first.exit or '')} {count}")
        else:
            lines.append(f"rank {first.rank} on {first.host} failed first: {ranks.describe_exit(first.exit or '')}"
                         f" {count}")
        where, last = rank_lines(out, log_dir, family, first.rank)
        last, copies = once(last, 1 if where else len(alike))
        if where:
            lines.append(f"last lines of rank {first.rank}" + (f" ({where}):" if where != "label" else ":"))
        elif last and copies > 1:  # the same lines from every failed rank: once
            lines.append(f"last lines of output, the same from each of the {copies} failed ranks:")
        elif last:  # unlabelled output: every rank's, and the launcher's own
            lines.append("last lines of output (all ranks; --label or --log-dir DIR tell them apart):")
        lines += [f"  | {line}" for line in last]
    elif not out.expired:
        lines.append(f"launcher exited with {ranks.describe_exit(str(out.returncode))}; "
                     "no rank recorded a failure")
        if out.last_lines:
            lines.append("last lines of output:")
            lines += [f"  | {one_line(b.decode('utf-8', 'replace'))}" for b in out.last_lines[-10:]]
    return lines, first.host if first is not None else None


def interrupted(state: ranks.RunState, signum: int) -> str:
    """The one line after a user's signal ended the launch: ^C is "interrupted", as torchrun says."""
    import signal

    ended = sum(1 for r in state.ranks.values() if r.exit is not None)
    what = "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"
    return f"{what}: {ended} rank{'' if ended == 1 else 's'} ended"


def same_failure(state: ranks.RunState, first: ranks.RankState) -> List[ranks.RankState]:
    """Every rank that failed on its own, when two or more did and each ended as the first did
    (a missing script, a bad argument: the summary names them once); else [].  Ranks that were
    only stopped after the first (`ranks.stopped_after`: Hydra's SIGKILL to the rest, recorded
    `lost` like a wrapper killed first) are not alike: the count says they were stopped."""
    stopped = set(ranks.stopped_after(state, first))
    failed = sorted((r for r in state.ranks.values() if r.failed and r.rank not in stopped), key=lambda r: r.rank)
    return failed if len(failed) >= 2 and all(r.exit == first.exit for r in failed) else []


def named(failed: List[ranks.RankState]) -> str:
    """`0-2 on vm`, `0-3 on node1, node2`: the ranks as ranges, then their hosts."""
    from .stacks import rank_ranges

    hosts = list(dict.fromkeys(r.host or "?" for r in failed))
    return f"{rank_ranges(r.rank for r in failed)} on {ranks.compact(hosts, 4)}".replace("; ", ", ")


def once(lines: List[str], copies: int) -> Tuple[List[str], int]:
    """Lines that are one block printed `copies` times over (each failed rank's same error) as
    that block and `copies`; else the lines as they are and 1."""
    if copies >= 2 and lines and len(lines) % copies == 0:
        n = len(lines) // copies
        if all(line == lines[i % n] for i, line in enumerate(lines)):
            return lines[:n], copies
    return lines, 1


def rank_lines(out: supervise.Outcome, log_dir: Optional[str], family: str, rank: int) -> Tuple[str, List[str]]:
    """(where, last lines) of `rank`: its log (where: the log's path), else its lines of labelled
    output (where: "label"), else ("", the last lines of all output, which do not tell ranks apart)."""
    log = os.path.join(log_dir, f"rank-{rank}.log") if log_dir else ""
    last = ranks.tail(log) if log else []
    if last:
        return log, last
    output = [one_line(b.decode("utf-8", "replace")) for b in out.last_lines]
    last = ranks.lines_of(output, family, rank)[-10:]
    return ("label", last) if last else ("", output[-10:])
