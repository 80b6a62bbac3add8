"""The mpi4py adapter: MPI_Init from the launcher, pure-Python data-parallel SGD."""
from __future__ import annotations

import random
import time

from typing import TYPE_CHECKING, List, Optional, Tuple

from ...runtime import DetectError, DistInfo
from .comm import Comm, digest

if TYPE_CHECKING:
    from ..barrier import Watchdog


class MPIComm(Comm):
    def __init__(self, info: DistInfo, backend: Optional[str] = None, timeout: float = 300.0) -> None:
        t = time.time()
        import mpi4py

        mpi4py.rc.initialize = False
        mpi4py.rc.finalize = False
        from mpi4py import MPI

        self.imports = time.time() - t
        t = time.time()
        MPI.Init()
        self.init = time.time() - t
        self.MPI, self.comm = MPI, MPI.COMM_WORLD
        if (self.comm.Get_rank(), self.comm.Get_size()) != (info.rank, info.world_size):
            raise DetectError(f"MPI says rank {self.comm.Get_rank()} of {self.comm.Get_size()}, {info.launcher} "
                              f"says {info.rank} of {info.world_size}")
        self.device = f"cpu ({MPI.Get_library_version().splitlines()[0].strip()[:40]})"

    def allreduce(self, value: float, op: str) -> float:
        return float(self.comm.allreduce(value, op={"sum": self.MPI.SUM, "max": self.MPI.MAX}[op]))

    def broadcast(self, value: float) -> float:
        return float(self.comm.bcast(value, root=0))

    def allgather(self, text: str) -> List[str]:
        return [str(t) for t in self.comm.allgather(text)]

    def barrier(self) -> None:
        self.comm.Barrier()

    def train(self, steps: int, wd: Watchdog) -> Tuple[List[float], Optional[float], str]:
        """Linear regression by data-parallel SGD in pure Python: gradients summed over ranks."""
        rng = random.Random(1000 + self.comm.Get_rank())
        true_w = [0.5 * (i % 5) - 1.0 for i in range(8)]
        xs = [[rng.gauss(0, 1) for _ in range(8)] for _ in range(64)]
        ys = [sum(a * b for a, b in zip(x, true_w)) + 0.3 for x in xs]
        w, b, lr, n = [0.0] * 8, 0.0, 0.1, self.comm.Get_size()
        losses: List[float] = []
        first: Optional[float] = None
        for step in range(steps):
            t = time.time()
            with wd.phase(f"step{step}"):
                preds = [sum(a * c for a, c in zip(x, w)) + b for x in xs]
                errs = [p - y for p, y in zip(preds, ys)]
                grad = [2 * sum(e * x[i] for e, x in zip(errs, xs)) / len(xs) for i in range(8)]
                grad.append(2 * sum(errs) / len(xs))
                loss = sum(e * e for e in errs) / len(xs)
                parts = self.comm.allgather(grad + [loss])
                total = [sum(p[i] for p in parts) / n for i in range(9 + 1)]
                w = [wi - lr * gi for wi, gi in zip(w, total[:8])]
                b -= lr * total[8]
                losses.append(total[9])
            if first is None:
                first = time.time() - t
        return losses, first, digest(w + [b])

    def close(self) -> None:
        self.MPI.Finalize()


