"""What the supervisor's ledger polling costs at 10 to 10,000 simulated hosts (no cluster).

    python benchmarks/supervisor_scale.py [--hosts 10,100,1000,10000] [--ranks 8] [--polls 20]
    flock /tmp/jobenv-cluster.lock python benchmarks/supervisor_scale.py --cluster   (also: a real launch)

A run directory is filled as a launch of N hosts x R ranks leaves it while the ranks run:
per host `host-<H>.ledger` (R `start` and R `hook` lines, as jobenv.rank.keeper and the rank
hook write them), `host-<H>.beat` and `agent-<H>`.  jobenv.launch.ledger.Ledgers reads it once
(the launch's start), then polls it as the supervisor does every second (jobenv.launch.live):
- quiet: nothing written between polls;
- beating: every host agent rewrote its beat (create + rename, as jobenv/rank/agent.py) since.
Per poll: wall time (median), and system calls counted by `strace -c` (on Linux, where strace is
installed) over --polls polls.  The shared file system's load per second is then these calls
(readdir pages, stats, opens) on the supervisor's side plus each agent's beat (open, write, close,
rename) per second on the hosts' side; printed as a model for 1,000 and 10,000 hosts.
With --cluster, a real `jobenv launch` of 4 hosts x 2 ranks on the Slurm test cluster (ranks that
sleep 8 s) gives the files and bytes each host leaves in the run directory, and the system calls
per second that `jobenv launch` (strace -f; its launcher srun included, which never touches
the run directory) makes on the run directory.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def fill(run_dir: Path, hosts: int, ranks: int) -> int:
    """A run directory as N hosts x R running ranks leave it; its bytes."""
    now = time.time()
    total = 0
    for h in range(hosts):
        name = f"nid{h:06d}"
        lines = []
        for r in range(h * ranks, (h + 1) * ranks):
            lines.append(f"start {r} {100000 + r} 123456 {200000 + r} 123460 {now:.6f}\n")
            lines.append(f"hook {r} {200000 + r} 123460 {now:.6f}\n")
        data = "".join(lines).encode()
        (run_dir / f"host-{name}.ledger").write_bytes(data)
        (run_dir / f"host-{name}.beat").write_text(f"{now:.6f}\n")
        (run_dir / f"agent-{name}").write_text("4242 123456\n")
        total += len(data) + 18 + 12
    return total


def beat_all(run_dir: Path, hosts: int) -> None:
    for h in range(hosts):
        beat = run_dir / f"host-nid{h:06d}.beat"
        tmp = Path(f"{beat}.1")
        tmp.write_text(f"{time.time():.6f}\n")
        os.rename(tmp, beat)


CHILD = """
import sys, time
sys.path.insert(0, {repo!r})
from jobenv.launch.ledger import Ledgers
led = Ledgers({run_dir!r})
led.poll()
ready = open({ready!r}, 'w'); ready.close()
for _ in range({polls}):
    led.poll()
"""


def syscalls(run_dir: Path, polls: int) -> dict:
    """System calls per quiet poll, from `strace -c` over `polls` polls less the setup's."""
    counts = {}
    for n in (0, polls):
        out = run_dir.parent / f"strace-{n}.txt"
        code = CHILD.format(repo=str(REPO), run_dir=str(run_dir), ready=str(run_dir.parent / "ready"), polls=n)
        subprocess.run(["strace", "-c", "-o", str(out), sys.executable, "-c", code], check=True, capture_output=True)
        calls = {}
        for line in out.read_text().splitlines():
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
            if m and m.group(2) != "total":
                calls[m.group(2)] = int(m.group(1))
        counts[n] = calls
    return {k: (counts[polls].get(k, 0) - counts[0].get(k, 0)) / polls
            for k in counts[polls] if counts[polls].get(k, 0) - counts[0].get(k, 0) > 0}


