"""Hang diagnosis: every running rank's Python stack, grouped as LLNL's STAT groups them.

A hang at scale is one rank (or a few) somewhere else while all the others wait for it in
a collective.  So the stacks are grouped: identical main-thread stacks make one line,
most common first, ranks written as compact ranges ("7 ranks (0-5,7) in all_reduce at
distributed_c10d.py:3252 ← step at train.py:11"), the odd ones out after; the lines are
capped so that 1,000 ranks read as well as 8.  The ranks that gave no stack are named with
the reason (no hook in a program that is not Python or runs with --no-hook; a host whose
agent never acked the request; a rank stopped or deaf to the signal), and so is the rank
silent longest.

The dumps come from the rank's hook (jobenv/rankhook) when the launch armed it (`--stacks`: a
rank is otherwise left exactly as the bare launcher starts it): CPython faulthandler's
all-thread format, appended by its C handler to `<run>/stacks/rank-<R>.<pid>.txt` (one file per
Python process) when the host agent passes on a `stacks` request (jobenv.launch.watch.requests;
`stacks:cont` at a time limit also resumes a stopped rank, whose dump is then delivered).  A
dump is what the file grew by after the request.  They stay in the run directory.

Parsing, grouping and rendering are pure functions of the dumps' text; `collect` does the I/O.
"""
from __future__ import annotations

import os
import re
import time

from jobenv.core.errors import one_line

TYPE_CHECKING = False  # `import typing` costs ~5 ms: `launch` imports this on every run
if TYPE_CHECKING:
    from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

    from jobenv.rank.ledger import Ledgers, RankState

    Frame = Tuple[str, str, str]  # file, line, function, as faulthandler wrote them
    Stack = Tuple[Frame, ...]  # innermost call first

DEADLINE_S = 5.0  # how long a collection waits for the hosts' acks and the ranks' dumps
AFTER_ACKS_S = 1.0  # once every host acked, how long a missing dump is still waited for
POLL_S = 0.2  # how often the ledgers and the dumps are looked at meanwhile
MAX_DUMP_BYTES = 2 << 20  # faulthandler caps a dump at 100 threads x 100 frames
MAX_GROUPS = 10  # lines of stacks printed; the rest are counted, their dumps kept
SHOWN_FRAMES = 4  # frames of a stack printed, innermost first
MAX_RANGES = 12  # pieces of a rank list printed ("0-5,7,9-12,...")

_FRAME = re.compile(r'^\s+File "(.*)", line (\S+) in (.*)$')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-fA-F]+ ")
_NO_HOOK = "no hook (not a Python program, or --no-hook)"
UNARMED = "no stacks: the ranks were launched without --stacks (jobenv launch --stacks arms faulthandler in each)"


def parse(text: str) -> Optional[Stack]:
    """The main thread's stack in a faulthandler all-thread dump, or None when the dump does
    not hold it.  faulthandler lists the newest thread first, so the main thread is the
    last one, unless it cut the list at 100 threads (an unindented "..."): then the main
    thread is not in it (nor is "Current thread" it: the hook dumps from a thread of its own)."""
    threads: List[List[Frame]] = []
    for line in text.splitlines():
        if _THREAD.match(line):
            threads.append([])
            continue
        frame = _FRAME.match(line)
        if frame and threads:
            threads[-1].append((frame.group(1), frame.group(2), frame.group(3)))
        elif line.rstrip() == "..." and threads:
            return None
    return tuple(threads[-1]) if threads else None


def rank_ranges(ranks: Iterable[int], most: int = MAX_RANGES) -> str:
    """Ranks as compact ranges, "0-5,7,9"; past `most` pieces, ",... (N in all)"."""
    pieces: List[List[int]] = []
    nums = sorted(set(ranks))
    for r in nums:
        if pieces and pieces[-1][1] + 1 == r:
            pieces[-1][1] = r
        else:
            pieces.append([r, r])
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in pieces[:most])
    return text + (f",... ({len(nums)} in all)" if len(pieces) > most else "")


