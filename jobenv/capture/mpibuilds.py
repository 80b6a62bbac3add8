"""Which MPI the job's Python is built with (mpi4py, horovod): `save` records it so that `launch`
and doctor can tell, before any rank starts, when the launcher cannot start them as one world."""
from __future__ import annotations

import json
import subprocess
from typing import Dict, Mapping

from jobenv.core.interpreter import code_argv

# What the job's Python links: mpi4py's library string (MPI is not initialized), and the paths
# of horovod's compiled MPI extensions (their sonames are read by jobenv: launcher_fit.SONAMES).
MPI_BUILDS = ("import glob, json, os, importlib.util\nout = {}\n"
              "try:\n    import mpi4py\n    mpi4py.rc.initialize = False\n    mpi4py.rc.finalize = False\n"
              "    from mpi4py import MPI\n    out['mpi4py'] = MPI.Get_library_version()\n"
              "except Exception:\n    pass\n"
              "spec = importlib.util.find_spec('horovod')\n"
              "for d in (spec.submodule_search_locations or []) if spec else []:\n"
              "    out.setdefault('horovod', []).extend(sorted(glob.glob(os.path.join(d, '*', 'mpi_lib*.so'))))\n"
              "print(json.dumps(out))\n")


def mpi_builds(python: str, env: Mapping[str, str], timeout: float = 30.0) -> Dict[str, str]:
    """package -> the MPI flavor (launcher_fit.mpi_flavor) the job's `python` has it built with:
    mpi4py by its library string, horovod by the sonames its MPI extension links.  {} when
    neither is there or the probe fails (a bounded child: an MPI library that hangs costs
    `timeout` at most)."""
    from jobenv.launcher_fit import mpi_flavor, soname_flavor
    from jobenv.core.readfile import read_bytes

    try:
        p = subprocess.run(code_argv(python, MPI_BUILDS), env=dict(env), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=timeout)
        data = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    out: Dict[str, str] = {}
    text = data.get("mpi4py") if isinstance(data, dict) else None
    lib = mpi_flavor(text) if isinstance(text, str) else None
    if lib:
        out["mpi4py"] = lib
    paths = data.get("horovod") if isinstance(data, dict) else None
    for path in paths[:16] if isinstance(paths, list) else []:
        try:
            found = soname_flavor(read_bytes(str(path), 1 << 28))
        except OSError:
            continue
        if found:
            out["horovod"] = found
            break
    return out
