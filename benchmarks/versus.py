"""The hot paths of this checkout side by side with another revision's, in one run.

    python benchmarks/versus.py REV [--runs 31]

REV's `jobenv/` is exported with `git archive`; each tree runs with its own PYTHONPATH and its
own JOBENV_HOME.  For each: `jobenv get` of a saved local job (every new shell), `import
jobenv.runtime` + `detect()` under Hydra's variables (every rank), and the rank keeper's start
(the supervised wrapper running /bin/true: the keeper in `python -I -S`, once per rank; the
host agent's lock is planted so that no agent starts and each run costs the same).  Runs
alternate A B A B ... (benchmarks/bench.py's side_by_side), so a machine that slows down
mid-run slows both alike; the ratio is this checkout's median over REV's.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import PY, REPO, side_by_side  # noqa: E402

HYDRA = {"PMI_RANK": "3", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2", "JOBENV_JOBID": "1.x",
         "JOBENV_LAUNCH_TIME": "1700000000.123456", "JOBENV_HOSTNAME": "n1", "PATH": "/usr/bin:/bin"}
DETECT = "import jobenv.runtime as r; r.detect()"


def tree(rev: str, root: Path) -> Path:
    """REV's jobenv/ (with bin/ and shell/, which its files name) under root."""
    root.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "jobenv", "bin", "shell"], capture_output=True,
                             check=True)
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root


def commands(src: Path, work: Path) -> dict:
    """name -> (argv, env) of each hot path, run from the tree `src`."""
    home = work / "home"
    home.mkdir(parents=True)
    env = {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "PYTHONPATH": str(src)}
    subprocess.run([PY, str(src / "bin" / "jobenv"), "save", "--quiet"], env=env, check=True, capture_output=True)
    run_dir = work / "run"
    run_dir.mkdir()
    for name in (HYDRA["JOBENV_HOSTNAME"], os.uname().nodename):  # a live agent's lock: none is started
        (run_dir / f"agent-{name}").write_text("1 1\n")
    rank = {**HYDRA, "PYTHONPATH": str(src)}
    keeper = {**HYDRA, "JOBENV_RUN_DIR": str(run_dir), "JOBENV_PYTHON": PY, "TMPDIR": str(run_dir)}
    return {"jobenv get": ([PY, str(src / "bin" / "jobenv"), "get"], env),
            "import jobenv.runtime + detect()": ([PY, "-c", DETECT], rank),
            "rank keeper's start (supervised wrapper + true)": (["dash", str(src / "jobenv" / "rankwrap.sh"),
                                                                 "/bin/true"], keeper)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev")
    ap.add_argument("--runs", type=int, default=31)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # `python -c` and `-m` put the working directory first on sys.path: not this checkout
        old = tree(args.rev, Path(tmp) / "old")
        ours, theirs = commands(REPO, Path(tmp) / "ours"), commands(old, Path(tmp) / "theirs")
        print(f"# benchmarks/versus.py {args.rev} --runs {args.runs}: this checkout against {args.rev}, "
              f"alternating runs, medians; load average {os.getloadavg()[0]:.2f}")
        for name in ours:
            (a, _), (b, _) = side_by_side([ours[name], theirs[name]], args.runs)
            print(f"{name}: {a * 1000:.1f} ms against {b * 1000:.1f} ms ({a / b:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
