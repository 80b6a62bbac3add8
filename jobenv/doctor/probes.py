"""The side effects of `jobenv doctor`: programs, imports, sockets, each bounded in time.

Every probe returns plain data (text, a dict, None); jobenv.doctor.checks judges it.  Imports of
frameworks run in child interpreters started together, so a slow `import tensorflow` or
an MPI that hangs in its init costs at most the timeout, not the sum.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from jobenv.core.interpreter import code_argv, module_argv

# One child per module; each prints one JSON line.  mpi4py is told not to initialize MPI:
# MPI_Get_library_version is allowed before MPI_Init, and a singleton init can hang.
IMPORTS: Dict[str, str] = {
    "torch": ("import json, torch, torch.distributed as d\n"
              "a = d.is_available()\n"
              "xpu = bool(getattr(torch, 'xpu', None) and torch.xpu.is_available())\n"
              "cuda = torch.cuda.is_available()\n"
              "print(json.dumps({'version': torch.__version__, 'distributed': a, 'cuda': cuda, 'xpu': xpu,\n"
              "  'devices': torch.cuda.device_count() if cuda else (torch.xpu.device_count() if xpu else 0),\n"
              "  'nccl': a and d.is_nccl_available(), 'gloo': a and d.is_gloo_available(),\n"
              "  'mpi': a and d.is_mpi_available(),\n"
              "  'xccl': a and bool(getattr(d, 'is_xccl_available', lambda: False)())}))\n"),
    "mpi4py": ("import json, mpi4py\nmpi4py.rc.initialize = False\nmpi4py.rc.finalize = False\n"
               "from mpi4py import MPI\n"
               "print(json.dumps({'version': mpi4py.__version__, 'library': MPI.Get_library_version(),\n"
               "  'config': {k: str(v) for k, v in mpi4py.get_config().items()}}))\n"),
    "tensorflow": ("import json, os\nos.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')\nimport tensorflow as tf\n"
                   "print(json.dumps({'version': tf.__version__, 'gpus': len(tf.config.list_physical_devices('GPU'))}))\n"),
    "horovod": ("import json, horovod\nfrom horovod.common import util as u\n"
                "out = {'version': horovod.__version__}\n"
                "for f in ('mpi_built', 'gloo_built', 'nccl_built'):\n"
                "    try: out[f] = bool(getattr(u, f)())\n"
                "    except Exception: pass\n"
                "print(json.dumps(out))\n"),
    "deepspeed": ("import json, os\nos.environ.setdefault('DS_ACCELERATOR', 'cpu')\nimport deepspeed\n"
                  "print(json.dumps({'version': deepspeed.__version__}))\n"),
}

# seconds to import: by default only their version, from whichever distribution installed them
HEAVY = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "intel-tensorflow", "tensorflow-macos"),
         "deepspeed": ("deepspeed",)}

Started = Dict[str, Tuple[Optional[subprocess.Popen[str]], float]]


def which(program: str, path: str) -> Optional[str]:
    return shutil.which(program, path=path or None)


def start_imports(env: Mapping[str, str], timeout: float, heavy: bool) -> Started:
    """Start one child per installed module (None for a module that is not installed)."""
    import importlib.util

    out: Started = {}
    for name, code in IMPORTS.items():
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out[name] = (None, timeout)
            continue
        if name in HEAVY and not heavy:  # never imported without --deep; version from any of its dists
            from importlib.metadata import PackageNotFoundError, version

            found_v = "(version unknown)"
            for dist in HEAVY[name]:
                try:
                    found_v = version(dist)
                    break
                except PackageNotFoundError:
                    continue
            code = f"print({json.dumps(json.dumps({'version': found_v, 'imported': False}))})"
        p = subprocess.Popen(code_argv(sys.executable, code), env=dict(env), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             errors="replace", start_new_session=True)
        out[name] = (p, time.monotonic() + timeout)
    return out


def finish_imports(started: Started) -> Dict[str, Tuple[Optional[Dict[str, Any]], str]]:
    """name -> (info, error): info None with error '' means not installed."""
    out: Dict[str, Tuple[Optional[Dict[str, Any]], str]] = {}
    for name, (p, deadline) in started.items():
        if p is None:
            out[name] = (None, "")
            continue
        try:
            so, se = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.communicate()
            out[name] = (None, "import did not finish in time (a slow file system, or an MPI init that hangs)")
            continue
        lines = so.strip().splitlines()
        try:
            info = json.loads(lines[-1]) if p.returncode == 0 and lines else None
        except ValueError:
            info = None
        tail = [ln for ln in se.strip().splitlines() if ln.strip()]
        out[name] = (info, "" if info is not None else (tail[-1] if tail else f"exit code {p.returncode}"))
    return out


def launcher_banner(exe: str, env: Mapping[str, str], timeout: float = 10.0) -> str:
    """`LAUNCHER --version` output ('' if it gives none in time)."""
    try:
        p = subprocess.run([exe, "--version"], env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, errors="replace", timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (p.stdout + "\n" + p.stderr).strip()


def gpus_here(env: Mapping[str, str]) -> Tuple[Optional[int], str]:
    """GPUs this host shows: a device mask in the environment, else the vendor tools."""
    from jobenv.capture import devices

    masked = devices.from_masks(env)
    if masked is not None:
        return masked
    found = devices.probe(timeout=10.0)
    return found if found is not None else (None, "")


def resolve(host: str, timeout: float = 5.0) -> Optional[str]:
    """None if `host` resolves within `timeout`, else why not (DNS can hang: a thread bounds it)."""
    box: List[Optional[str]] = ["timed out"]

    def work() -> None:
        try:
            socket.getaddrinfo(host, None)
            box[0] = None
        except (OSError, UnicodeError) as exc:
            box[0] = str(exc) or type(exc).__name__

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(timeout)
    return box[0]


def port_busy(addr: str, port: int) -> bool:
    """True if something listens on addr:port (bound as the rendezvous store binds it)."""
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((addr, port))
    except OSError as exc:
        return exc.errno == errno.EADDRINUSE
    finally:
        s.close()
    return False


def deep_argv(jobid: str) -> List[str]:
    """`jobenv launch -n 2` of a two-rank selftest, with its fabric check (--bandwidth) and
    only its verdict and summary lines (-q)."""
    return [*module_argv(sys.executable, "jobenv"), "launch", "--job", jobid, "-n", "2", "--",
            *module_argv(sys.executable, "jobenv.selftest"), "--steps", "2", "--timeout", "60", "--bandwidth", "-q"]


def run_deep(argv: List[str], env: Mapping[str, str], timeout: float) -> Tuple[Optional[int], str, List[str]]:
    """(exit code or None on timeout, last lines of output, every non-blank line)."""
    try:
        p = subprocess.run(argv, env=dict(env), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, out[-300:], out.splitlines()
    lines = [ln for ln in (p.stdout + "\n" + p.stderr).splitlines() if ln.strip()]
    return p.returncode, " | ".join(lines[-2:]), lines
