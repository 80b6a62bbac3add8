"""DeepSpeed: init_distributed fed from our detection, a DeepSpeed engine for training."""
from __future__ import annotations

import os

from ...runtime import DistInfo
from .torch_ddp import TorchComm


class DeepSpeedComm(TorchComm):
    name = "deepspeed"

    def _setup(self, info: DistInfo, timeout: float):
        from ...runtime import backends

        os.environ.update(MASTER_ADDR=str(info.master_addr), MASTER_PORT=str(info.master_port))
        backends.setup_deepspeed(timeout=timeout)
        return self._current_device()

    def _describe(self) -> str:
        return f"deepspeed, {self.dist.get_backend()}"

    def _wrap(self, model):
        import deepspeed

        net, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config={
            "train_micro_batch_size_per_gpu": 64, "optimizer": {"type": "SGD", "params": {"lr": 0.05}},
            "steps_per_print": 10 ** 9})
        return net, lambda loss: (net.backward(loss), net.step())
