"""What the selftest asks of every backend (`Comm`), and the digest its ranks compare.

In a module of its own, not the package's `__init__.py`: each adapter imports it, and the
package's `__init__.py` imports the adapters by name on first use.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from ..barrier import Watchdog


class Comm:
    """What the selftest asks of every backend."""

    device: str = "?"
    imports: float = 0.0
    init: float = 0.0

    def allreduce(self, value: float, op: str) -> float:  # op: "sum" or "max"
        raise NotImplementedError

    def broadcast(self, value: float) -> float:  # rank 0's value everywhere
        raise NotImplementedError

    def allgather(self, text: str) -> List[str]:  # every rank's string, in rank order
        raise NotImplementedError

    def barrier(self) -> None:
        raise NotImplementedError

    def train(self, steps: int, wd: Watchdog) -> Tuple[List[float], Optional[float], str]:
        """A few data-parallel steps: (mean loss per step, first step seconds, parameter digest)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def digest(values: Sequence[float]) -> str:
    """A short fingerprint of parameters: equal on every rank after correct training."""
    return hashlib.sha256(repr([float(v) for v in values]).encode()).hexdigest()[:16]
