"""Run the per-host worker on every host of the job, in parallel, through the job's own
launcher with one process per host (no ssh), and collect one report per host.

`per_host_argv` renders "one process per host" from the job's machine profile (the same
template `launch` uses, sized nhosts=K, ppn=1, no GPUs).  It stands in for the launch
helper's sizing function (CONTRACTS item 5) until that lands; swap it then.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..record import JobRecord
from .worker import MARK

Report = Dict[str, Any]


def per_host_argv(rec: JobRecord, environ: Mapping[str, str]) -> List[str]:
    """The launcher argv that starts one process on each host of the job ([] for a local
    job: this host is the whole allocation, so the worker runs directly)."""
    if rec.scheduler == "local":
        return []
    from .. import launch, profiles

    prof = profiles.load_all(environ).get(rec.machine)
    if prof is not None:
        cand = launch.pick_launcher(prof)
        ctx = launch.context(rec.nhosts, 1, 0, rec.hostfile, rec.jobid, prof.vars)
        argv = launch.render(cand["argv"], ctx)
    else:  # the profile is gone: the three launcher families by name
        name = os.path.basename(rec.launch[0])
        k = str(rec.nhosts)
        if name == "srun":
            argv = ["srun", "-N", k, "-n", k, "--ntasks-per-node", "1"]
        elif name == "mpirun":
            argv = ["mpirun", "-n", k, "-N", "1", "--hostfile", str(rec.hostfile)]
        else:
            argv = [name, "-n", k, "-ppn", "1", "--hostfile", str(rec.hostfile)]
    if os.path.basename(rec.launch[0]) == argv[0]:
        argv[0] = rec.launch[0]  # the recorded launcher, by absolute path when recorded so
    return argv


def launcher_environ(rec: JobRecord, rec_path: str, environ: Mapping[str, str]) -> Dict[str, str]:
    """The job's environment as `jobenv launch` builds it: the restore plan, applied."""
    from .. import plan
    from ..shell import jobenv_argv

    return plan.apply(plan.build(rec, rec_path, environ, jobenv_argv=jobenv_argv(), allow_stale=True), environ)


def worker_argv(python: str, spec: Dict[str, Any]) -> List[str]:
    """Run jobenv.stage.worker from the jobenv that runs this command, isolated (-I) from
    the user's PYTHONPATH and site-packages: it needs the standard library only."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from jobenv.stage.worker import main; "
            "sys.exit(main(sys.argv[2:]))")
    return [python, "-I", "-c", code, root, json.dumps(spec)]


def run(argv: List[str], env: Dict[str, str], expect: int, timeout: float,
        on_event: Callable[[Report], None]) -> Tuple[List[Report], str, int]:
    """Start the launcher, feed each report line to `on_event`; (done reports, stderr tail, rc)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    done: List[Report] = []
    tail: List[str] = []
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    bufs = {"out": b"", "err": b""}
    deadline = time.time() + timeout
    open_streams = 2
    while open_streams:
        left = deadline - time.time()
        if left <= 0:
            _kill(proc)
            tail.append(f"timed out after {timeout:g} s")
            break
        for sk, _ in sel.select(min(left, 1.0)):
            chunk = os.read(sk.fd, 65536)
            if not chunk:
                sel.unregister(sk.fileobj)
                open_streams -= 1
                continue
            bufs[sk.data] += chunk
            *lines, bufs[sk.data] = bufs[sk.data].split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace")
                if sk.data == "err":
                    tail = (tail + [line])[-5:]
                elif line.startswith(MARK):
                    try:
                        rep = json.loads(line[len(MARK):])
                    except ValueError:
                        continue
                    if rep.get("event") == "done":
                        done.append(rep)
                    on_event(rep)
    try:
        rc = proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill(proc)
        rc = proc.wait()
    return done, "; ".join(t.strip() for t in tail if t.strip()), rc


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def local_python(source: str) -> str:
    """The worker's interpreter: the source environment's own python (it exists wherever
    the shared file system is mounted), else this one."""
    for name in ("python3", "python"):
        p = os.path.join(source, "bin", name)
        if os.path.exists(p):
            return p
    return sys.executable


def match_host(reported: str, hosts: List[str]) -> Optional[str]:
    from ..hostlist import host_index

    i = host_index(hosts, reported)
    return None if i is None else hosts[i]
