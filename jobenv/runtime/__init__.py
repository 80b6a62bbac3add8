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

from .discovery import ancestors, derived_port, detect, sources
from .info import DetectError, DistInfo

TYPE_CHECKING = False  # imported by every rank: no typing import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DistInfo", "DetectError", "detect", "export_env", "setup_torch", "setup_horovod",
           "setup_tensorflow", "tensorflow_strategy", "setup_deepspeed", "cleanup", "ancestors", "derived_port", "sources",
           "device_index"]

# name -> the module that defines it, imported on first use (detect() needs none of them)
_LAZY = {"export_env": "export", "device_index": "export"}
_LAZY.update(dict.fromkeys(("setup_torch", "setup_horovod", "setup_tensorflow", "tensorflow_strategy",
                            "setup_deepspeed", "cleanup", "check_port", "choose_backend", "tf_config"), "backends"))


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is not None:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    raise AttributeError(f"module 'jobenv.runtime' has no attribute {name!r}")
