"""False failures and false successes of `jobenv launch`'s verdict, soaked.

    python benchmarks/keeper_soak.py [--runs 50] [--launcher mpich|openmpi|torchrun|srun] [--until HH:MM]
    flock /tmp/jobenv-cluster.lock python benchmarks/keeper_soak.py --launcher srun   # the Slurm test cluster

A job of 2 ranks: local under the MPICH wheel's mpiexec, Debian's Open MPI mpiexec or torchrun;
srun's tasks across two nodes of the test cluster (tests/cluster/slurm.py).  Cases, run in rounds
(one run of each case per round, so that a busy machine's drift hits all alike) through `jobenv launch`:
- ddp: the 2-rank gloo DDP script whose model outlives destroy_process_group (torch 2.13 aborted
  it at teardown, SIGABRT, a few runs in ten without the hook): must exit 0 every time;
- prep-segv: `python3 -c pass && exec sh -c 'kill -SEGV $$'` on rank 1 (a clean Python step, then
  a solver that dies): must exit 139 every time, never be excused;
- prep-kill: the same with SIGKILL: must exit 137.
Prints, per case, how many runs gave the verdict it must give, the distribution of exit codes and
the wall time per run; a wrong verdict's output is kept beside its run directory (wrong-*.txt).
--until stops starting rounds at that UTC time (the count printed is what ran).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Set, Tuple, Union

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "tests")]
from launch_bench import PY, env_for, sh_tools  # noqa: E402
from launchkit import TRAIN  # noqa: E402
from test_launch_e2e import OMPI_ENV  # noqa: E402

DDP = TRAIN[:TRAIN.index("dist.destroy_process_group()")] + "dist.destroy_process_group()\n"
CASES = {
    "ddp": ("python3 {d}/ddp.py", 0),
    "prep-segv": ("sh -c 'python3 -c pass && if [ $RANK = 1 ]; then exec sh -c \"kill -SEGV \\$\\$\"; fi'", 139),
    "prep-kill": ("sh -c 'python3 -c pass && if [ $RANK = 1 ]; then exec sh -c \"kill -KILL \\$\\$\"; fi'", 137),
}
Run = Callable[[str], "subprocess.CompletedProcess[str]"]


def local(d: Path, launcher: str) -> Tuple[Run, Path]:
    """A local job of 2 ranks saved with `launcher` first on PATH: how to run a script, its JOBENV_HOME."""
    tools = sh_tools(d / "bin", launcher == "mpich")
    path = f"{tools}:{tools / 'sys'}" if launcher == "torchrun" else f"{tools}:/usr/bin:/bin"
    env = {**env_for(d, path), **(OMPI_ENV if launcher == "openmpi" else {})}
    subprocess.run([PY, "-m", "jobenv", "save", "--quiet", "--ranks-per-host", "2"], env=env, check=True)

    def run(script: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run(["/bin/bash", "-c", script], env=env, cwd=d, capture_output=True, text=True, timeout=300)
    return run, d / ".jobenv"


@contextlib.contextmanager
def on_slurm(d: Path) -> Iterator[Tuple[Run, Path]]:
    """A batch job of 1 task on each of 2 nodes of the test cluster; scripts run in a fresh shell on node1."""
    from cluster.slurm import SlurmCluster, available
    from test_e2e_slurm import batch_job, fresh
    why = available()
    if why:
        raise SystemExit(why)
    cluster = SlurmCluster(d / "slurm").start()
    jobs: List[str] = []
    store = d / "jobenv-home"
    try:
        batch_job(cluster, jobs, str(store), d, "-N", "2", "--ntasks-per-node", "1", hold=7200)
        yield (lambda script: fresh(cluster, "node1", "bash", f"cd {d} && {script}", str(store))), store
    finally:
        for j in jobs:
            cluster.run(["scancel", j], check=False)
        cluster.stop()


def runs_in(home: Path) -> Set[Path]:
    return set((home / "runs").glob("*/*"))


def header(launcher: str) -> str:
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = " (+ uncommitted changes)" if subprocess.run(["git", "-C", str(REPO), "diff", "--quiet", "HEAD"]).returncode \
        else ""
    return (f"# {launcher}: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, host {os.uname().nodename}, "
            f"{os.cpu_count()} cores, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}, commit {commit}{dirty}")


def soak(run: Run, home: Path, d: Path, launcher: str, runs: int, until: Optional[float]) -> None:
    got: Dict[str, Counter[object]] = {name: Counter() for name in CASES}
    walls: Dict[str, List[float]] = {name: [] for name in CASES}
    wrong: Dict[str, List[str]] = {name: [] for name in CASES}
    for i in range(runs):
        if until is not None and time.time() >= until:
            break
        for name, (cmd, want) in CASES.items():
            before = runs_in(home)
            t = time.perf_counter()
            rc: Union[int, str]
            try:
                p = run(f"jobenv launch -- {cmd.format(d=d)}")
                rc, out, err = p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired as e:  # a hang is a wrong verdict too
                rc, out, err = "timeout", str(e.stdout), str(e.stderr)
            walls[name].append(time.perf_counter() - t)
            got[name][rc] += 1
            if rc != want:
                new = sorted(runs_in(home) - before)
                keep = d / f"wrong-{name}-{i}.txt"
                keep.write_text(f"run dirs: {new}\nrc {rc}\n--- stdout\n{out}\n--- stderr\n{err}\n")
                wrong[name].append(str(keep))
    for name, (_, want) in CASES.items():
        n, w = sum(got[name].values()), walls[name]
        print(f"{launcher} {name}: {got[name][want]} of {n} exited {want} (all: {dict(sorted(got[name].items(), key=str))}); "
              f"wall per run {statistics.median(w):.2f} s median, {min(w):.2f} min, {max(w):.2f} max", flush=True)
        for path in wrong[name]:
            print(f"  wrong verdict kept: {path}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--launcher", choices=["mpich", "openmpi", "torchrun", "srun"], default="mpich")
    ap.add_argument("--until", help="UTC HH:MM after which no round starts")
    args = ap.parse_args()
    until = None
    if args.until:
        hh, mm = map(int, args.until.split(":"))
        now = time.time()
        until = now - now % 86400 + hh * 3600 + mm * 60
        until += 86400 if until < now - 12 * 3600 else 0
    d = Path(tempfile.mkdtemp(prefix="jobenv-keeper-soak-"))
    d.chmod(0o755)
    (d / "ddp.py").write_text(DDP)
    print(header(args.launcher), f"--runs {args.runs}", f"--until {args.until}" if args.until else "",
          f"in {d}", flush=True)
    if args.launcher == "srun":
        with on_slurm(d) as (run, home):
            soak(run, home, d, args.launcher, args.runs, until)
    else:
        run, home = local(d, args.launcher)
        soak(run, home, d, args.launcher, args.runs, until)
    return 0


if __name__ == "__main__":
    sys.exit(main())
