"""What `init_process_group("env://")` reads, set from a DistInfo: the variables, and the device
a local rank uses.

Kept out of `jobenv/runtime/__init__.py` so that the package's modules import their names from
the module that defines them (backends.py uses both), never from the package they sit in, and
loaded on first use: `import jobenv.runtime; detect()` runs in every rank and needs neither.
"""
from __future__ import annotations

import os

from .discovery import detect
from .info import NO_ADDR, DetectError

TYPE_CHECKING = False  # imported by every rank that calls export_env: no typing import
if TYPE_CHECKING:
    from typing import MutableMapping, Optional

    from .info import DistInfo


def export_env(info: Optional[DistInfo] = None, env: Optional[MutableMapping[str, str]] = None) -> DistInfo:
    """Set RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
    GROUP_RANK/NODE_RANK) so unmodified `init_process_group("env://")` scripts work."""
    info = info or detect()
    env = os.environ if env is None else env
    if info.master_addr is None:
        raise DetectError(NO_ADDR)
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
