"""Where a process sits in the job (DistInfo), and the error detection raises."""
from __future__ import annotations

from ..errors import BadInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

_FIELDS = ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "num_nodes",
           "master_addr", "master_port", "launcher", "jobid", "hosts")


class DetectError(BadInput, RuntimeError):
    """The environment is inconsistent (two launchers disagree, a variable is garbage).

    A BadInput (exit 5 from the CLI and the per-rank wrapper); still a RuntimeError for
    callers that caught it as one."""


class DistInfo:
    """Where this process sits in the job.  Immutable.

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
                 master_addr=None, master_port=None, launcher: str = "none", jobid=None,
                 hosts=()) -> None:
        values = (rank, local_rank, world_size, local_world_size, node_rank, num_nodes,
                  master_addr, master_port, launcher, jobid, tuple(hosts))
        for name, value in zip(_FIELDS, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"DistInfo is immutable; use replace({name}=...)")

    def __delattr__(self, name):
        raise AttributeError(f"DistInfo is immutable; use replace({name}=...)")

    def as_dict(self) -> dict:
        d = {f: getattr(self, f) for f in _FIELDS}
        d["hosts"] = list(self.hosts)
        return d

    def replace(self, **changes) -> "DistInfo":
        d = {f: getattr(self, f) for f in _FIELDS}
        d.update(changes)
        return DistInfo(**d)

    def __eq__(self, other):
        if not isinstance(other, DistInfo):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    def __hash__(self):
        return hash(tuple(getattr(self, f) for f in _FIELDS))

    def __repr__(self):
        return "DistInfo(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1