def who(ranks: Sequence[int]) -> str:
    """"rank 6" or "7 ranks (0-5,7)"."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks ({rank_ranges(ranks)})"


def group(stacks: Mapping[int, Stack]) -> List[Tuple[Stack, List[int]]]:
    """Identical stacks together, the most ranks first (then the lowest rank)."""
    by: Dict[Stack, List[int]] = {}
    for rank in sorted(stacks):
        by.setdefault(stacks[rank], []).append(rank)
    return sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))


def describe(stack: Stack, source: Optional[Callable[[str, str], Optional[str]]] = None) -> str:
    """"all_reduce at distributed_c10d.py:3252 ← step at train.py:11 ← ... (3 more)"; the
    innermost frame's source line in backquotes when `source` finds it (a C call such
    as time.sleep shows only there: faulthandler lists Python frames)."""
    if not stack:
        return "no Python frame"
    runs: List[Tuple[Frame, int]] = []  # a recursion reads as one frame "x99"
    for frame in stack:
        if runs and runs[-1][0] == frame:
            runs[-1] = (frame, runs[-1][1] + 1)
        else:
            runs.append((frame, 1))
    parts = []
    for i, ((path, line, func), times) in enumerate(runs[:SHOWN_FRAMES]):
        text = f"{func} at {os.path.basename(path)}:{line}" + (f" x{times}" if times != 1 else "")
        code = source(path, line) if i == 0 and source is not None else None
        parts.append(f"{text} `{code}`" if code else text)
    more = sum(t for _, t in runs[SHOWN_FRAMES:])
    return " ← ".join(parts) + (f" ← ... ({more} more)" if more else "")


def render(stacks: Mapping[int, Stack], missing: Mapping[str, List[int]], where: str,
           source: Optional[Callable[[str, str], Optional[str]]] = None) -> List[str]:
    """The grouped stacks, at most MAX_GROUPS lines of them, then the ranks without one."""
    groups = group(stacks)
    lines = [f"stacks of {len(stacks)} rank{'s' if len(stacks) != 1 else ''} (dumps in {where}):" if stacks
             else "no Python stack from any rank:"]
    for stack, ranks in groups[:MAX_GROUPS]:
        lines.append(f"  {who(ranks)} in {describe(stack, source)}")
    rest = groups[MAX_GROUPS:]
    if rest:
        lines.append(f"  and {len(rest)} other stacks of {sum(len(r) for _, r in rest)} ranks "
                     f"({rank_ranges(r for _, rs in rest for r in rs)})")
    for why, ranks in sorted(missing.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  no stack from {who(sorted(ranks))}: {why}")
    return [one_line(line) for line in lines]


def silent_longest(running: Iterable[int], silence: Mapping[int, float], last: str, none: str) -> Optional[str]:
    """Which running rank has been silent longest, by `silence` (rank -> seconds since its
    last output: `last` names it, "its log last written"); a rank without any (`none` says
    where) is silent longer than every other."""
    running = sorted(running)
    if len(running) < 2 or not silence:  # one rank left, or nothing to tell them apart by
        return None
    quiet = [r for r in running if r not in silence]
    if quiet:
        return f"silent longest: {who(quiet)}: {none}"
    longest = max(silence[r] for r in running)
    tied = [r for r in running if silence[r] > longest - 1.0]  # a second apart: no telling them apart
    return f"{who(tied)} silent longest: {last} {longest:.0f} s ago"


def why_missing(state: RankState, acked: Mapping[str, float]) -> str:
    """Why a running rank gave no dump.  Its host is named as the ledger's file names it,
    as the acks are."""
    if state.hook_pid is None:
        return _NO_HOOK
    if state.host is not None and state.host not in acked:
        return f"host {state.host} never acked the request"
    return "no dump written (stopped, or the dump signal blocked or ignored)"


def silence_of(lines: Sequence[Tuple[float, bytes]], family: str) -> Dict[int, float]:
    """Rank -> age in s of its last labelled line in `lines` ((age, line): what the supervisor kept)."""
    from jobenv.runtime.families import BY_NAME, label_rank

    row = BY_NAME.get(family)
    seen: Dict[int, float] = {}
    for age, raw in lines if row is not None else ():
        rank = label_rank(row, raw.decode("utf-8", "replace"))  # type: ignore[arg-type]  # row: not None
        if rank is not None:
            seen[rank] = age
    return seen


def _log_silence(log_dir: Optional[str], ranks: Iterable[int]) -> Dict[int, float]:
    """Rank -> seconds since its log under --log-dir was last written."""
    out: Dict[int, float] = {}
    now = time.time()
    for r in ranks if log_dir else ():
        try:
            out[r] = max(0.0, now - os.lstat(os.path.join(log_dir, f"rank-{r}.log")).st_mtime)  # type: ignore[arg-type]
        except OSError:
            pass
    return out


def _source_reader() -> Callable[[str, str], Optional[str]]:
    """A reader of one source line (absolute paths only: a relative one was the rank's cwd's;
    a regular file only, by jobenv's one reader of names others may have planted)."""
    from jobenv.core.readfile import read_bytes

    cache: Dict[str, List[str]] = {}

    def source(path: str, line: str) -> Optional[str]:
        if not os.path.isabs(path) or not line.isdigit():
            return None
        if path not in cache:
            try:
                cache[path] = read_bytes(path, 4 << 20).decode("utf-8", "replace").splitlines()
            except OSError:
                cache[path] = []
        lines, n = cache[path], int(line)
        text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        return (text[:77] + "...") if len(text) > 80 else text or None
    return source


def _sizes(where: str, pids: Mapping[int, int]) -> Dict[int, int]:
    """Rank -> size of its Python's dump file (rank-<R>.<pid>.txt) now; absent when it has none."""
    out = {}
    for rank, pid in pids.items():
        try:
            out[rank] = os.lstat(os.path.join(where, f"rank-{rank}.{pid}.txt")).st_size
        except OSError:
            pass
    return out


def _wait(ledgers: Ledgers, where: str, seq: int, pids: Mapping[int, int], before: Mapping[int, int],
          hosts: Iterable[str], deadline: float) -> Tuple[Dict[int, int], Dict[str, float]]:
    """Poll until every host acked `seq` and every hooked rank's dump file grew (or AFTER_ACKS_S
    after the last ack, or `deadline`): the ranks that dumped and the acks by host.  The ledgers
    are read incrementally (only what was appended: 1,000 hosts polled every POLL_S)."""
    want_hosts = set(hosts)
    start, all_acked = time.monotonic(), None
    while True:
        acked = {h.name: h.acks[seq] for h in ledgers.poll().hosts.values() if seq in h.acks}
        grown = {r: n for r, n in _sizes(where, pids).items() if n > before.get(r, 0)}
        now = time.monotonic()
        if want_hosts <= set(acked):
            all_acked = all_acked if all_acked is not None else now
            if set(pids) <= set(grown):
                time.sleep(POLL_S)  # the last one may be mid-write: faulthandler writes line by line
                return {r: n for r, n in _sizes(where, pids).items() if n > before.get(r, 0)}, acked
        if now - start >= deadline or all_acked is not None and now - all_acked >= AFTER_ACKS_S:
            return grown, acked
        time.sleep(POLL_S)


def _read_from(path: str, offset: int) -> str:
    """What `path` (a regular file, never a planted FIFO) holds after `offset`, at most MAX_DUMP_BYTES."""
    from jobenv.core.readfile import open_regular

    fd, st = open_regular(path)
    try:
        return os.pread(fd, min(MAX_DUMP_BYTES, max(0, st.st_size - offset)), offset).decode("utf-8", "replace")
    finally:
        os.close(fd)


def collect(run_dir: str, cont: bool, nranks: int = 0, log_dir: Optional[str] = None, family: str = "",
            last_lines: Sequence[Tuple[float, bytes]] = (), deadline: float = DEADLINE_S) -> List[str]:
    """Ask every running rank of the attempt in `run_dir` for its stack, wait for them (at
    most `deadline`), and return the report's lines.  `cont`: a time limit ran out, resume
    a stopped rank so it dumps too.  The dumps stay in `<run_dir>/stacks/`."""
    from jobenv.store.paths import own_dir
    from jobenv.rank import ledger
    from jobenv.launch.watch import requests

    where = os.path.join(run_dir, "stacks")
    if not os.path.lexists(where):  # made at the attempt's start by --stacks alone
        return [UNARMED]
    own_dir(where, "stacks directory")
    ledgers = ledger.Ledgers(run_dir)
    state = ledgers.poll()
    running = {r: s for r, s in state.ranks.items() if s.how is None and not s.lost}
    pids = {r: s.hook_pid for r, s in running.items() if s.hook_pid is not None}
    before = _sizes(where, pids)
    seq = requests.send(run_dir, "stacks:cont" if cont else "stacks")
    grown, acked = _wait(ledgers, where, seq, pids, before, {s.host for s in running.values() if s.host},
                         deadline if pids else 0.0)
    stacks: Dict[int, Stack] = {}
    missing: Dict[str, List[int]] = {}
    for r, s in running.items():
        try:
            text = _read_from(os.path.join(where, f"rank-{r}.{pids[r]}.txt"), before.get(r, 0)) if r in grown else ""
        except OSError:
            text = ""
        stack = parse(text) if text else None
        if stack is not None:
            stacks[r] = stack
        else:
            why = ("its dump holds no main thread (over 100 threads, or not faulthandler's)" if r in grown
                   else why_missing(s, acked))
            missing.setdefault(why, []).append(r)
    never = [r for r in range(nranks) if r not in state.ranks]
    if never:
        missing["never started"] = never
    lines = render(stacks, missing, where, _source_reader())
    silent = (silent_longest(running, _log_silence(log_dir, running), "its log last written", "no log") if log_dir
              else silent_longest(running, silence_of(last_lines, family), "its last line of output",
                                  f"no line in the last {len(last_lines)} lines of output"))
    return lines + ([one_line(silent)] if silent else [])
