"""The job's software environment: Python env, launcher path, loaded modules.

A fresh shell on another node has neither the venv activated nor the modules loaded, so a
bare `mpiexec` or `python3` may resolve to another MPI or interpreter.  `save` records
what the first shell used (`capture`, stored as the record's optional `software` field);
the restore plan re-activates it (`restore_items`), and `jobenv launch` runs the recorded
launcher by its absolute path (`launcher_path`).

Pure functions of an environment mapping (plus `os.path` checks at the edges).
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # the restore plan calls restore_items on the `get` path
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple


MPI_PACKAGES = ("mpi4py", "horovod")


def _which(name: str, path: str) -> Optional[str]:
    """The user's own command as exec will find it, relative PATH entries included (`launch
    CMD` checks CMD is there).  Not for what jobenv records or runs on its own behalf (the
    launcher, python3): schedulers.base.command_path finds those, never in the working
    directory.  shutil.which without importing shutil (it is on the `get`/`launch` path)."""
    if "/" in name:
        return os.path.abspath(name) if os.access(name, os.X_OK) else None
    for d in path.split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


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
    # package -> the MPI flavor it is built with (save's probe, capture.mpibuilds)
    mpi = {k: v for k, v in mpi.items() if k in MPI_PACKAGES and isinstance(v, str) and len(v) < 64
           and v.isprintable()} if isinstance(mpi, dict) else {}
    out: Dict[str, Any] = {"python": py, "launcher": launcher, "modules": modules}
    if mpi:
        out["mpi"] = mpi
    return out


def _field(record: Any) -> Optional[Dict[str, Any]]:
    return validate(getattr(record, "software", None))


def restore_items(record: Any, environ: Mapping[str, str], host: str = "",
                  python: bool = True) -> Tuple[Dict[str, str], List[str], List[str]]:
    """(variables to set, PATH directories to prepend, warnings) re-creating the saved env.

    `python=False` is `--no-python`.  A venv or conda env that does not exist here is a
    warning, not an error: the job may have been saved on a node with other file systems.
    """
    sw = _field(record)
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


def launcher_path(record: Any, argv0: str, exists: Callable[[str], bool] = lambda p: os.access(p, os.X_OK)
                  ) -> Tuple[str, Optional[str]]:
    """(program to run, warning): the recorded absolute launcher when it is still here."""
    sw = _field(record)
    rec = sw["launcher"] if sw else None
    if rec and os.path.basename(rec) == os.path.basename(argv0):
        if exists(rec):
            return rec, world_warning(argv0, rec, sw.get("mpi", {}) if sw else {})
        return argv0, f"the job's launcher {rec} is not here; using {argv0!r} from PATH"
    return argv0, None


def world_warning(argv0: str, launcher: str, built: Mapping[str, str]) -> Optional[str]:
    """launch's word, before any rank starts, when `launcher` cannot start the job's MPI
    packages (`built`, recorded by save) as one world (the rule: launcher_fit.world_misfit)."""
    if not built:
        return None
    from jobenv.runtime.families import known
    from jobenv.launcher_fit import world_misfit

    row = known(argv0, launcher)
    lines = world_misfit(row.flavor if row is not None else None, built)
    return "; ".join(lines) or None
