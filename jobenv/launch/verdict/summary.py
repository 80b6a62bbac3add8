"""The failure summary: which rank failed first, where, how, and its last lines of output;
after a timeout, which ranks never finished.  Words made of the attempt's verdict
(jobenv.rank.verdict: decided once, read here, never re-derived) and of the output the
supervisor kept (jobenv.launch.watch.supervise)."""
from __future__ import annotations

import os

from jobenv.core.errors import one_line
from jobenv.rank.ends import code_words, host_silent, words
from jobenv.launch import ranks
from jobenv.launch.plan import sizing
from jobenv.launch.watch import supervise

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Optional, Tuple

    from jobenv.rank.verdict import Verdict
    from jobenv.launch.types import Options


def summarize(verdict: Verdict, out: supervise.Supervised, run_dir: str, log_dir: Optional[str], size: sizing.Size,
              opts: Options, family: str = "") -> List[str]:
    """Lines naming what went wrong in a failed attempt or one a limit ended."""
    state, first = verdict.state, verdict.first
    lines: List[str] = []
    if verdict.cause in ("timeout", "idle-timeout"):
        limit = opts.limits.timeout if verdict.cause == "timeout" else opts.limits.idle_timeout
        what = "ran past" if verdict.cause == "timeout" else "printed nothing for"
        lines.append(f"launch {what} --{verdict.cause} {limit:g} s: killed it")
        left = ranks.unfinished(state, size.nranks, size.host_of)
        if state.ranks:
            lines.append("ranks that never finished: " + (ranks.compact(left) or "none recorded"))
        else:
            lines.append(f"no rank records in {run_dir} (no per-rank wrapper); hosts: {', '.join(size.hosts)}")
    if first is not None:
        count = failure_count(verdict, size.nranks)
        silent = host_silent(state, first.host or "") if first.how == "vanished" else []
        alike = same_failure(verdict)
        if silent:
            lines.append(f"{ranks.host_lost(first.host or '', silent, first.ended)} first {count}")
        elif alike:
            lines.append(f"ranks {named(alike)} failed the same way: {words(first)} {count}")
        else:
            lines.append(f"rank {first.rank} on {first.host} failed first: {words(first)} {count}")
        where, last = rank_lines(out, log_dir, family, first.rank)
        last, copies = once(last, 1 if where else len(alike))
        if where:
            lines.append(f"last lines of rank {first.rank}" + (f" ({where}):" if where != "label" else ":"))
        elif last and copies > 1:  # the same lines from every failed rank: once
            lines.append(f"last lines of output, the same from each of the {copies} failed ranks:")
        elif last:  # unlabelled output: every rank's, and the launcher's own
            lines.append("last lines of output (all ranks; --label or --log-dir DIR tell them apart):")
        lines += [f"  | {line}" for line in last]
        lines += hints(last)
    elif verdict.cause == "launcher":
        lines.append(f"launcher exited with {code_words(verdict.launcher_exit)}; no rank recorded a failure")
        if out.last_lines:
            lines.append("last lines of output:")
            lines += [f"  | {one_line(b.decode('utf-8', 'replace'))}" for b in out.last_lines[-10:]]
    return lines


# A failure's known words in the first failed rank's last lines -> the one line that names the
# fix: a program written for another launcher's habits fails in its own words, not jobenv's.
HINTS = (
    # DeepSpeed's engine checks --local_rank against LOCAL_RANK (runtime/engine.py): without
    # --local-rank-arg its argparse default 0 (or -1) meets each rank's own LOCAL_RANK
    (r"args\.local_rank=-?\d+ but env\['LOCAL_RANK'\]=\d+",
     "the program reads --local_rank, which DeepSpeed's launcher passes: `launch --local-rank-arg ...` gives each "
     "rank its own"),
)


def hints(last: List[str]) -> List[str]:
    """The HINTS whose words are in `last` (the first failed rank's last lines), each once."""
    import re

    return [hint for pattern, hint in HINTS if any(re.search(pattern, line) for line in last)]


def failure_count(verdict: Verdict, nranks: int) -> str:
    """'(1 of 4 ranks failed; 3 were stopped after it)', in the summary after the launch (live,
    the rest are still being stopped: no count yet)."""
    stopped = len(verdict.stopped)
    tail = f"; {stopped} {'was' if stopped == 1 else 'were'} stopped after it" if stopped else ""
    return f"({verdict.failed_count()} of {nranks} ranks failed{tail})"


def interrupted(verdict: Verdict) -> str:
    """The one line after a user's signal ended the launch: ^C is "interrupted", as torchrun says."""
    import signal

    ended = sum(1 for r in verdict.state.ranks.values() if r.how is not None)
    sig = verdict.signal or signal.SIGINT
    what = "interrupted" if sig == signal.SIGINT else f"stopped by {signal.Signals(sig).name}"
    return f"{what}: {ended} of {verdict.nranks} rank{'' if verdict.nranks == 1 else 's'} ended"


def same_failure(verdict: Verdict) -> List[ranks.RankState]:
    """Every rank that failed on its own, when two or more did and each ended as the first did
    (a missing script, a bad argument: the summary names them once); else [].  Ranks that were
    only stopped after the first (the verdict's `stopped`: Hydra's SIGKILL to the rest, recorded
    `lost` like a wrapper killed first) are not alike: the count says they were stopped."""
    first, stopped = verdict.first, set(verdict.stopped)
    if first is None:
        return []
    failed = sorted((r for r in verdict.state.ranks.values() if r.failed and r.rank not in stopped),
                    key=lambda r: r.rank)
    end = (first.how, first.code, first.signal)
    return failed if len(failed) >= 2 and all((r.how, r.code, r.signal) == end for r in failed) else []


def named(failed: List[ranks.RankState]) -> str:
    """`0-2 on vm`, `0-3 on node1, node2`: the ranks as ranges, then their hosts."""
    from jobenv.launch.watch.stacks import rank_ranges

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


def rank_lines(out: supervise.Supervised, log_dir: Optional[str], family: str, rank: int) -> Tuple[str, List[str]]:
    """(where, last lines) of `rank`: its log (where: the log's path), else its lines of labelled
    output (where: "label"), else ("", the last lines of all output, which do not tell ranks apart)."""
    log = os.path.join(log_dir, f"rank-{rank}.log") if log_dir else ""
    last = ranks.tail(log) if log else []
    if last:
        return log, last
    output = [one_line(b.decode("utf-8", "replace")) for b in out.last_lines]
    last = ranks.lines_of(output, family, rank)[-10:]
    return ("label", last) if last else ("", output[-10:])
