"""The TensorFlow adapter: MultiWorkerMirroredStrategy (TF_CONFIG from the job's record)
or horovod.tensorflow; imported only by `--framework tensorflow`."""
from __future__ import annotations

import os
import time
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ...runtime import DistInfo
from .comm import Comm, digest

if TYPE_CHECKING:
    from ..barrier import Watchdog


class TFComm(Comm):
    """allreduce / broadcast / allgather / barrier / train, as the selftest expects."""

    def __init__(self, info: DistInfo, backend: Optional[str] = None, timeout: float = 300.0) -> None:
        self.info, self.kind = info, backend or "multiworker"
        t = time.time()
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        self.imports = time.time() - t
        self.tf = tf
        t = time.time()
        from ...runtime import backends

        if self.kind == "horovod":
            backends.setup_horovod("tensorflow")
            import horovod.tensorflow as hvd

            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
        elif self.kind == "multiworker":
            # worker ports start past the check-in's (MASTER_PORT + 1)
            backends.setup_tensorflow(info.replace(master_port=info.master_port + 2))
            self.strategy = backends.tensorflow_strategy()
            self.rank, self.size = info.rank, info.world_size
            self.replicas = self.strategy.num_replicas_in_sync
        else:
            raise ValueError(f"--backend {backend} is not a TensorFlow backend (multiworker, horovod)")
        self.init = time.time() - t
        gpus = tf.config.list_physical_devices("GPU")
        self.device = f"{'gpu' if gpus else 'cpu'} (tensorflow {self.kind})"

    # -- collectives
    def _reduce(self, value: float, op: str) -> float:
        tf = self.tf
        x = tf.constant(float(value), dtype=tf.float64)
        if self.kind == "horovod":
            return float(self.hvd.allreduce(x, op=self.hvd.Sum if op == "sum" else self.hvd.Max).numpy())
        per_replica = self.strategy.run(lambda: tf.identity(x))
        if op == "sum":
            return float(self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None).numpy())
        # MultiWorkerMirroredStrategy reduces only SUM and MEAN: gather, then take the max
        gathered = self.strategy.gather(tf.reshape(per_replica, [1]) if not hasattr(per_replica, "values")
                                        else per_replica, axis=0)
        return float(tf.reduce_max(gathered).numpy())

    def allreduce(self, value: float, op: str) -> float:
        return self._reduce(value, op)

    def broadcast(self, value: float) -> float:
        if self.kind == "horovod":
            return float(self.hvd.broadcast(self.tf.constant(float(value), self.tf.float64), root_rank=0).numpy())
        # no broadcast in tf.distribute: every rank but 0 contributes zero to a sum
        return self._reduce(value if self.rank == 0 else 0.0, "sum")

    def allgather(self, text: str) -> List[str]:
        tf = self.tf
        data = list(text.encode())
        longest = int(self._reduce(len(data), "max"))
        row = tf.constant([data + [0] * (longest - len(data))], dtype=tf.int32)
        if self.kind == "horovod":
            rows = self.hvd.allgather(row).numpy().tolist()
        else:
            per_replica = self.strategy.run(lambda: tf.identity(row))
            rows = self.strategy.gather(per_replica, axis=0).numpy().tolist()
        return [bytes(r).rstrip(b"\0").decode() for r in rows]

    def barrier(self) -> None:
        """An all-reduce every rank must enter (horovod.tensorflow and tf.distribute have no barrier)."""
        if self._reduce(1.0, "sum") != self.size:
            raise RuntimeError("barrier: not every rank took part")

    # -- training
    def train(self, steps: int, wd: Watchdog) -> Tuple[List[float], Optional[float], str]:
        """Linear regression by data-parallel SGD; each rank has its own data."""
        tf = self.tf
        gen = tf.random.Generator.from_seed(1000 + self.rank)
        x = gen.normal([64, 8], dtype=tf.float32)
        y = tf.reduce_sum(x, axis=1, keepdims=True) * 0.5 + 0.3
        scope = self.strategy.scope() if self.kind == "multiworker" else nullcontext()
        with scope:
            w = tf.Variable(tf.zeros([8, 1]))
            b = tf.Variable(tf.zeros([1]))
        if self.kind == "horovod":
            self.hvd.broadcast_variables([w, b], root_rank=0)
        lr = 0.1
        losses: List[float] = []
        first: Optional[float] = None

        def local_grads() -> Tuple[Any, Any]:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
            return loss, tape.gradient(loss, [w, b])

        for step in range(steps):
            t = time.time()
            with wd.phase(f"step{step}"):
                if self.kind == "horovod":
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
                    tape = self.hvd.DistributedGradientTape(tape)
                    gw, gb = tape.gradient(loss, [w, b])
                    loss = self.hvd.allreduce(loss, op=self.hvd.Average)
                else:
                    loss, (gw, gb) = self.strategy.run(local_grads)
                    mean = tf.distribute.ReduceOp.MEAN
                    gw = self.strategy.reduce(mean, gw, axis=None)
                    gb = self.strategy.reduce(mean, gb, axis=None)
                    loss = self.strategy.reduce(mean, loss, axis=None)
                w.assign_sub(lr * gw)
                b.assign_sub(lr * gb)
                losses.append(float(loss.numpy()))
            if first is None:
                first = time.time() - t
        params = [float(v) for v in tf.reshape(w, [-1]).numpy().tolist()] + [float(b.numpy()[0])]
        return losses, first, digest(params)

    def close(self) -> None:
        if self.kind == "horovod":
            self.hvd.shutdown()

