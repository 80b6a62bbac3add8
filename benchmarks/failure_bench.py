"""How long a failure takes to end a launch: from a rank's death to `jobenv launch`'s exit.

    python benchmarks/failure_bench.py [--runs 5]

A local job of 2 ranks under the MPICH wheel's mpiexec; rank 1 writes the time and kills
itself (SIGKILL), or kills its wrapper (SIGKILL), while rank 0 sleeps.  Two launchers:
plain mpiexec (it ends the others itself) and `-disable-auto-cleanup` (it leaves them
running, as srun does without --kill-on-bad-exit: jobenv must end them).  Prints the median
seconds from the death to the launch's exit, and whether the failure was named live.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_bench import PY, env_for, sh_tools  # noqa: E402

CASES = {
    "rank SIGKILL, mpiexec ends the rest": ("", "kill -9 $$"),
    "rank SIGKILL, launcher leaves the rest (-disable-auto-cleanup)": ("-disable-auto-cleanup", "kill -9 $$"),
    "wrapper SIGKILL, launcher leaves the rest": ("-disable-auto-cleanup", "kill -9 $PPID"),
}


def one(env: dict, args: str, kill: str, died: Path) -> tuple:
    script = f"if [ $RANK = 1 ]; then sleep 2; date +%s.%N > {died}; {kill}; fi; exec sleep 120"
    argv = ["jobenv", "launch"] + (["--launcher-args", args] if args else []) + ["--", "sh", "-c", script]
    p = subprocess.run(["timeout", "-s", "KILL", "100", *argv], env=env, capture_output=True, text=True)
    end = time.time()
    named = "failed: " in p.stderr.split("failed first")[0]
    return end - float(died.read_text()), named


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jobenv-failure-bench-"))
    home = tmp / "home"
    home.mkdir()
    tools = sh_tools(tmp / "bin", mpi=True)
    env = env_for(home, f"{tools}:/usr/bin:/bin")
    subprocess.run([PY, "-m", "jobenv", "save", "--quiet", "--ranks-per-host", "2"], env=env, check=True)
    for name, (largs, kill) in CASES.items():
        got = [one(env, largs, kill, tmp / "died") for _ in range(args.runs)]
        secs = statistics.median(g[0] for g in got)
        print(f"{name}: death -> launch exit {secs:.2f} s (median of {args.runs}); "
              f"named live {sum(g[1] for g in got)}/{args.runs}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
