"""What the per-rank wrapper (jobenv/rankwrap.sh) costs each rank, side by side.

    python benchmarks/rankwrap.py [--runs 101] [--ranks 8] [--quick]

Prints `name: value (ratio)` lines:
- one process: `/bin/true` alone, under the wrapper (dash, bash), under the supervised
  wrapper (JOBENV_RUN_DIR + JOBENV_LOG_DIR: the rank keeper, jobenv/rank/keeper.py, in
  `python -I -S`), `python -I -S -c pass` and `python -c pass` for scale, and the supervised
  path's cost as a share of a rank that runs `python3 -c 'import torch'` (the budget: 1%);
- N ranks of `true` under the MPICH wheel's mpiexec with and without the wrapper;
- the worst node-rank path: a launcher without a node variable in a 10,000-host job
  (one awk over the host file finds this host, listed last; sh's own loop below 65 hosts);
- path lookups per rank (strace, when installed), by where they land: node-local system
  directories, the interpreter's install, the jobenv package and run directory (shared).
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
from jobenv import rankwrap  # noqa: E402

PY = sys.executable
BIN = Path(PY).parent
WRAP = rankwrap.script_path()
HYDRA = {"PMI_RANK": "3", "PMI_SIZE": "8", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2", "JOBENV_JOBID": "1.x",
         "JOBENV_LAUNCH_TIME": "1700000000.123456", "JOBENV_HOSTNAME": "n1", "PATH": "/usr/bin:/bin"}
SYSTEM = ("/usr/", "/lib", "/bin/", "/sbin/", "/etc/", "/proc/", "/sys/", "/dev/")  # node-local on HPC nodes
PATH_SYSCALLS = ("open", "openat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
                 "readlink", "readlinkat", "execve", "getdents64")


def _fresh(env) -> None:
    """Empty the run and log directories: the supervised wrapper writes only new files."""
    for key in ("JOBENV_RUN_DIR", "JOBENV_LOG_DIR"):
        for f in [p for g in ("rank-*", "host-*", "agent-*") for p in Path(env[key]).glob(g)] if env.get(key) else ():
            f.unlink(missing_ok=True)  # a host agent may remove its lock meanwhile


def median_time(argv, env, runs) -> float:
    xs = []
    for _ in range(runs):
        _fresh(env)
        t = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        xs.append(time.perf_counter() - t)
    return statistics.median(xs)


def fs_ops(argv, env, places) -> dict:
    """Path lookups (system calls that name a non-empty path) of argv and its children, by where
    the path lies: `places` maps a name to directory prefixes; the rest is "system" (/usr, /lib,
    /etc, /proc: node-local) or "other".  Empty when strace is not installed."""
    strace = shutil.which("strace")
    if strace is None:
        return {}
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run([strace, "-f", "-e", "trace=%file,execve", "-o", out.name, *argv], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        counts = {name: 0 for name in [*places, "system", "other"]}
        for line in out.read().splitlines():
            m = re.search(r'^\d+ +(\w+)\((?:AT_FDCWD, |\d+, )?"([^"]+)"', line)
            if m is None or m.group(1) not in PATH_SYSCALLS:
                continue
            path = m.group(2)
            where = next((n for n, pre in places.items() if any(path.startswith(p) for p in pre)), None)
            if where is None:
                where = "system" if path.startswith(SYSTEM) else "other"
            counts[where] += 1
        return counts


def _baseline(rev, tmp, places) -> list:
    """The supervised path of the wrapper at git `rev`, its lookups counted as `places` counts ours."""
    if not rev:
        return []
    old = tmp / "baseline"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "jobenv"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    _fresh({"JOBENV_RUN_DIR": str(tmp)})
    for name in (HYDRA["JOBENV_HOSTNAME"], os.uname().nodename):  # its host agent runs too (keyed by either)
        (tmp / f"agent-{name}").write_text("1 1\n")
    where = {**places, "jobenv package + run dir": (*places["jobenv package + run dir"], str(old))}
    env = {**HYDRA, "JOBENV_RUN_DIR": str(tmp), "JOBENV_PYTHON": PY, "TMPDIR": str(tmp)}
    counts = fs_ops(["dash", str(old / "jobenv" / "rankwrap.sh"), "/bin/true"], env, where)
    return [(f"supervised wrapper + true at {rev}", counts)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=101)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="21 runs (smoke check, not for reporting)")
    ap.add_argument("--baseline", metavar="REV", help="also count the path lookups of the wrapper at git REV "
                    "(e.g. 11688b5, the sh job-table wrapper before the rank keeper)")
    args = ap.parse_args()
    runs = 21 if args.quick else args.runs
    tmp = Path(tempfile.mkdtemp(prefix="jobenv-rankwrap-bench-"))

    def line(name, seconds, base=None):
        r = f" ({seconds / base:.2f}x)" if base else ""
        print(f"{name}: {seconds * 1000:.2f} ms{r}", flush=True)

    # one process, interleaved in blocks so drift hits every variant alike
    variants = {
        "true": (["/bin/true"], HYDRA),
        "dash wrapper + true": (["dash", WRAP, "/bin/true"], HYDRA),
        "bash wrapper + true": (["bash", WRAP, "/bin/true"], HYDRA),
        "supervised dash wrapper + true (RUN_DIR, LOG_DIR)": (
            ["dash", WRAP, "/bin/true"], {**HYDRA, "JOBENV_RUN_DIR": str(tmp), "JOBENV_LOG_DIR": str(tmp),
                                          "JOBENV_PYTHON": PY}),
        "python -I -S -c pass": ([PY, "-I", "-S", "-c", "pass"], HYDRA),
        "python -c pass": ([PY, "-c", "pass"], HYDRA),
    }
    times = {k: [] for k in variants}
    for _ in range(5):
        for name, (argv, env) in variants.items():
            times[name].append(median_time(argv, env, max(3, runs // 5)))
    t = {k: statistics.median(v) for k, v in times.items()}
    line("one process: /bin/true", t["true"])
    for name in list(variants)[1:]:
        line(f"one process: {name}", t[name], t["true"])
    print(f"wrapper cost per rank (dash): {(t['dash wrapper + true'] - t['true']) * 1000:.2f} ms; "
          f"Python start for comparison: {(t['python -c pass'] - t['true']) * 1000:.2f} ms", flush=True)
    supervised = t["supervised dash wrapper + true (RUN_DIR, LOG_DIR)"] - t["true"]
    try:
        torch_t = median_time([PY, "-c", "import torch"], {**os.environ, **HYDRA}, 5)
        print(f"supervised path per rank: {supervised * 1000:.2f} ms = {supervised / torch_t * 100:.2f}% of a rank "
              f"running python3 -c 'import torch' ({torch_t * 1000:.0f} ms)", flush=True)
    except subprocess.CalledProcessError:
        print("import torch: skipped (torch not installed)")

    hosts = tmp / "hosts"
    hosts.write_text("".join(f"x{i:05d}.hsn.example\n" for i in range(10_000)))
    scan = {**HYDRA, "HOSTFILE": str(hosts), "NHOSTS": "10000", "JOBENV_HOSTNAME": "x09999", "PMI_SIZE": "40000", "MPI_LOCALNRANKS": "4",
            "PMI_RANK": "39999", "MPI_LOCALRANKID": "3"}
    scan_t = median_time(["dash", WRAP, "/bin/true"], scan, max(5, runs // 10))
    line("one process, 10,000-host job, no node variable (host listed last)", scan_t, t["true"])
    pals = {**scan, "PALS_RANKID": "39999", "PALS_NODEID": "9999", "PMI_LOCAL_SIZE": "4", "PALS_LOCAL_RANKID": "3"}
    line("same with PALS_NODEID (no scan)", median_time(["dash", WRAP, "/bin/true"], pals, max(5, runs // 10)),
         t["true"])

    mpiexec = BIN / "mpiexec"
    if mpiexec.exists():
        n = args.ranks
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "SLURM_", "PBS_", "JOBENV_"))}
        bare, wrapped = [], []
        for _ in range(max(5, runs // 10)):
            bare.append(median_time([str(mpiexec), "-n", str(n), "/bin/true"], env, 1))
            wrapped.append(median_time([str(mpiexec), "-n", str(n), *rankwrap.wrapper_argv(), "/bin/true"], env, 1))
        b, w = statistics.median(bare), statistics.median(wrapped)
        line(f"mpiexec -n {n} true", b)
        line(f"mpiexec -n {n} wrapper true", w, b)
        print(f"per rank under mpiexec: {(w - b) / n * 1000:.2f} ms", flush=True)
    else:
        print("mpiexec: skipped (no mpich wheel)")

    # where each lookup lands: on an HPC node the jobenv package and the run directory are on the shared
    # file system, the interpreter's install is on it unless staged (`jobenv stage`) or local
    places = {"jobenv package + run dir": (str(REPO / "jobenv"), str(tmp)),
              "interpreter install": tuple({os.path.realpath(sys.base_prefix), sys.prefix, os.path.dirname(PY)})}
    plain = fs_ops(["dash", WRAP, "/bin/true"], HYDRA, places)
    if plain:
        _fresh({"JOBENV_RUN_DIR": str(tmp)})
        # the host's agent already runs (7 ranks in 8): its lock is there, the keeper forks none
        (tmp / f"agent-{os.uname().nodename}").write_text("1 1\n")
        sup = fs_ops(["dash", WRAP, "/bin/true"], {**HYDRA, "JOBENV_RUN_DIR": str(tmp), "JOBENV_PYTHON": PY}, places)
        for name, counts in (("/bin/true", fs_ops(["/bin/true"], HYDRA, places)), ("plain wrapper + true", plain),
                             ("supervised wrapper + true (agent running)", sup),
                             ("python -I -S -c pass", fs_ops([PY, "-I", "-S", "-c", "pass"], HYDRA, places)),
                             *_baseline(args.baseline, tmp, places)):
            print(f"path lookups, {name}: {sum(counts.values())} = " +
                  ", ".join(f"{k} {v}" for k, v in counts.items()), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
