"""The job's software environment, captured: Python env, launcher path, loaded modules.

A fresh shell on another node has neither the venv activated nor the modules loaded, so a
bare `mpiexec` or `python3` may resolve to another MPI or interpreter.  `save` records
what the first shell used (`capture`, stored as the record's optional `software` field);
the restore plan re-activates it (jobenv.store.software_field.restore_items), and `jobenv launch`
runs the recorded launcher by its absolute path (jobenv.launch.plan.launcher.launcher_path).

Pure functions of an environment mapping (plus `os.path` checks at the edges).
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, Mapping, Optional


def python_env(env: Mapping[str, str], prefix: str = sys.prefix, base_prefix: str = sys.base_prefix,
               executable: str = sys.executable) -> Optional[Dict[str, str]]:
    """The active Python environment: an activated venv, else a conda env, else ours."""
    from jobenv.schedulers.base import command_path  # `save` only: not on the `get` path

    path = env.get("PATH", "")
    venv, conda = env.get("VIRTUAL_ENV"), env.get("CONDA_PREFIX")
    if venv and os.path.isabs(venv):
        exe = command_path("python3", os.path.join(venv, "bin")) or command_path("python", os.path.join(venv, "bin"))
        return {"kind": "venv", "prefix": venv, "executable": exe or os.path.join(venv, "bin", "python3")}
    if conda and os.path.isabs(conda):
        exe = command_path("python3", os.path.join(conda, "bin")) or os.path.join(conda, "bin", "python3")
        return {"kind": "conda", "prefix": conda, "executable": exe}
    if prefix != base_prefix:  # jobenv runs from a venv that is not activated
        return {"kind": "venv", "prefix": prefix, "executable": executable}
    exe = command_path("python3", path)
    return {"kind": "system", "prefix": base_prefix, "executable": exe or executable}


def capture(env: Mapping[str, str], launcher: Optional[str] = None) -> Dict[str, Any]:
    """The record's `software` field for a job whose launch argv starts with `launcher`."""
    from jobenv.schedulers.base import command_path

    return {
        "python": python_env(env),
        "launcher": command_path(launcher, env.get("PATH", "")) if launcher else None,
        "modules": env.get("LOADEDMODULES") or None,
    }
