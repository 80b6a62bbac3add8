"""Rank discovery for any launcher, and the rendezvous every backend needs.

Standard library only, and only what is already loaded at interpreter start-up: this is
imported by every rank of every job.  Detection is a pure function of an environment
mapping (plus, for Slurm, the ids of this process and its parents), so it is tested with
recorded launcher environments and with real launches alike.

    info = jobenv.runtime.detect()       # DistInfo(rank=3, world_size=8, ...)
    jobenv.runtime.export_env(info)      # RANK, WORLD_SIZE, MASTER_ADDR, ... for env://
    jobenv.setup_torch()                 # the above + device + init_process_group
"""
from __future__ import annotations

import os

from .discovery import ancestors, derived_port, detect, sources
from .info import DetectError, DistInfo

TYPE_CHECKING = False  # imported by every rank: no typing import
if TYPE_CHECKING:
    from typing import Any, MutableMapping, Optional

__all__ = ["DistInfo", "DetectError", "detect", "export_env", "setup_torch", "setup_horovod",
           "setup_tensorflow", "tensorflow_strategy", "setup_deepspeed", "cleanup", "ancestors", "derived_port", "sources",
           "device_index"]


def export_env(info: Optional[DistInfo] = None, env: Optional[MutableMapping[str, str]] = None) -> DistInfo:
    """Set RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
    GROUP_RANK/NODE_RANK) so unmodified `init_process_group("env://")` scripts work."""
    info = info or detect()
    env = os.environ if env is None else env
    if info.master_addr is None:
        raise DetectError(_NO_ADDR)
    env.update(RANK=str(info.rank), LOCAL_RANK=str(info.local_rank), WORLD_SIZE=str(info.world_size),
               LOCAL_WORLD_SIZE=str(info.local_world_size), GROUP_RANK=str(info.node_rank),
               NODE_RANK=str(info.node_rank), MASTER_ADDR=str(info.master_addr),
               MASTER_PORT=str(info.master_port))
    return info


def device_index(local_rank: int, visible: int) -> int:
    """The device a local rank uses among the `visible` ones: with GPU binding
    (JOBENV_GPU_BIND) each rank sees exactly one device, so index 0; without, the local
    rank modulo the count (ranks beyond the devices share them)."""
    return local_rank % visible if visible > 0 else 0


_NO_ADDR = ("cannot tell the rendezvous host: set MASTER_ADDR, or restore the job with "
            "`source <(jobenv get)` so that JOBENV_RECORD names its hosts")


def __getattr__(name: str) -> Any:
    if name in ("setup_torch", "setup_horovod", "setup_tensorflow", "tensorflow_strategy", "setup_deepspeed", "cleanup",
                "check_port", "choose_backend", "tf_config"):
        from . import backends

        return getattr(backends, name)
    raise AttributeError(f"module 'jobenv.runtime' has no attribute {name!r}")
