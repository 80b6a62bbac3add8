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
Then a model for 4,096 hosts (printed with its inputs; `--model-only` prints just that).  All nodes are namespaces of one VM
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


def model(hosts: int = 4096) -> None:
    """Staging time for `hosts` hosts, broadcast vs today, from stated inputs (not measured here).

    Broadcast (cut-through: a host forwards each 1 MiB chunk as it arrives, to its k children
    at once, so its uplink is shared k ways): T = S*k/B_hop + depth(N, k)*(h + C/B_hop) + U.
    Today: every host reads S from the shared file system; with an aggregate file-system
    bandwidth F shared by all, T = max(S/B_host, N*S/F) + U."""
    from jobenv.stage.relaydir import depth

    b_hop, h, chunk, b_host, f_agg, unpack = 1.0e9, 0.2, 1 << 20, 62e6, 100e9, 1.0e9
    print(f"# model, {hosts} hosts (inputs assumed, not measured here): per-hop TCP stream B_hop "
          f"{b_hop / 1e9:g} GB/s, per-hop set-up h {h} s (port file, connect, HMAC), chunk {chunk >> 20} MiB, "
          f"unpack to local disk {unpack / 1e9:g} GB/s; today: {b_host / 1e6:g} MB/s per host (issue 27's figure), "
          f"shared file system aggregate F {f_agg / 1e9:g} GB/s; ezpz yeet: 750.6 s for 4,096 Aurora nodes")
    for size in (1e9, 5e9, 20e9):
        u = size / unpack
        today = max(size / b_host, hosts * size / f_agg) + u
        cells = []
        for k in (2, 4, 8):
            t = size * k / b_hop + depth(hosts, k) * (h + chunk / b_hop) + u
            cells.append(f"k={k} (depth {depth(hosts, k)}): {t:6.1f} s")
        print(f"  archive {size / 1e9:4.0f} GB: broadcast " + ", ".join(cells) + f"; every host reads: {today:7.1f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model-only", action="store_true", help="print the 4,096-host model only (no cluster)")
    a = ap.parse_args()
    if a.model_only:
        model()
        return 0
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
        model()
    finally:
        for j in jobs:
            cluster.run(["scancel", j], check=False)
        cluster.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
