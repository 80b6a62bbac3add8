"""Restart cost of one failover on the test Slurm cluster (tests/cluster; root, Debian's Slurm).

    flock /tmp/jobenv-slurm.lock python benchmarks/failover_bench.py [--runs 5] [--others-run S]

A 4-node job (2 tasks per node) runs `jobenv launch --spare-nodes 1 --retries 1` of a program
whose ranks on node2 kill themselves with SIGKILL; the other ranks end at once, or after
--others-run S seconds (a real job's ranks keep running until they notice).  The figure is the
time from the first failed rank's end to the first rank start of attempt 2, both from the
ranks' own records in the run directories (the wrapper's clock on each node: one machine
here), and from attempt 1's last rank end to it (what jobenv itself adds between attempts).
Compare: ezpz 0.27, 10.4-11.1 s per restart on Sunspot (2 nodes, 23 GB checkpoint).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

PROG = """import os, socket, time
if socket.gethostname() == "node2":
    os.kill(os.getpid(), 9)
time.sleep({others})
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--others-run", type=float, default=0.0, metavar="S")
    args = ap.parse_args()
    from cluster.slurm import SlurmCluster, available
    from launchkit import RESTORE
    from test_e2e_slurm import batch_job, fresh
    from test_launch_slurm import restart_cost

    why = available()
    if why:
        raise SystemExit(f"failover_bench: {why}")
    with tempfile.TemporaryDirectory(prefix="jobenv-failover-") as tmp:
        cluster = SlurmCluster(Path(tmp, "slurm")).start()
        jobs: list = []
        try:
            costs, owns = [], []
            for i in range(args.runs):
                work = Path(tmp, f"run{i}")
                work.mkdir()
                store = str(work / "jobenv-home")
                batch_job(cluster, jobs, store, work, "-N", "4", "--ntasks-per-node", "2")
                (work / "prog.py").write_text(PROG.format(others=args.others_run))
                p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --spare-nodes 1 --retries 1 "
                          f"-- python3 {work / 'prog.py'}", store)
                if p.returncode != 0:
                    raise SystemExit(f"failover_bench: the launch failed ({p.returncode}):\n{p.stderr[-2000:]}")
                cost, own = restart_cost(store)
                costs.append(cost)
                owns.append(own)
                cluster.run(["scancel", jobs[-1]], check=False)
        finally:
            for j in jobs:
                cluster.run(["scancel", j], check=False)
            cluster.stop()
    print(f"failover restart cost (others run {args.others_run:g} s), median of {args.runs}: "
          f"{statistics.median(costs):.2f} s from the failure to attempt 2's first rank "
          f"(min {min(costs):.2f}, max {max(costs):.2f}); {statistics.median(owns):.2f} s from attempt 1's "
          "last rank end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
