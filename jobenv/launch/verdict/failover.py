"""Failover to spare hosts: which hosts an attempt gets, which host a failure retires, and why.

Pure functions of the job's hosts, the request, the bad-host ledger (jobenv.launch.verdict.badhosts)
and what the failed attempt left behind (its verdict, jobenv.rank.verdict, and the failed ranks'
last lines); jobenv.launch.command does the I/O.

The hosts of a launch are the job's hosts that --hosts/--exclude and the ledger leave, in the
job's order; the first ones work, the last `spares` wait.  Retiring a host adds it to the
excluded ones with the number of working hosts unchanged, so the next host in order (a spare)
takes its place.  A failure that is the program's own (PROGRAM_FAULTS) retires nothing: a
spare would fail the same way, and healthy hosts would be used up one by one.
"""
from __future__ import annotations

import re

from jobenv.core.errors import BadInput
from jobenv.core.hostlist import compress, expand, host_index
from jobenv.rank.ends import words
from jobenv.launch import ranks
from jobenv.launch.plan import sizing
from jobenv.launch.types import Request

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Optional, Sequence, Tuple

    from jobenv.rank.verdict import Verdict as AttemptVerdict


class Failure:
    """What a failed attempt left: its verdict (the ranks' records, the first failure), the last
    lines of each failed rank that could be told apart (its log or labelled output), and the
    output of all ranks otherwise."""

    def __init__(self, verdict: AttemptVerdict, lines: Dict[int, List[str]], shared: List[str]) -> None:
        self.verdict, self.state, self.lines, self.shared = verdict, verdict.state, lines, shared

    def failed(self) -> List[ranks.RankState]:
        return [r for r in self.state.ranks.values() if r.failed or r.lost]

    def texts(self) -> List[List[str]]:
        """The lines to judge: each failed rank's own, else everyone's."""
        own = [self.lines[r.rank] for r in self.failed() if self.lines.get(r.rank)]
        return own or [self.shared]


_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::.*)?$")


def _last_exception(lines: List[str]) -> Optional[str]:
    """The last line of a Python traceback ("ValueError: bad"), as the rank printed it."""
    for line in reversed(lines):
        text = re.sub(r"^\s*\d+: |^\[\d+\] ", "", line).strip()  # a launcher's label, if any
        if _EXCEPTION.match(text):
            return text
    return None


def _matches(pattern: str) -> Callable[[Failure], bool]:
    rx = re.compile(pattern)
    return lambda f: any(rx.search(line) for text in f.texts() for line in text)


def _raised(*names: str) -> Callable[[Failure], bool]:
    """The failed ranks' last traceback line names one of `names` (the exception that ended
    them, not a line that only mentions it: a warning, a chained cause)."""
    def test(f: Failure) -> bool:
        last = [_last_exception(text) for text in f.texts()]
        return any(e is not None and e.split(":", 1)[0].rsplit(".", 1)[-1] in names for e in last)
    return test


_USAGE = re.compile(r"^(?:\s*\d+: |\[\d+\] )?\s*usage:", re.I)


def _usage(f: Failure) -> bool:
    """Exit 2 with a usage line (argparse, getopt): exit 2 alone is also grep's, make's, or
    Python's "can't open file", which a retry may not repeat."""
    first = f.verdict.first
    return first is not None and first.how == "exit" and first.code == 2 and any(_USAGE.match(line) for text in f.texts() for line in text)


def _same_exception(f: Failure) -> bool:
    told = [(r.host, _last_exception(f.lines.get(r.rank, []))) for r in f.failed() if f.lines.get(r.rank)]
    return (len(told) >= 2 and len({e for _, e in told}) == 1 and told[0][1] is not None
            and len({h for h, _ in told}) >= 2)


# The one rule for "the program's own fault": (name, test, why it never retires a host, whether
# a retry could end otherwise).  A missing module, the program's syntax and its command line
# fail the same way on the next attempt: retries stop there.  A full disk may be freed and the
# same exception everywhere may be a transient collective error (NCCL/gloo): retries go on.
PROGRAM_FAULTS: Tuple[Tuple[str, Callable[[Failure], bool], str, bool], ...] = (
    ("no space left", _matches(r"No space left on device|\bENOSPC\b|\[Errno 28\]"),
     "a full file system is full from every host; a spare frees no space", True),
    ("import error", _raised("ImportError", "ModuleNotFoundError"),
     "the environment lacks a module, on every host alike", False),
    ("syntax error", _raised("SyntaxError", "IndentationError", "TabError"),
     "the program's text is the same on every host", False),
    ("usage (exit 2)", _usage,
     "exit 2 is a command-line error (argparse, getopt, shells): the command, not the host", False),
    ("same exception on every failed rank", _same_exception,
     "ranks on two or more hosts raised the same Python exception: the program's path, not a host "
     "(on one host alone it may be that host's GPU, so it does not count)", True),
)


class Verdict:
    """What a failed attempt says about its hosts: `host` to retire (None: none), how it failed,
    whether the host is named by its own evidence or guessed, or the program fault that spared it."""

    __slots__ = ("host", "rank", "how", "named", "fault", "why")

    def __init__(self, host: Optional[str] = None, rank: Optional[int] = None, how: str = "", named: bool = False,
                 fault: str = "", why: str = "") -> None:
        self.host, self.rank, self.how, self.named, self.fault, self.why = host, rank, how, named, fault, why

    def __repr__(self) -> str:
        return "Verdict(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def futile(f: Failure) -> str:
    """Why retrying a failed attempt would fail the same way (PROGRAM_FAULTS' last column), or ""."""
    for name, test, why, retry in PROGRAM_FAULTS:
        if not retry and test(f):
            return f"{name}: {why}"
    return ""


