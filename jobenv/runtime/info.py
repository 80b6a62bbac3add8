"""Where a process sits in the job (DistInfo), the error detection raises, and how the
numbers it is made of are read from variables."""
from __future__ import annotations

from jobenv.core.errors import BadInput
from .launchers import MAX_DIGITS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

MAX_PORT = 65535
NO_ADDR = ("cannot tell the rendezvous host: set MASTER_ADDR, or restore the job with "
           "`source <(jobenv get)` so that JOBENV_RECORD names its hosts")
_FIELDS = ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "num_nodes",
           "master_addr", "master_port", "launcher", "jobid", "hosts")


class DetectError(BadInput, RuntimeError):
    """The environment is inconsistent (two launchers disagree, a variable is garbage).

    A BadInput (exit 5 from the CLI and the per-rank wrapper); still a RuntimeError for
    callers that caught it as one."""


def port_number(text: str) -> int:
    """MASTER_PORT as detect() and `jobenv doctor` read it (the per-rank wrapper, rankwrap.sh.in,
    spells the same rule in sh): 1 to 5 ASCII digits, 1..65535.  str.isdigit() alone would take
    '²', which int() then refuses."""
    if not (0 < len(text) <= 5 and text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_PORT):
        raise DetectError(f"MASTER_PORT={text!r} is not a port number (1-{MAX_PORT})")
    return int(text)


def number(env: Mapping[str, str], name: str, who: str) -> Optional[int]:
    """A launcher's count: 1-9 ASCII digits (int() would take '1_0', '²' and ' 7')."""
    val = env.get(name)
    if val is None:
        return None
    if not (0 < len(val) <= MAX_DIGITS and val.isascii() and val.isdigit()):
        raise DetectError(f"{who}: {name}={val!r} is not a number")
    return int(val)


def optional_number(env: Mapping[str, str], name: str) -> Optional[int]:
    """A jobenv count (NHOSTS, NRANKS_PER_HOST): unset and empty both mean unknown."""
    return number(env, name, name) if env.get(name) else None


def first_number(env: Mapping[str, str], names: Sequence[str], who: str) -> Tuple[Optional[int], str]:
    for n in names:
        if n in env:
            return number(env, n, who), n
    return None, ""


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _check(rank: Any, local_rank: Any, world_size: Any, local_world_size: Any, node_rank: Any, num_nodes: Any,
           master_addr: object, master_port: object, launcher: object, jobid: object, hosts: Tuple[object, ...]) -> None:
    """What no launcher produces, refused for detect() and for callers of the constructor
    alike: this is the one place these invariants are checked.  Host names themselves are
    checked where they are read (the record, JOBENV_HOSTFILE): here only that each is a
    string.  Counts are plain ints (not bool, float or str).  Cheap: detect() runs it in
    every rank."""
    ints = (rank, local_rank, world_size, local_world_size, node_rank, num_nodes)
    if not all(type(v) is int for v in ints):
        name, value = next((n, v) for n, v in zip(_FIELDS, ints) if type(v) is not int)
        raise _error(launcher, f"DistInfo: {name}={_short(value)} is not an integer")
    if world_size < 1:
        raise _error(launcher, f"world size {world_size} is not a positive number")
    if not 0 <= rank < world_size:
        raise _error(launcher, f"rank {rank} is outside 0..{world_size - 1} (world size {world_size})")
    if not 1 <= local_world_size <= world_size:
        raise _error(launcher, f"local size {local_world_size} is outside 1..{world_size} (the world size)")
    if not 0 <= local_rank < local_world_size:
        raise _error(launcher, f"local rank {local_rank} is outside 0..{local_world_size - 1} "
                               f"(local size {local_world_size})")
    if node_rank < 0 or num_nodes < 1:
        raise _error(launcher, f"node rank {node_rank} of {num_nodes} nodes is impossible")
    if master_port is not None and not (type(master_port) is int and 1 <= master_port <= MAX_PORT):
        raise _error(launcher, f"DistInfo: master_port={_short(master_port)} is not a port number (1-{MAX_PORT})")
    for name, value in (("master_addr", master_addr), ("jobid", jobid), ("launcher", launcher)):
        if not (type(value) is str and value) and (value is not None or name == "launcher"):
            raise _error(launcher, f"DistInfo: {name}={_short(value)} is not a non-empty string")
    if hosts and not all(type(h) is str for h in hosts):
        raise _error(launcher, f"DistInfo: hosts holds {_short(next(h for h in hosts if type(h) is not str))}, "
                               "not a host name")


def _error(launcher: object, message: str) -> DetectError:
    """The message, after the launcher's name when one started this process."""
    return DetectError(f"{launcher}: {message}" if type(launcher) is str and launcher != "none" else message)


class DistInfo:
    """Where this process sits in the job.  Immutable, and consistent: the constructor
    (and so `replace`) refuses what `detect()` would (DetectError).

    A slotted class with dataclass-like behaviour (equality, repr, `as_dict`, `replace`)
    instead of a frozen dataclass: `import dataclasses` alone costs more than the whole
    start-up budget of `import jobenv.runtime` (see benchmarks/).
    """

    __slots__ = _FIELDS
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_rank: int
    num_nodes: int
    master_addr: Optional[str]
    master_port: int
    launcher: str
    jobid: Optional[str]
    hosts: Tuple[str, ...]

    def __init__(self, rank: int = 0, local_rank: int = 0, world_size: int = 1,
                 local_world_size: int = 1, node_rank: int = 0, num_nodes: int = 1,
                 master_addr: Optional[str] = None, master_port: Optional[int] = None, launcher: str = "none",
                 jobid: Optional[str] = None, hosts: Iterable[str] = ()) -> None:
        if isinstance(hosts, (str, bytes)):  # tuple("n1,n2") would be the characters
            raise DetectError(f"DistInfo: hosts={_short(hosts)!r} is one string, not a list of host names")
        try:
            names = tuple(hosts)
        except TypeError:  # None, a number: no names at all
            raise DetectError(f"DistInfo: hosts={_short(hosts)} is not a list of host names") from None
        values = (rank, local_rank, world_size, local_world_size, node_rank, num_nodes,
                  master_addr, master_port, launcher, jobid, names)
        _check(*values)
        for name, value in zip(_FIELDS, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"DistInfo is immutable; use replace({name}=...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"DistInfo is immutable; use replace({name}=...)")

    def as_dict(self) -> Dict[str, Any]:
        d = {f: getattr(self, f) for f in _FIELDS}
        d["hosts"] = list(self.hosts)
        return d

    def replace(self, **changes: Any) -> DistInfo:
        d = {f: getattr(self, f) for f in _FIELDS}
        d.update(changes)
        return DistInfo(**d)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DistInfo):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f) for f in _FIELDS))

    def __repr__(self) -> str:
        return "DistInfo(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1