def cluster_launch() -> None:
    """Files and bytes per host in a real run directory; the supervisor's calls per second."""
    from cluster.slurm import SlurmCluster, available
    from launchkit import RESTORE
    from test_e2e_slurm import batch_job, fresh

    why = available()
    if why:
        raise SystemExit(why)
    tmp = Path(tempfile.mkdtemp(prefix="supscale-cluster-"))
    os.chmod(tmp, 0o755)
    c = SlurmCluster(tmp / "slurm").start()
    jobs: list = []
    store = str(tmp / "home")
    try:
        batch_job(c, jobs, store, tmp, "-N", "4", "--ntasks-per-node", "2")
        trace = tmp / "strace.txt"
        secs = 8
        t = time.perf_counter()
        p = fresh(c, "node1", "bash", f"{RESTORE} && strace -f -qq -y -o {trace} jobenv launch -- python3 -c "
                  f"'import time; time.sleep({secs})'", store)
        wall = time.perf_counter() - t
        if p.returncode:
            raise SystemExit(p.stdout + p.stderr)
        run = max((d for d in Path(store).glob("runs/*/*") if d.is_dir()), key=lambda d: d.stat().st_mtime)
        files = [f for f in run.iterdir() if f.is_file()]
        per = {}
        for f in files:
            kind = re.sub(r"node\d+", "<H>", f.name)
            n, b = per.get(kind, (0, 0))
            per[kind] = (n + 1, b + f.stat().st_size)
        print(f"# real launch: 4 hosts x 2 ranks, ranks sleep {secs} s, {wall:.1f} s wall; run dir {run.name}")
        for kind, (n, b) in sorted(per.items()):
            print(f"  {kind:24} {n} file(s), {b} bytes")
        calls: dict = {}
        for line in trace.read_text(errors="replace").splitlines():
            m = re.match(r"(?:\d+\s+)?(\w+)\(", line)
            if m and str(run) in line:  # a path under the run directory, or a descriptor (-y) naming one
                calls[m.group(1)] = calls.get(m.group(1), 0) + 1
        print(f"  supervisor's calls on the run directory over the launch ({wall:.1f} s, all threads): "
              + ", ".join(f"{k} {v} ({v / wall:.1f}/s)" for k, v in sorted(calls.items())))
    finally:
        for j in jobs:
            c.run(["scancel", j], check=False)
        c.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    from jobenv.launch.ledger import Ledgers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="10,100,1000,10000")
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--polls", type=int, default=20)
    ap.add_argument("--cluster", action="store_true", help="a real launch on the Slurm test cluster instead")
    a = ap.parse_args()
    if a.cluster:
        sys.path.insert(0, str(REPO / "tests"))
        return cluster_launch()
    print(f"# python benchmarks/supervisor_scale.py --hosts {a.hosts} --ranks {a.ranks} --polls {a.polls}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.uname().nodename}, run dir on "
          f"{tempfile.gettempdir()} (local disk)")
    print("hosts  files  KB     first poll  quiet poll  beating poll  syscalls per quiet poll")
    for n in (int(x) for x in a.hosts.split(",")):
        tmp = Path(tempfile.mkdtemp(prefix="supscale-"))
        run_dir = tmp / "run"
        run_dir.mkdir()
        try:
            nbytes = fill(run_dir, n, a.ranks)
            led = Ledgers(str(run_dir))
            t = time.perf_counter()
            state = led.poll()
            first = time.perf_counter() - t
            assert len(state.ranks) == n * a.ranks and len(state.hosts) == n
            quiet = []
            for _ in range(a.polls):
                t = time.perf_counter()
                led.poll()
                quiet.append(time.perf_counter() - t)
            beating = []
            for _ in range(min(a.polls, 5)):
                beat_all(run_dir, n)
                t = time.perf_counter()
                led.poll()
                beating.append(time.perf_counter() - t)
            calls = syscalls(run_dir, a.polls) if shutil.which("strace") else {}
            shown = ", ".join(f"{k} {v:g}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])[:5])
            print(f"{n:<6} {3 * n:<6} {nbytes / 1e3:<6.0f} {first * 1e3:8.1f} ms {statistics.median(quiet) * 1e3:8.2f} ms "
                  f"{statistics.median(beating) * 1e3:9.2f} ms  {shown}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