STALE_S = 5.0  # a host agent rewrites its heartbeat every second: five missed is a host gone


def _gone(state: ranks.RunState) -> List[ranks.RankState]:
    """Ranks that vanished with their host: the host agent saw the wrapper go without an exit
    (`lost`), or the host's heartbeat stopped STALE_S before the last rank ended elsewhere
    while a rank of it had not ended (the agent went too: the whole host)."""
    rows = list(state.ranks.values())
    ends = [r.ended for r in rows if r.ended is not None]
    beats = {name: h.beat for name, h in state.hosts.items()}
    silent = {name for name, beat in beats.items() if beat is not None and ends and max(ends) - beat > STALE_S}
    return sorted((r for r in rows if r.host and r.how is None and (r.lost or r.host in silent)),
                  key=lambda r: r.rank)


def judge(f: Failure) -> Verdict:
    """The host to retire after a failed attempt, with its evidence, strongest first.

    Named: the rank vanished with its host (heartbeat lost: when a host dies, the launcher then
    kills the ranks elsewhere, so their deaths come after and say nothing), or the wrapper on
    that host saw the first failed rank die of a signal.  Guessed: the first failed rank only
    exited with an error code; its host is the best guess.  No rank record, or a program fault
    (PROGRAM_FAULTS): nothing to retire."""
    for name, test, why, _ in PROGRAM_FAULTS:
        if test(f):
            return Verdict(fault=name, why=why)
    gone = _gone(f.state)
    first = f.verdict.first
    if not gone and first is not None and first.how == "vanished":  # its host went silent first (infer_vanished)
        gone = [first]
    if gone:
        return Verdict(gone[0].host, gone[0].rank, "heartbeat lost (the rank vanished with its host)", True)
    if first is None or not first.host:
        return Verdict(why="no rank recorded a failure on any host")
    return Verdict(first.host, first.rank, words(first), named=first.how == "signal")


class Hosts:
    """The hosts of one launch: the request of the next attempt, and how many hosts work."""

    __slots__ = ("request", "nhosts", "left_out")

    def __init__(self, request: Request, nhosts: Optional[int], left_out: List[str]) -> None:
        self.request, self.nhosts = request, nhosts
        self.left_out = left_out  # retired by an earlier launch (the ledger) and not named by --hosts


def _named_by(job_hosts: Sequence[str], hosts_opt: Optional[str]) -> List[str]:
    if not hosts_opt:
        return []
    found = (host_index(job_hosts, h) for h in expand(hosts_opt))
    return [job_hosts[i] for i in found if i is not None]


def _excluding(req: Request, job_hosts: Sequence[str], more: Sequence[str], jobid: str) -> Request:
    have = sizing.pool(job_hosts, Request(hosts=req.exclude), jobid) if req.exclude else []
    both = list(dict.fromkeys(have + list(more)))
    return req.replace(exclude=compress(both) if both else None)


def first_hosts(job_hosts: Sequence[str], ranks_per_host: int, req: Request, spares: int,
                retired: Sequence[str], failover: bool, jobid: str = "") -> Hosts:
    """The first attempt's hosts: `req` without the `retired` hosts (unless --hosts names them)
    and, with failover on, a fixed number of working hosts with `spares` more held back."""
    keep = set(_named_by(job_hosts, req.hosts))
    known = (host_index(job_hosts, h) for h in dict.fromkeys(retired))
    left_out = [job_hosts[i] for i in known if i is not None and job_hosts[i] not in keep]
    base = _excluding(req, job_hosts, left_out, jobid)
    if left_out:
        try:
            sizing.choose(job_hosts, ranks_per_host, base, jobid)
        except BadInput as exc:
            raise BadInput(f"{exc} (left out as retired: {compress(left_out)}; `jobenv show` says why; "
                           "name them in --hosts to use them again)") from None
    if not failover:
        return Hosts(base, req.nhosts, left_out)
    offer = sizing.pool(job_hosts, base, jobid)
    if req.nhosts is None and req.nranks is None:
        n = len(offer) - spares
    else:
        n = len(sizing.choose(job_hosts, ranks_per_host, base, jobid).hosts)
    if n < 1 or n + spares > len(offer):
        raise BadInput(f"--spare-nodes {spares}: job {jobid} has {len(offer)} host(s) to offer "
                       f"({compress(offer) if offer else 'none'}), not {max(n, 1) + spares} "
                       f"({max(n, 1)} to run on and {spares} spare)"
                       + (f"; left out as retired: {compress(left_out)}" if left_out else ""))
    return Hosts(base.replace(nhosts=n), n, left_out)


def replace(job_hosts: Sequence[str], ranks_per_host: int, hosts: Hosts, bad: str, jobid: str = "") -> Optional[Hosts]:
    """The next attempt's hosts with `bad` retired and the next spare in its place; None when no
    spare is left (then the next attempt runs on the same hosts)."""
    if host_index(job_hosts, bad) is None:
        return None  # a name the job does not know (the rank's `hostname` differs): nothing to exclude
    trial = _excluding(hosts.request, job_hosts, [bad], jobid)
    if hosts.nhosts is None or len(sizing.pool(job_hosts, trial, jobid)) < hosts.nhosts:
        return None
    sizing.choose(job_hosts, ranks_per_host, trial, jobid)  # the same sizing still fits
    return Hosts(trial, hosts.nhosts, hosts.left_out)


def restart_count(attempt: int, before: int) -> int:
    """JOBENV_RESTART_COUNT of attempt `attempt` (0 = the first): attempts before it in this
    launch plus the runs of the job before this one (`before`:
    jobenv.launch.requeue.bring_back.restarts_before), as torchrun's TORCHELASTIC_RESTART_COUNT."""
    return attempt + before
