"""Backend initialization from our detection: torch.distributed, horovod, TensorFlow,
DeepSpeed.  Each framework is imported here, on first use, never by `import jobenv`.

Every setup_* takes the same keywords where they apply (`info`: a DistInfo instead of
detecting one; `timeout`; `checkin`) and returns the DistInfo it set the framework up with.
"""
from __future__ import annotations

import errno
import json
import os
import socket
from typing import Any, Dict, Optional, Sequence, Tuple

from .discovery import detect
from .export import device_index, export_env
from .info import NO_ADDR, DetectError, DistInfo

INSTALL_HINT = {
    "torch": "pip install 'jobenv[torch]'", "horovod": "pip install 'jobenv[horovod]'",
    "tensorflow": "pip install 'jobenv[tensorflow]'", "deepspeed": "pip install 'jobenv[deepspeed]'",
    "mpi4py": "pip install 'jobenv[mpi]'",
}


class MissingFramework(ImportError):
    pass


def require(module: str, extra: str) -> Any:
    """Import `module` or fail with the pip command that installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingFramework(f"{module} is not installed ({exc}); {INSTALL_HINT[extra]}") from None


def ensure_installed(module: str, extra: str) -> None:
    """Fail with the install hint without importing (so import time can be measured later)."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise MissingFramework(f"{module} is not installed; {INSTALL_HINT[extra]}")


def choose_backend(cuda: bool, xpu: bool, requested: Optional[str] = None) -> Tuple[str, str]:
    """(device type, backend): cuda -> nccl, xpu -> xccl, else cpu -> gloo; `requested` wins."""
    device = "cuda" if cuda else "xpu" if xpu else "cpu"
    backend = requested or {"cuda": "nccl", "xpu": "xccl", "cpu": "gloo"}[device]
    if backend in ("nccl",) and not cuda:
        raise DetectError("backend nccl needs CUDA GPUs, and none is visible here; use gloo")
    if backend in ("xccl", "ccl") and not xpu:
        raise DetectError(f"backend {backend} needs Intel GPUs, and none is visible here; use gloo")
    return device, backend


