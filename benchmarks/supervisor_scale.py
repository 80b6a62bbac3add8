"""What the supervisor's ledger polling costs at 10 to 10,000 simulated hosts (no cluster).

    python benchmarks/supervisor_scale.py [--hosts 10,100,1000,10000] [--ranks 8] [--polls 20]
    flock /tmp/jobenv-cluster.lock python benchmarks/supervisor_scale.py --cluster   (also: a real launch)

A run directory is filled as a launch of N hosts x R ranks leaves it while the ranks run:
per host `host-<H>.ledger` (R `start` and R `hook` lines, as jobenv.rank.keeper and the rank
hook write them), `host-<H>.beat` and `agent-<H>`.  jobenv.rank.ledger.Ledgers reads it once
(the launch's start), then polls it as the supervisor does every second, both ways side by side:
- before: `Ledgers.poll` (what the supervisor did each second until 2026-11-27: list the
  directory, stat every ledger and beat);
- after: `Ledgers.step` (jobenv.launch.watch.live now: list news/, stat STEP_HOSTS beats in turn; the
  mean over a whole rotation, so its one directory listing per rotation is counted);
in three states:
- quiet: nothing written between polls;
- beating: every host agent beat since (before: create + rename; after: utime, as
  jobenv/rank/agent.py now does);
- news: one host's ledger grew by a line and its agent left news/<H> (after only).
Per poll: wall time, and system calls counted by `strace -c` (on Linux, where strace is
installed) over one rotation of polls (at least --polls).  The shared file system's load per second is then these calls
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
from typing import Callable

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


def beat_all(run_dir: Path, hosts: int, touch: bool) -> None:
    """Every agent's beat: a rename of a new file (before), an utime (after)."""
    for h in range(hosts):
        beat = run_dir / f"host-nid{h:06d}.beat"
        if touch:
            os.utime(beat)
            continue
        tmp = Path(f"{beat}.1")
        tmp.write_text(f"{time.time():.6f}\n")
        os.rename(tmp, beat)


def news(run_dir: Path, h: int) -> None:
    """Host h's keeper appends a line, its agent leaves news."""
    with open(run_dir / f"host-nid{h:06d}.ledger", "a") as f:
        f.write(f"clean {h * 8} {time.time():.6f}\n")
    (run_dir / "news").mkdir(exist_ok=True)
    (run_dir / "news" / f"nid{h:06d}").touch()


CHILD = """
import sys, time
sys.path.insert(0, {repo!r})
from jobenv.rank.ledger import Ledgers
led = Ledgers({run_dir!r})
led.poll()
for _ in range({setup}):
    led.{how}()
for _ in range({polls}):
    led.{how}()
"""


def rotation(hosts: int, polls: int) -> int:
    """Polls measured for `step`: whole rotations, at least `polls`."""
    from jobenv.rank.ledger import STEP_HOSTS

    turn = -(-hosts // STEP_HOSTS)
    return turn * -(-polls // turn)


def syscalls(run_dir: Path, how: str, polls: int, setup: int) -> dict:
    """System calls per quiet poll of `Ledgers.<how>`, from `strace -c` over `polls` polls less
    the setup's (`setup` polls first: `step`'s first rotation reads what `poll` did not)."""
    counts = {}
    for n in (0, polls):
        out = run_dir.parent / f"strace-{n}.txt"
        code = CHILD.format(repo=str(REPO), run_dir=str(run_dir), how=how, setup=setup, polls=n)
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


def timed(f: Callable[[], object], n: int) -> float:
    """Mean seconds of `n` calls of f."""
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n


def measure(n: int, ranks: int, polls: int) -> str:
    from jobenv.rank.ledger import STEP_HOSTS, Ledgers
    from jobenv.launch.watch.live import LOST_S, POLL_S

    tmp = Path(tempfile.mkdtemp(prefix="supscale-"))
    run_dir = tmp / "run"
    run_dir.mkdir()
    try:
        nbytes = fill(run_dir, n, ranks)
        before, after = Ledgers(str(run_dir)), Ledgers(str(run_dir))
        t = time.perf_counter()
        state = before.poll()
        first = time.perf_counter() - t
        assert len(state.ranks) == n * ranks and len(state.hosts) == n
        steps = rotation(n, polls)
        after.poll()
        for _ in range(steps):  # the first rotation: every host seen once
            after.step()
        quiet = (timed(before.poll, polls), timed(after.step, steps))
        beating = []
        for touch, led in ((False, before), (True, after)):
            took = []
            for _ in range(min(polls, 5)):
                beat_all(run_dir, n, touch)
                took.append(timed(led.poll if not touch else led.step, 1))
            beating.append(statistics.median(took))
        newsy = []
        for i in range(min(polls, 5)):
            news(run_dir, i % n)
            newsy.append(timed(after.step, 1))
        assert after.state.ranks[0].clean
        calls = [syscalls(run_dir, "poll", polls, 0), syscalls(run_dir, "step", steps, steps)] \
            if shutil.which("strace") else [{}, {}]
        total = [sum(c.values()) for c in calls]
        shown = ["+".join(f"{k} {v:g}" for k, v in sorted(c.items(), key=lambda kv: -kv[1])[:4]) for c in calls]
        lost = LOST_S + -(-n // STEP_HOSTS) * POLL_S
        return (f"{n:<6} {3 * n:<6} {nbytes / 1e3:<6.0f} {first * 1e3:8.1f} ms | quiet {quiet[0] * 1e3:7.2f} ms "
                f"{quiet[1] * 1e3:6.2f} ms x{quiet[0] / quiet[1]:<5.1f} | beating {beating[0] * 1e3:7.2f} ms "
                f"{beating[1] * 1e3:6.2f} ms | news {statistics.median(newsy) * 1e3:5.2f} ms | calls "
                f"{total[0]:7.1f} {total[1]:5.1f} | lost within {lost:.0f} s\n"
                f"       calls per quiet poll: before {shown[0]}; after {shown[1]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
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
    print("# per poll, before (Ledgers.poll: every host) and after (Ledgers.step: news/ + a batch of beats), "
          "ratio before/after;\n# calls: system calls per quiet poll (strace -c); lost within: the slowest naming "
          "of a lost host (after)")
    print("hosts  files  KB     first poll  | quiet  before   after   ratio | beating before  after  | news (after)"
          " | calls before after | ")
    for n in (int(x) for x in a.hosts.split(",")):
        print(measure(n, a.ranks, a.polls), flush=True)


if __name__ == "__main__":
    main()
