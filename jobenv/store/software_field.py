"""The record's `software` field, read back: its checked form (`validate`, what store.record
keeps of a loaded record) and what the restore plan re-activates from it (`restore_items`).

A fresh shell on another node has neither the venv activated nor the modules loaded, so a
bare `mpiexec` or `python3` may resolve to another MPI or interpreter.  `save` records what
the first shell used (jobenv.capture.software_env); `get`'s restore plan re-activates it from
here, and `jobenv launch` runs the recorded launcher by its absolute path
(jobenv.launch.plan.launcher).  Standard library only: the restore plan loads it on the `get` path.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # the restore plan calls restore_items on the `get` path
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple


MPI_PACKAGES = ("mpi4py", "horovod")


def validate(data: Any) -> Optional[Dict[str, Any]]:
    """The field as loaded from a record, or None when absent or malformed (it is optional)."""
    if not isinstance(data, dict):
        return None
    py = data.get("python")
    if py is not None and not (isinstance(py, dict) and py.get("kind") in ("venv", "conda", "system")
                               and all(isinstance(py.get(k), str) and os.path.isabs(py[k])
                                       for k in ("prefix", "executable"))):
        py = None
    launcher, modules, mpi = data.get("launcher"), data.get("modules"), data.get("mpi")
    if not (isinstance(launcher, str) and os.path.isabs(launcher)):
        launcher = None
    if not isinstance(modules, str):
        modules = None
    # package -> the MPI flavor it is built with (save's probe, launch.plan.mpibuilds)
    mpi = {k: v for k, v in mpi.items() if k in MPI_PACKAGES and isinstance(v, str) and len(v) < 64
           and v.isprintable()} if isinstance(mpi, dict) else {}
    out: Dict[str, Any] = {"python": py, "launcher": launcher, "modules": modules}
    if mpi:
        out["mpi"] = mpi
    return out


def field(record: Any) -> Optional[Dict[str, Any]]:
    """A record's `software` field, checked (None: absent or malformed)."""
    return validate(getattr(record, "software", None))


def restore_items(record: Any, environ: Mapping[str, str], host: str = "",
                  python: bool = True) -> Tuple[Dict[str, str], List[str], List[str]]:
    """(variables to set, PATH directories to prepend, warnings) re-creating the saved env.

    `python=False` is `--no-python`.  A venv or conda env that does not exist here is a
    warning, not an error: the job may have been saved on a node with other file systems.
    """
    sw = field(record)
    sets: Dict[str, str] = {}
    prepend: List[str] = []
    warnings: List[str] = []
    if sw is None:
        return sets, prepend, warnings
    py = sw["python"]
    if python and py and py["kind"] != "system":
        bindir = os.path.join(py["prefix"], "bin")
        where = f" on {host}" if host else ""
        if not os.path.isdir(bindir):
            warnings.append(f"the job's Python environment {py['prefix']} is not here{where}; not activating it")
        else:
            prepend.append(bindir)
            sets["VIRTUAL_ENV" if py["kind"] == "venv" else "CONDA_PREFIX"] = py["prefix"]
    saved, now = sw["modules"] or "", environ.get("LOADEDMODULES", "")
    if saved != now:
        if saved:
            warnings.append("loaded modules differ from the saved job's; to match it run: "
                            f"module purge && module load {' '.join(m for m in saved.split(':') if m)}")
        else:
            warnings.append("modules are loaded here that the saved job did not have "
                            f"({now.replace(':', ' ')}); `module purge` matches it")
    return sets, prepend, warnings
