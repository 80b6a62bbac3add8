"""Which MPI the ranks' Python is built with (mpi4py, horovod): `save` records it, and `launch`
asks it again before every launch (jobenv.launch.plan.worlds), so that a package installed or
rebuilt after the save is judged as it is now, before any rank starts.

The probe is a child interpreter (~0.5 s: it loads mpi4py's MPI library), so its answer is
remembered (store.cache, `mpi-builds`) under a key that changes with whatever could change
it: the interpreter's path and `stat` line, PYTHONPATH and LD_LIBRARY_PATH, and the `stat`
lines (mtimes included) of the interpreter's package directories, which pip changes with
every package it adds, removes or upgrades there.
"""
from __future__ import annotations

import glob
import os
import subprocess
import time

from jobenv.core.interpreter import code_argv

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional

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
    return _probe(python, env, timeout) or {}


def _probe(python: str, env: Mapping[str, str], timeout: float) -> Optional[Dict[str, str]]:
    """mpi_builds; None when the probe itself failed (not to be remembered)."""
    import json

    from jobenv.launcher_fit import mpi_flavor, soname_flavor
    from jobenv.core.readfile import read_bytes

    try:
        p = subprocess.run(code_argv(python, MPI_BUILDS), env=dict(env), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, errors="replace", timeout=timeout)
        data = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if p.returncode != 0:
        return None
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


def package_dirs(python: str, env: Mapping[str, str]) -> List[str]:
    """The directories whose entries decide what `python` imports: its prefix's site- and
    dist-packages (a venv's base too, with include-system-site-packages), PYTHONPATH's."""
    prefixes = [os.path.dirname(os.path.dirname(python))]
    try:
        with open(os.path.join(prefixes[0], "pyvenv.cfg"), encoding="utf-8", errors="replace") as f:
            cfg = dict(line.partition("=")[::2] for line in f.read(1 << 16).splitlines())
        cfg = {k.strip(): v.strip() for k, v in cfg.items()}
        if cfg.get("include-system-site-packages", "").lower() == "true" and cfg.get("home"):
            prefixes.append(os.path.dirname(cfg["home"]))
    except OSError:
        pass
    found = [d for p in prefixes for pattern in ("lib*/python3*/site-packages", "lib*/python3*/dist-packages",
                                                 "lib/python3/dist-packages")
             for d in sorted(glob.glob(os.path.join(glob.escape(p), pattern)))]
    return found + [d for d in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(d)]


def current_builds(python: str, env: Mapping[str, str]) -> Dict[str, str]:
    """mpi_builds, remembered while nothing it depends on has changed (see the module's doc)."""
    from jobenv.store import cache

    paths = [python, *package_dirs(python, env)]
    key = "\0".join([*(f"{p}={cache.sig(p)}" for p in paths), env.get("PYTHONPATH", ""),
                     env.get("LD_LIBRARY_PATH", "")])
    kept = cache.read_builds(env, key)
    if kept is not None:
        return dict(zip(kept[::2], kept[1::2]))
    now = time.time()
    built = _probe(python, env, 30.0)
    if built is None:
        return {}
    cache.write_builds(env, key, [w for kv in sorted(built.items()) for w in kv], paths, now)
    return built
