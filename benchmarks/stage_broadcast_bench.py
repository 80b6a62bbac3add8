"""Staging as a broadcast vs every host reading the shared file system, on the Slurm test cluster.

    flock /tmp/jobenv-cluster.lock python benchmarks/stage_broadcast_bench.py [--mb 200] [--runs 3]

A 4-node job stages a venv holding a --mb MB incompressible file, to a per-host directory:
- `--fan-out 0` (every host reads the archive from the shared file system, as before the broadcast)
- `--fan-out 2` (the first host reads it; the others receive it from a peer, jobenv.stage.relay)
each after a `--clean`.  Figures:
- bytes read from the archive, counted by `strace -f` attached to every node's slurmd (so every
  worker the launcher starts, whatever it reports): the sum of read() results on a descriptor
  that names the archive;
- wall time of the whole stage, and per host (the worker's own `... in S s`), median of --runs
  (without strace).
Then a model for 4,096 hosts (printed with its inputs).  All nodes are namespaces of one VM
(one disk, shared cores): the bytes are exact, the times only relative.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]


def archive_reads(trace: Path, archive: str) -> int:
    """Bytes read from `archive` in strace -ff's per-process files `trace`.<pid> (one file per
    process, so no call is split into `unfinished` and `resumed` halves)."""
    total = 0
    pat = re.compile(r"^(?:read|pread64)\(\d+<([^>]*)>.*\)\s+=\s+(\d+)")
    for part in trace.parent.glob(trace.name + ".*"):
        for line in part.read_text(errors="replace").splitlines():
            m = pat.search(line)
            if m and m.group(1) == archive:
                total += int(m.group(2))
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    from cluster.slurm import SlurmCluster, available
    from test_e2e_slurm import batch_job, fresh
    from test_stage import make_venv

    why = available()
    if why:
        raise SystemExit(why)
    tmp = Path(tempfile.mkdtemp(prefix="stage-bcast-"))
    os.chmod(tmp, 0o755)
    cluster = SlurmCluster(tmp / "slurm").start()
    jobs: list = []
    store = str(tmp / "home")
    try:
        batch_job(cluster, jobs, store, tmp, "-N", "4", "--ntasks-per-node", "1")
        venv = make_venv(tmp / "shared" / "env")
        with open(venv / "blob.bin", "wb") as f:
            for _ in range(a.mb):
                f.write(os.urandom(1 << 20))
        to = tmp / "local"
        print(f"# flock /tmp/jobenv-cluster.lock python benchmarks/stage_broadcast_bench.py --mb {a.mb} --runs {a.runs}, "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, test Slurm cluster (4 nodes in namespaces of one "
              f"{os.cpu_count()}-core VM, one disk)")
        for k in (0, 2):
            stage = f"jobenv stage --env {venv} --to {to}/%h --fan-out {k}"
            walls, hosts = [], []
            for _ in range(a.runs):
                fresh(cluster, "node1", "bash", stage + " --clean", store)
                t = time.perf_counter()
                p = fresh(cluster, "node1", "bash", stage, store)
                walls.append(time.perf_counter() - t)
                if p.returncode:
                    raise SystemExit(p.stdout + p.stderr)
                hosts += [float(x) for x in re.findall(r"MB in ([0-9.]+) s", p.stdout)]
            archive = next(str(x) for x in (Path(store) / "stage").glob("*.tar"))
            size = os.path.getsize(archive)
            fresh(cluster, "node1", "bash", stage + " --clean", store)
            trace = tmp / f"strace-{k}.txt"
            pids = [str(cluster.procs[n].pid) for n in cluster.nodes]
            st = subprocess.Popen(["strace", "-ff", "-qq", "-y", "-e", "trace=read,pread64", "-o", str(trace),
                                   *[x for pid in pids for x in ("-p", pid)]], stderr=subprocess.DEVNULL)
            time.sleep(1.0)
            p = fresh(cluster, "node1", "bash", stage, store)
            time.sleep(0.5)
            st.send_signal(signal.SIGINT)
            st.wait(30)
            got = archive_reads(trace, archive)
            mode = "every host reads the shared fs" if k == 0 else f"broadcast, fan-out {k}"
            print(f"{mode:32}  archive {size / 1e6:7.1f} MB  read by workers {got / 1e6:7.1f} MB = {got / size:.2f}x"
                  f"  stage wall {statistics.median(walls):5.1f} s  per host {statistics.median(hosts):5.1f} s"
                  f" (min {min(hosts):.1f}, max {max(hosts):.1f})")
            for line in p.stdout.splitlines():
                if line.startswith("shared file system read"):
                    print(f"{'':32}  jobenv says: {line}")
        fresh(cluster, "node1", "bash", f"jobenv stage --env {venv} --to {to}/%h --clean", store)
    finally:
        for j in jobs:
            cluster.run(["scancel", j], check=False)
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
