"""Run the per-host worker on every host of the job, in parallel, through the job's own
launcher with one process per host (no ssh), and collect one report per host.

`per_host_argv` asks `jobenv launch`'s sizing for "one process per host" (the job's
profile template sized nhosts=K, ppn=1, no GPUs, by the recorded launcher).
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

from jobenv import schedulers
from jobenv.core.interpreter import code_argv
from jobenv.store.record import JobRecord
from .worker import MARK

Report = Dict[str, Any]


def per_host_argv(rec: JobRecord, environ: Mapping[str, str], write: bool = True) -> List[str]:
    """The launcher argv that starts one process on each host of the job ([] for a job
    whose one host is this one (`local`), so the worker runs directly).

    `jobenv launch`'s sizing decides it (one rule for both): the job's profile template
    sized to one process per host, run by the recorded launcher.  A hostfile it needs is
    written privately beside the record's runs (not when only printing, `write=False`).
    """
    if rec.scheduler in schedulers.THIS_HOST_ONLY:
        return []
    from jobenv.store import files as store
    from ..launch.plan.attempt import per_host_plan
    from ..launch.ranks import make_run_dir, write_private

    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(environ))
    hostfile = os.path.join(make_run_dir(runs, "stage") if write else os.path.join(runs, "<run>"), "hostfile")
    argv, text = per_host_plan(rec, environ, list(rec.hosts), hostfile)
    if text is not None and write:
        write_private(hostfile, text)
    return argv


def launcher_environ(rec: JobRecord, rec_path: str, environ: Mapping[str, str]) -> Dict[str, str]:
    """The job's environment as `jobenv launch` builds it: the restore plan, applied."""
    from jobenv.restore import plan
    from jobenv.restore.shell import jobenv_argv

    return plan.apply(plan.build(rec, rec_path, environ, jobenv_argv=jobenv_argv(), allow_stale=True), environ)


def worker_argv(python: str, spec: Dict[str, Any]) -> List[str]:
    """Run jobenv.stage.worker from the jobenv that runs this command, isolated (-I) from
    the user's PYTHONPATH and site-packages: it needs the standard library only."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from jobenv.stage.worker import main; "
            "sys.exit(main(sys.argv[2:]))")
    return [*code_argv(python, code, isolated=True), root, json.dumps(spec)]


def run(argv: List[str], env: Dict[str, str], timeout: float,
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


def _kill(proc: subprocess.Popen[Any]) -> None:
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
    from jobenv.core.hostlist import host_index

    i = host_index(hosts, reported)
    return None if i is None else hosts[i]