def check_port(info: DistInfo) -> None:
    """On rank 0, fail fast (never hang) when the rendezvous address is not this host or
    its port is taken; the port is not reserved, only checked."""
    if info.master_addr is None:
        raise DetectError(NO_ADDR)
    if info.rank != 0 or info.world_size == 1 or info.launcher == "torchrun":
        return  # torchrun's agent already holds MASTER_PORT for its store
    s = socket.socket(socket.AF_INET6 if ":" in info.master_addr else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the store itself does: TIME_WAIT is fine
    try:
        s.bind((info.master_addr, info.master_port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise DetectError(
                f"rendezvous port {info.master_port} on {info.master_addr} is already in use (another "
                "job's rendezvous, or a leftover process?); set MASTER_PORT to a free port") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise DetectError(
                f"rank 0 runs on {os.uname().nodename}, but the rendezvous address {info.master_addr} is "
                "not on this host; set MASTER_ADDR to rank 0's host") from None
        if isinstance(exc, socket.gaierror):
            raise DetectError(f"cannot resolve rendezvous host {info.master_addr!r}: {exc}") from None
        raise
    finally:
        s.close()


def _device(torch: Any, info: DistInfo, device_type: str) -> Any:
    if device_type == "cuda":
        idx = device_index(info.local_rank, torch.cuda.device_count())
        torch.cuda.set_device(idx)
        return torch.device("cuda", idx)
    if device_type == "xpu":
        idx = device_index(info.local_rank, torch.xpu.device_count())
        torch.xpu.set_device(idx)
        return torch.device("xpu", idx)
    return torch.device("cpu")


def single_host_loopback(info: DistInfo) -> None:
    """All ranks on one host: keep gloo on loopback instead of whatever the host name resolves to."""
    if info.num_nodes == 1 and info.master_addr in ("127.0.0.1", "localhost"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")


def checked_in(info: DistInfo, timeout: float) -> None:
    """The check-in before a backend's rendezvous, so a rank that never starts is named
    (with its host) instead of leaving the others waiting in silence.  Not under torchrun,
    whose agents have already rendezvoused; DetectError on a missing rank."""
    if info.world_size == 1 or info.launcher == "torchrun":
        return
    from jobenv.core.hostlist import this_host
    from .checkin import CheckinError, check_in

    try:
        check_in(info, this_host(), timeout)
    except CheckinError as exc:
        raise DetectError(f"check-in failed: {exc}") from None


def _torch_ready(torch: Any, info: DistInfo, backend: Optional[str], timeout: float,
                 port: bool, checkin: bool) -> Tuple[str, str, Any]:
    """What setup_torch and setup_deepspeed both do before the process group: export env://,
    pick the backend, bind this local rank's device, then check the rendezvous port (`port`)
    and check in (`checkin`).  (device type, backend, device)."""
    export_env(info)
    xpu = hasattr(torch, "xpu") and torch.xpu.is_available()
    device_type, backend = choose_backend(torch.cuda.is_available(), xpu, backend)
    device = _device(torch, info, device_type)
    single_host_loopback(info)
    if port:
        check_port(info)
    if checkin:
        checked_in(info, timeout)
    return device_type, backend, device


def setup_torch(backend: Optional[str] = None, timeout: float = 300.0, info: Optional[DistInfo] = None,
                store: Any = None, checkin: bool = True) -> DistInfo:
    """Detect, export env://, bind this local rank's device, check in, init the process group."""
    torch = require("torch", "torch")
    import datetime

    import torch.distributed as dist

    info = info or detect()
    first = not dist.is_initialized()
    device_type, backend, device = _torch_ready(torch, info, backend, timeout, port=first and store is None,
                                                checkin=first and store is None and checkin)
    if not first:
        return info
    kwargs: Dict[str, Any] = dict(backend=backend, rank=info.rank, world_size=info.world_size,
                                  timeout=datetime.timedelta(seconds=timeout))
    if store is not None:
        kwargs["store"] = store
    else:
        kwargs["init_method"] = "env://"
    if device_type != "cpu":
        kwargs["device_id"] = device
    dist.init_process_group(**kwargs)
    return info


def cleanup() -> None:
    """Tear down whatever setup_* initialized (safe to call twice)."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def setup_horovod(framework: str = "torch", info: Optional[DistInfo] = None) -> DistInfo:
    """hvd.init() for torch or tensorflow, with this rank's GPU pinned; returns our DistInfo."""
    info = info or detect()
    if framework == "torch":
        hvd = require("horovod.torch", "horovod")
        hvd.init()
        torch = require("torch", "torch")
        if torch.cuda.is_available():
            torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    elif framework == "tensorflow":
        hvd = require("horovod.tensorflow", "horovod")
        hvd.init()
        tf = require("tensorflow", "tensorflow")
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            tf.config.set_visible_devices(gpus[hvd.local_rank() % len(gpus)], "GPU")
    else:
        raise ValueError(f"framework must be 'torch' or 'tensorflow', not {framework!r}")
    if (hvd.rank(), hvd.size()) != (info.rank, info.world_size) and info.launcher != "none":
        raise DetectError(f"horovod says rank {hvd.rank()} of {hvd.size()}, {info.launcher} says "
                          f"{info.rank} of {info.world_size}")
    return info.replace(rank=hvd.rank(), world_size=hvd.size(), local_rank=hvd.local_rank(),
                        local_world_size=hvd.local_size())


def tf_config(info: DistInfo, hosts: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """TF_CONFIG for MultiWorkerMirroredStrategy: one worker per rank, ranks in block order
    over the hosts (as mpiexec -ppn and srun place them), one port per local rank."""
    if info.master_addr is None:
        raise DetectError(NO_ADDR)
    names = list(hosts or info.hosts)
    if info.num_nodes == 1 or not names:
        names = [info.master_addr]
    per = info.local_world_size
    base = info.master_port
    workers = [f"{names[r // per] if r // per < len(names) else names[-1]}:{base + r % per}"
               for r in range(info.world_size)]
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": info.rank}}


def setup_tensorflow(info: Optional[DistInfo] = None) -> DistInfo:
    """TF_CONFIG from the job's hosts and this local rank's GPU; then tensorflow_strategy()
    builds the MultiWorkerMirroredStrategy (TensorFlow reads TF_CONFIG when it is made)."""
    info = info or detect()
    os.environ["TF_CONFIG"] = json.dumps(tf_config(info))
    tf = require("tensorflow", "tensorflow")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices(gpus[info.local_rank % len(gpus)], "GPU")
    return info


def tensorflow_strategy() -> Any:
    """MultiWorkerMirroredStrategy over NCCL when this rank sees a GPU, else ring collectives."""
    tf = require("tensorflow", "tensorflow")
    impl = tf.distribute.experimental.CommunicationImplementation
    gpus = tf.config.get_visible_devices("GPU")
    options = tf.distribute.experimental.CommunicationOptions(implementation=impl.NCCL if gpus else impl.RING)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


def setup_deepspeed(backend: Optional[str] = None, timeout: float = 300.0, info: Optional[DistInfo] = None,
                    checkin: bool = True) -> DistInfo:
    """deepspeed.init_distributed fed from our detection, not its `hostname -I` discovery;
    the check-in first, as setup_torch does, so a rank that never starts is named."""
    torch = require("torch", "torch")
    deepspeed = require("deepspeed", "deepspeed")
    import datetime

    info = info or detect()
    _, backend, _ = _torch_ready(torch, info, backend, timeout, port=True, checkin=checkin)
    deepspeed.init_distributed(dist_backend=backend, auto_mpi_discovery=False, init_method="env://",
                               rank=info.rank, world_size=info.world_size,
                               timeout=datetime.timedelta(seconds=timeout))
    return info
