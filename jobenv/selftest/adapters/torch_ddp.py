"""torch.distributed with the device's process group (nccl, xccl, gloo) and DDP training;
also the base of the horovod and DeepSpeed adapters, which change setup and collectives."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ...runtime import DistInfo
from .comm import Comm, digest

if TYPE_CHECKING:
    from ..barrier import Watchdog

    Step = Callable[[Any], object]


class TorchComm(Comm):
    name = "ddp"

    def __init__(self, info: DistInfo, backend: Optional[str] = None, timeout: float = 300.0) -> None:
        t = time.time()
        import warnings

        # torch warns at import when numpy is absent; the selftest never needs numpy
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        import torch
        import torch.distributed as dist

        self.imports = time.time() - t
        self.torch, self.dist, self.kind = torch, dist, backend or self.name
        t = time.time()
        self.dev = self._setup(info, timeout)
        self.init = time.time() - t
        self.device = f"{self.dev} ({self._describe()})"

    # -- what the subclasses change
    def _setup(self, info: DistInfo, timeout: float) -> Any:
        from ...runtime import backends

        # the selftest has checked in already (its barrier keeps the check-in port for phase reports)
        backends.setup_torch(backend=None if self.kind == "ddp" else self.kind, timeout=timeout, info=info,
                             checkin=False)
        return self._current_device()

    def _describe(self) -> str:
        return str(self.dist.get_backend())

    def _sum_or_max(self, t: Any, op: str) -> Any:
        self.dist.all_reduce(t, op=self.dist.ReduceOp.SUM if op == "sum" else self.dist.ReduceOp.MAX)
        return t

    def _broadcast0(self, t: Any) -> Any:
        self.dist.broadcast(t, src=0)
        return t

    def _gather_rows(self, buf: Any) -> List[Any]:
        rows = [self.torch.zeros_like(buf) for _ in range(self.dist.get_world_size())]
        self.dist.all_gather(rows, buf)
        return rows

    def _wrap(self, model: Any) -> Tuple[Any, Step]:
        """(network to run, step function) for this backend's data parallelism."""
        from torch.nn.parallel import DistributedDataParallel as DDP

        net = DDP(model, device_ids=[self.dev.index] if self.dev.type == "cuda" else None)
        opt = self.torch.optim.SGD(net.parameters(), lr=0.05)
        return net, lambda loss: (opt.zero_grad(), loss.backward(), opt.step())

    def rank(self) -> int:
        return int(self.dist.get_rank())

    def size(self) -> int:
        return int(self.dist.get_world_size())

    def close(self) -> None:
        from ...runtime import backends

        backends.cleanup()

    # -- the interface
    def _current_device(self) -> Any:
        torch = self.torch
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            return torch.device("xpu", torch.xpu.current_device())
        return torch.device("cpu")

    def _tensor(self, value: float) -> Any:
        dtype = self.torch.float64 if self.dev.type == "cpu" else self.torch.float32
        return self.torch.tensor([float(value)], dtype=dtype, device=self.dev)

    def allreduce(self, value: float, op: str) -> float:
        return float(self._sum_or_max(self._tensor(value), op).item())

    def broadcast(self, value: float) -> float:
        return float(self._broadcast0(self._tensor(value)).item())

    def allgather(self, text: str) -> List[str]:
        """Gather short strings as NUL-padded byte tensors: all_gather_object needs numpy."""
        torch = self.torch
        data = list(text.encode())
        longest = int(self.allreduce(len(data), "max"))
        buf = torch.zeros(max(longest, 1), dtype=torch.uint8)
        buf[: len(data)] = torch.tensor(data, dtype=torch.uint8)
        rows = self._gather_rows(buf.to(self.dev))
        return [bytes(r.cpu().tolist()).rstrip(b"\0").decode() for r in rows]

    def barrier(self) -> None:
        self.dist.barrier()

    def train(self, steps: int, wd: Watchdog) -> Tuple[List[float], Optional[float], str]:
        torch = self.torch
        torch.manual_seed(0)  # same initial weights everywhere; data differs per rank
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to(self.dev)
        gen = torch.Generator().manual_seed(1000 + self.rank())
        x = torch.randn(64, 8, generator=gen).to(self.dev)
        y = (x.sum(dim=1, keepdim=True) * 0.5 + 0.3).to(self.dev)
        net, step_fn = self._wrap(model)
        losses: List[float] = []
        first: Optional[float] = None
        for step in range(steps):
            t = time.time()
            with wd.phase(f"step{step}"):
                loss = torch.nn.functional.mse_loss(net(x), y)
                step_fn(loss)
                losses.append(self.allreduce(float(loss.item()), "sum") / self.size())
            if first is None:
                first = time.time() - t
        params = [v for p in model.parameters() for v in p.detach().cpu().flatten().tolist()]
        return losses, first, digest(params)
