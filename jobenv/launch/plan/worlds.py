"""Refuse, before any rank starts, a launch whose ranks would each start as rank 0 of a world
of 1: an MPI library built for one ABI (MPICH's, Open MPI's) under the other's launcher
initializes as a singleton, and the run "succeeds" N times over, silently.

Judged at every launch from what is installed now (not what `save` saw), against the launcher
this launch runs (`launch --launcher` included), for what the program can reach:
- a Python program (`python3 train.py`, `-m MOD`, `-c CODE`): mpi4py and horovod when its
  own source (the script, the module's file in the working directory, the code) imports them
  (`import horovod.torch as hvd`, `from mpi4py import MPI`); `-m horovod...`/`-m mpi4py...`
  too.  A package merely installed (a DeepSpeed run in a venv that also holds horovod) is not
  reached, and horovod is not when HOROVOD_CONTROLLER=gloo (its MPI is then unused).  What
  the probe found is the ranks' interpreter's (launch.plan.mpibuilds, remembered between launches);
- any other program: the MPI library its ELF file links (libmpi.so.40 is Open MPI's,
  libmpi.so.12/libmpich.so MPICH's), read from its first MiBs;
- a shell (`sh -c ...`): nothing (what it runs is not known before it runs).
The rule on each pair is launcher_fit.world_misfit, the one save and doctor use.
"""
from __future__ import annotations

import os
import re

from jobenv.store.software_field import MPI_PACKAGES

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, Sequence, Tuple

_SOURCE_LIMIT = 4 << 20  # bytes of a script read for its imports; of a program for its sonames
_PYTHON = re.compile(r"python[0-9.]*$")


def imports(source: str, package: str) -> bool:
    """Does Python `source` import `package` (an `import` or `from` statement at any depth)?"""
    name = re.escape(package)
    return re.search(rf"^[ \t]*(?:from[ \t]+{name}\b|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*"
                     rf"{name}\b)", source, re.M) is not None


def _read(path: str) -> bytes:
    """The first _SOURCE_LIMIT bytes of the regular file `path` (a FIFO or device is never
    opened); b"" for anything else."""
    from jobenv.core.readfile import open_regular

    try:
        fd, _ = open_regular(path)
    except (OSError, ValueError):
        return b""
    try:
        return os.read(fd, _SOURCE_LIMIT)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _python_source(command: Sequence[str], cwd: str) -> Tuple[str, Optional[str]]:
    """(the source a Python command runs as its own, a module it names that is not in `cwd`)."""
    from .program import script_end

    end = script_end(command)
    if end < 2:
        return "", None
    flag, last = command[end - 2], command[end - 1]
    if flag == "-c":
        return last, None
    if flag == "-m":
        for rel in (last.replace(".", "/") + ".py", os.path.join(last.replace(".", "/"), "__main__.py")):
            text = _read(os.path.join(cwd, rel))
            if text:
                return text.decode("utf-8", "replace"), None
        return "", last
    return _read(os.path.join(cwd, last)).decode("utf-8", "replace"), None


def reached(command: Sequence[str], env: Mapping[str, str], cwd: str) -> Tuple[Optional[str], Tuple[str, ...]]:
    """(the ranks' interpreter, the MPI packages the program reaches) for a Python program;
    (None, ()) for any other."""
    from .attempt import find_program

    if not command or not _PYTHON.match(os.path.basename(command[0])):
        return None, ()
    python = command[0] if os.path.isabs(command[0]) else find_program(command[0], env)
    if python is None:
        return None, ()
    source, module = _python_source(command, cwd)
    pkgs = tuple(p for p in MPI_PACKAGES if imports(source, p) or (module or "").split(".")[0] == p)
    if env.get("HOROVOD_CONTROLLER", "").lower() == "gloo":
        pkgs = tuple(p for p in pkgs if p != "horovod")
    return python, pkgs


def linked(command: Sequence[str], env: Mapping[str, str]) -> Dict[str, str]:
    """{program name: MPI flavor} for a program (not Python, not a shell) whose ELF file links an MPI."""
    from jobenv.launcher_fit import soname_flavor
    from .attempt import find_program
    from .program import SHELLS

    if not command or _PYTHON.match(os.path.basename(command[0])) or os.path.basename(command[0]) in SHELLS:
        return {}
    path = command[0] if "/" in command[0] else find_program(command[0], env)
    head = _read(os.path.abspath(path)) if path else b""
    found = soname_flavor(head) if head.startswith(b"\x7fELF") else None
    return {os.path.basename(command[0]): found} if found else {}


def misfits(launcher: str, family: str, command: Sequence[str], env: Mapping[str, str], cwd: str) -> List[str]:
    """One line per package or program the launch reaches that `launcher` (of `family`) would
    start as worlds of one rank, naming both sides and the fix; [] when none."""
    from jobenv.launcher_fit import world_misfit
    from jobenv.runtime import families
    from .mpibuilds import current_builds

    row = families.get(family)
    if row.mpi not in ("mpich", "openmpi"):  # srun, flux serve either ABI; torchrun starts no MPI
        return []
    python, pkgs = reached(command, env, cwd)
    built = linked(command, env)
    if python and pkgs:
        now = current_builds(python, env)
        built.update((p, now[p]) for p in pkgs if p in now)
    return [f"{line} (launcher {launcher}; --allow-mismatch launches anyway)" for line in world_misfit(row.flavor, built)]
