"""Backend adapters: one file per communication backend, behind one small interface.

An adapter is built from the rank's DistInfo (and the requested backend variant), sets
up its framework's process group, and records `imports` and `init` seconds and a
`device` description.  The selftest then calls only the methods of `Comm` (comm.py).  Frameworks
are imported inside the adapter's module, so `--framework mpi` never loads torch.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Optional

from ...runtime import DistInfo

if TYPE_CHECKING:
    from .comm import Comm

# (framework, backend) -> "module:class"; backend None is the framework's default
ADAPTERS = {
    ("mpi", None): ("mpi", "MPIComm", "mpi4py", "mpi4py"),
    ("torch", None): ("torch_ddp", "TorchComm", "torch", "torch"),
    ("torch", "horovod"): ("horovod", "HorovodTorchComm", "torch", "torch"),
    ("torch", "deepspeed"): ("deepspeed", "DeepSpeedComm", "torch", "torch"),
    ("tensorflow", None): ("tensorflow", "TFComm", "tensorflow", "tensorflow"),
}


def default_framework() -> str:
    import importlib.util

    return "torch" if importlib.util.find_spec("torch") is not None else "mpi"


def make_comm(framework: str, backend: Optional[str], info: DistInfo, timeout: float) -> Comm:
    """The adapter for (framework, backend), after checking that its framework is installed."""
    from ...runtime.backends import ensure_installed

    key = (framework, backend if (framework, backend) in ADAPTERS else None)
    module, cls, needs, extra = ADAPTERS[key]
    ensure_installed(needs, extra)
    adapter: Callable[..., Comm] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return adapter(info, backend=backend, timeout=timeout)
