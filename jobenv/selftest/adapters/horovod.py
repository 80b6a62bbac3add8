"""horovod.torch: hvd.init from our detection, horovod's own collectives and optimizer."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Tuple

from ...runtime import DistInfo
from .torch_ddp import TorchComm

if TYPE_CHECKING:
    from .torch_ddp import Step


class HorovodTorchComm(TorchComm):
    name = "horovod"

    def _setup(self, info: DistInfo, timeout: float) -> Any:
        from ...runtime import backends

        backends.setup_horovod("torch")
        import horovod.torch as hvd

        self.hvd = hvd
        torch = self.torch
        return torch.device("cuda", hvd.local_rank()) if torch.cuda.is_available() else torch.device("cpu")

    def _describe(self) -> str:
        return "horovod"

    def _sum_or_max(self, t: Any, op: str) -> Any:
        return self.hvd.allreduce(t, op=self.hvd.Sum if op == "sum" else self.hvd.Max)

    def _broadcast0(self, t: Any) -> Any:
        return self.hvd.broadcast(t, root_rank=0)

    def _gather_rows(self, buf: Any) -> List[Any]:
        parts = self.hvd.allgather(buf.unsqueeze(0))
        return [parts[i] for i in range(parts.shape[0])]

    def _wrap(self, model: Any) -> Tuple[Any, Step]:
        opt = self.torch.optim.SGD(model.parameters(), lr=0.05)
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = self.hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
        return model, lambda loss: (opt.zero_grad(), loss.backward(), opt.step())

    def barrier(self) -> None:
        self.hvd.barrier()

    def rank(self) -> int:
        return int(self.hvd.rank())

    def size(self) -> int:
        return int(self.hvd.size())

    def close(self) -> None:
        self.hvd.shutdown()
