"""DeepSpeed: init_distributed fed from our detection, a DeepSpeed engine for training."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Tuple

from ...runtime import DistInfo
from .torch_ddp import TorchComm

if TYPE_CHECKING:
    from .torch_ddp import Step


class DeepSpeedComm(TorchComm):
    name = "deepspeed"

    def _setup(self, info: DistInfo, timeout: float) -> Any:
        from ...runtime import backends

        # the selftest has checked in already (its barrier keeps the check-in port for phase reports)
        backends.setup_deepspeed(timeout=timeout, info=info, checkin=False)
        return self._current_device()

    def _describe(self) -> str:
        return f"deepspeed, {self.dist.get_backend()}"

    def _wrap(self, model: Any) -> Tuple[Any, Step]:
        import deepspeed

        net, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config={
            "train_micro_batch_size_per_gpu": 64, "optimizer": {"type": "SGD", "params": {"lr": 0.05}},
            "steps_per_print": 10 ** 9})
        return net, lambda loss: (net.backward(loss), net.step())
