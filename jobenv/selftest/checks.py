"""One rank's run: backend, known-answer collectives, a tiny training, phase timings."""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Dict, Optional

from ..runtime import DistInfo
from .codes import T_INTERP
from .adapters import default_framework, make_comm
from . import fabric
from .bandwidth import measure
from .barrier import Link, Watchdog


def run_rank(args: argparse.Namespace, info: DistInfo, host: str, t_start: Optional[float], deadline: float, link: Link,
             t_checkin: float) -> Dict[str, Any]:
    framework = args.framework or default_framework()
    nccl_log = fabric.nccl_log_to_file(os.environ) if args.bandwidth and framework == "torch" else None
    try:
        return _run(args, info, host, t_start, deadline, link, t_checkin, framework, nccl_log)
    except BaseException:
        if nccl_log:  # NCCL's warnings went to its file with the rest of its log: show them with the failure
            for line in fabric.parse_nccl(fabric.take_log(nccl_log))["warnings"]:
                sys.stderr.write(f"jobenv.selftest: rank {info.rank} ({host}): {line}\n")
        raise


def _run(args: argparse.Namespace, info: DistInfo, host: str, t_start: Optional[float], deadline: float, link: Link,
         t_checkin: float, framework: str, nccl_log: Optional[str]) -> Dict[str, Any]:
    wd = Watchdog(info, host, link, deadline)
    with wd.phase("backend_init"):
        comm = make_comm(framework, args.backend, info, max(1.0, deadline - time.time()) + 30)
    phases: Dict[str, Optional[float]] = {}
    launch_t = os.environ.get("JOBENV_LAUNCH_TIME")
    try:
        phases["launch"] = max(0.0, t_start - float(launch_t)) if (launch_t and t_start) else None
    except ValueError:
        phases["launch"] = None
    phases["interpreter"] = (T_INTERP - t_start) if t_start else None
    phases["imports"] = comm.imports
    phases["rendezvous"] = t_checkin + comm.init
    n, r = info.world_size, info.rank
    checks: Dict[str, bool] = {}
    with wd.phase("first_collective") as ph:
        checks["allreduce_sum"] = comm.allreduce(r + 1, "sum") == n * (n + 1) / 2
    phases["first_collective"] = ph.seconds
    t_first_allreduce = time.time()
    checks["allreduce_max"] = comm.allreduce(r, "max") == n - 1
    with wd.phase("broadcast"):
        checks["broadcast"] = comm.broadcast(4242.0 + n if r == 0 else -1.0) == 4242.0 + n
    with wd.phase("allgather"):
        hosts = comm.allgather(host)
    checks["allgather_hosts"] = len(hosts) == n and hosts[r] == host
    with wd.phase("barrier"):
        comm.barrier()
    checks["barrier"] = True
    bandwidth, backend = None, framework
    if args.bandwidth and hasattr(comm, "dist") and comm.dist.is_initialized():
        backend = str(comm.dist.get_backend())
        with wd.phase("bandwidth"):
            bandwidth = measure(comm, hosts)
    losses, first_step, digest = comm.train(args.steps, wd)
    phases["first_step"] = first_step
    with wd.phase("digests"):
        digests = comm.allgather(digest)
    checks["loss_decreases"] = len(losses) >= 2 and losses[-1] < losses[0]
    checks["params_identical"] = len(set(digests)) == 1
    t = time.time()
    comm.close()
    phases["teardown"] = time.time() - t
    seen = None
    if args.bandwidth:  # after teardown: NCCL has written every channel's line by now
        seen = fabric.rank_transport(backend, host, nccl_log, os.environ)
    return {"bandwidth": bandwidth, "fabric": seen, "rank": r, "host": host, "local_rank": info.local_rank,
            "node_rank": info.node_rank,
            "device": comm.device, "framework": framework, "launcher": info.launcher,
            "phases": phases, "checks": checks, "losses": losses, "rank_host_map": hosts,
            "start_to_first_allreduce": (t_first_allreduce - t_start) if t_start else None}


