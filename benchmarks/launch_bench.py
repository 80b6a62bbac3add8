"""What `launch` costs, measured side by side on this host (figures only, no asserts).

    python benchmarks/launch_bench.py [--runs 15] [--ddp-runs 5] [--nproc 2]

1. Start-up overhead of `jobenv launch` before the launcher runs: `launch true` through the
   `launch` program with a launcher that is a script printing the time it started, against
   `env true` run directly.  The difference is what jobenv adds per launch.
2. A plain DDP script (init_process_group("gloo"), no jobenv import): time from starting
   the command to the end of the first all-reduce (the slowest rank), under `launch` with
   the local torchrun profile, and with MPICH's mpiexec, divided by the same script under
   bare `torchrun --standalone` (goal: <= 1.10x).
"""
from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BIN = Path(PY).parent

DDP = r'''
import os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print(f"FIRST-ALLREDUCE {time.time():.6f}", flush=True)
dist.destroy_process_group()
'''


def sh_tools(d: Path, mpi: bool) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    tools = {"python3": f'exec {PY} "$@"', "jobenv": f'exec {PY} -m jobenv "$@"',
             "torchrun": f'exec {PY} {BIN / "torchrun"} "$@"'}
    if mpi:
        tools["mpiexec"] = f'exec {BIN / "mpiexec"} "$@"'
    for name, body in tools.items():
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)
    sysdir = d / "sys"
    sysdir.mkdir(exist_ok=True)
    for tool in ("sh", "env", "true", "hostname", "uname", "cat", "date"):
        for base in ("/usr/bin", "/bin"):
            if Path(base, tool).exists() and not (sysdir / tool).exists():
                (sysdir / tool).symlink_to(Path(base, tool))
    return d


def env_for(home: Path, path: str) -> dict:
    return {"HOME": str(home), "PATH": path, "JOBENV_HOME": str(home / ".jobenv"), "PYTHONPATH": str(REPO),
            "XDG_CONFIG_HOME": str(home / ".config"), "LANG": "C.UTF-8", "GLOO_SOCKET_IFNAME": "lo",
            "OMP_NUM_THREADS": "1"}


def save(env: dict, *args: str) -> None:
    subprocess.run([PY, "-m", "jobenv", "save", "--quiet", *args], env=env, check=True, timeout=120)


def wall(argv, env, runs: int, cwd=None) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def until_stamp(argv, env, runs: int) -> float:
    """Median time from starting argv to the stamp its launcher prints when it starts."""
    times = []
    for _ in range(runs):
        t = time.time()
        out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout
        times.append(float(out.split()[0]) - t)
    return statistics.median(times)


def _first_allreduce_once(argv, env, cwd) -> float:
    t = time.time()
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise SystemExit(f"failed: {argv}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return max(float(x) for x in re.findall(r"FIRST-ALLREDUCE (\d+\.\d+)", p.stdout)) - t


def side_by_side(a, env_a, b, env_b, runs: int, cwd):
    """Medians of A and B and the median of per-pair ratios B/A, runs interleaved A B A B ...
    so that a busy machine's drift hits both alike."""
    ta, tb = [], []
    for _ in range(runs):
        ta.append(_first_allreduce_once(a, env_a, cwd))
        tb.append(_first_allreduce_once(b, env_b, cwd))
    return statistics.median(ta), statistics.median(tb), statistics.median(y / x for x, y in zip(ta, tb))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--ddp-runs", type=int, default=5)
    ap.add_argument("--nproc", type=int, default=2)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="jobenv-launch-bench-"))

    # 1. start-up overhead: the "launcher" is a script that stamps the time it started, named
    # mpiexec so that launch knows its family (an unknown launcher is an error)
    home = root / "h1"
    (home / ".config/jobenv/profiles").mkdir(parents=True)
    (root / "stamp").mkdir()
    stamp = root / "stamp" / "mpiexec"
    stamp.write_text('#!/bin/sh\nexec date +%s.%N\n')
    stamp.chmod(0o755)
    (home / ".config/jobenv/profiles/stamp.yaml").write_text(
        f"name: stamp\nscheduler: local\nlaunchers:\n  - argv: [{stamp}]\n")
    d = sh_tools(root / "t1", mpi=False)
    env = env_for(home, f"{d}:{d / 'sys'}")
    save(env, "--profile", "stamp", "--ranks-per-host", "1")
    launch = str(home / ".jobenv/bin/launch")
    bare = until_stamp([str(stamp)], env, args.runs)
    via = until_stamp([launch, "true"], env, args.runs)
    print(f"launch start-up: `launch true` reaches its launcher in {via * 1000:.0f} ms, the launcher run "
          f"directly in {bare * 1000:.0f} ms: jobenv adds {(via - bare) * 1000:.0f} ms per launch "
          f"(python -c pass: {wall([PY, '-c', 'pass'], env, args.runs) * 1000:.0f} ms); median of {args.runs}")

    # 2. time to first all-reduce: launch (torchrun profile, then mpiexec) vs bare torchrun
    (root / "train.py").write_text(DDP)
    n = str(args.nproc)
    d2 = sh_tools(root / "t2", mpi=False)
    h2 = root / "h2"
    h2.mkdir()
    env2 = env_for(h2, f"{d2}:{d2 / 'sys'}")
    save(env2, "--ranks-per-host", n)  # no MPI on PATH: the local profile's torchrun
    torchrun = [PY, str(BIN / "torchrun"), "--standalone", "--nnodes", "1", "--nproc-per-node", n, "train.py"]
    base, under, ratio = side_by_side(torchrun, env2, [str(h2 / ".jobenv/bin/launch"), "python3", "train.py"], env2,
                                      args.ddp_runs, root)
    print(f"time to first all-reduce, {n} ranks: bare torchrun {base:.2f} s, launch (torchrun) {under:.2f} s: "
          f"{ratio:.2f}x (median of {args.ddp_runs} interleaved pairs; goal <= 1.10x)")
    if (BIN / "mpiexec").exists():
        d3 = sh_tools(root / "t3", mpi=True)
        h3 = root / "h3"
        h3.mkdir()
        env3 = env_for(h3, f"{d3}:{d3 / 'sys'}")
        save(env3, "--ranks-per-host", n)
        base, mpi, ratio = side_by_side(torchrun, env2, [str(h3 / ".jobenv/bin/launch"), "python3", "train.py"], env3,
                                        args.ddp_runs, root)
        print(f"time to first all-reduce, {n} ranks: bare torchrun {base:.2f} s, launch (MPICH mpiexec + per-rank "
              f"wrapper) {mpi:.2f} s: {ratio:.2f}x")

if __name__ == "__main__":
    main()
