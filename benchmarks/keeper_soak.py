"""False failures and false successes of `jobenv launch`'s verdict, soaked.

    python benchmarks/keeper_soak.py [--runs 50] [--launcher mpich|torchrun]

A local job of 2 ranks.  Cases, each run --runs times through `jobenv launch`:
- ddp: the 2-rank gloo DDP script whose model outlives destroy_process_group (torch 2.13 aborted
  it at teardown, SIGABRT, a few runs in ten without the hook): must exit 0 every time;
- prep-segv: `python3 -c pass && exec sh -c 'kill -SEGV $$'` on rank 1 (a clean Python step, then
  a solver that dies): must exit 139 every time, never be excused;
- prep-kill: the same with SIGKILL: must exit 137.
Prints, per case, how many runs gave the verdict it must give.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from launch_bench import PY, env_for, sh_tools  # noqa: E402
from launchkit import TRAIN  # noqa: E402

DDP = TRAIN[:TRAIN.index("dist.destroy_process_group()")] + "dist.destroy_process_group()\n"
CASES = {
    "ddp": ("python3 {d}/ddp.py", 0),
    "prep-segv": ("sh -c 'python3 -c pass && if [ $RANK = 1 ]; then exec sh -c \"kill -SEGV \\$\\$\"; fi'", 139),
    "prep-kill": ("sh -c 'python3 -c pass && if [ $RANK = 1 ]; then exec sh -c \"kill -KILL \\$\\$\"; fi'", 137),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--launcher", choices=["mpich", "torchrun"], default="mpich")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="jobenv-keeper-soak-"))
    (d / "ddp.py").write_text(DDP)
    tools = sh_tools(d / "bin", args.launcher == "mpich")
    path = f"{tools}:{tools / 'sys'}" if args.launcher == "torchrun" else f"{tools}:/usr/bin:/bin"
    env = env_for(d, path)
    subprocess.run([PY, "-m", "jobenv", "save", "--quiet", "--ranks-per-host", "2"], env=env, check=True)
    for name, (cmd, want) in CASES.items():
        got: Counter = Counter()
        for _ in range(args.runs):
            p = subprocess.run(["bash", "-c", f"jobenv launch -- {cmd.format(d=d)}"], env=env, cwd=d,
                               capture_output=True, text=True, timeout=300)
            got[p.returncode] += 1
        print(f"{args.launcher} {name}: {got[want]} of {args.runs} exited {want} (all: {dict(got)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
