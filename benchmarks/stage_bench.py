"""What `jobenv stage` buys: figures printed side by side, no pass/fail.

    python benchmarks/stage_bench.py [--env VENV] [--runs N]

- pack and unpack throughput of the environment (a local job: one host, this one);
- time of a no-op re-stage (unchanged environment);
- the selftest's `imports` phase for one rank, from the original and from the copy;
- file-system operations per rank (strace -f -e trace=%file, `python -c "import torch"`):
  all of them, and those on the original (shared) prefix, before and after staging.
  The counts do not depend on this machine's disks: on Lustre/GPFS/NFS each one under the
  shared prefix is a metadata request, times the number of ranks.
Default env: the test suite's cached torch venv (/tmp/jobenv-stage-cache/torchvenv).
"""
from __future__ import annotations

import argparse
import json
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


def run(argv, env, **kw):
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False, **kw)


def jobenv(args, env):
    t = time.perf_counter()
    p = run([sys.executable, "-m", "jobenv", *args], env)
    if p.returncode:
        raise SystemExit(f"jobenv {' '.join(args)} failed:\n{p.stdout}{p.stderr}")
    return time.perf_counter() - t, p.stdout


def imports_phase(python: str, env, runs: int, tmp: Path) -> float:
    vals = []
    for i in range(runs):
        rep = tmp / f"self-{i}.json"
        p = run([python, "-m", "jobenv.selftest", "--timeout", "120", "--json-file", str(rep)],
                {**env, "MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"})
        if p.returncode:
            raise SystemExit(f"selftest failed with {python}:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
        data = json.loads(rep.read_text())
        vals.append(data["phases"]["imports"]["median"] if "phases" in data else data["ranks"][0]["phases"]["imports"])
    return statistics.median(vals)


def file_ops(python: str, shared: str, env, tmp: Path):
    """(all file syscalls, those naming a path under `shared`) for `import torch`."""
    out = tmp / "strace.out"
    p = run(["strace", "-f", "-qq", "-e", "trace=%file", "-o", str(out), python, "-c", "import torch"], env)
    if p.returncode:
        raise SystemExit(f"strace failed: {p.stderr[-500:]}")
    total = under = 0
    pat = re.compile(r'"((?:[^"\\]|\\.)*)"')
    for line in out.read_text().splitlines():
        m = pat.search(line)
        if not m or "resumed>" in line:
            continue
        total += 1
        if m.group(1).startswith(shared.rstrip("/") + "/") or m.group(1) == shared:
            under += 1
    return total, under


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="/tmp/jobenv-stage-cache/torchvenv")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    venv = os.path.abspath(a.env)
    tmp = Path(tempfile.mkdtemp(prefix="stage-bench-"))
    try:
        env = {"HOME": str(tmp), "PATH": "/usr/bin:/bin", "JOBENV_HOME": str(tmp / ".jobenv"),
               "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "LANG": "C.UTF-8"}
        jobenv(["save", "--quiet", "--ranks-per-host", "1"], env)
        target = tmp / "local"
        secs, out = jobenv(["stage", "--env", venv, "--to", str(target)], env)
        packed = re.search(r"packed ([\d,.]+) MB .* in ([\d.]+) s", out)
        unpacked = re.search(r"staged (\S+): ([\d,.]+) MB in ([\d.]+) s", out)
        assert packed and unpacked, out
        copy = unpacked.group(1).rstrip(":")
        mb = float(packed.group(1).replace(",", ""))
        noop = statistics.median(jobenv(["stage", "--env", venv, "--to", str(target)], env)[0] for _ in range(a.runs))
        print(f"environment            {venv}: {mb:,.1f} MB")
        print(f"pack                   {float(packed.group(2)):.1f} s  ({mb / float(packed.group(2)):,.0f} MB/s)")
        print(f"unpack + verify        {float(unpacked.group(3)):.1f} s  ({mb / float(unpacked.group(3)):,.0f} MB/s), "
              f"first stage in all {secs:.1f} s")
        print(f"no-op re-stage         {noop:.2f} s")
        before = imports_phase(f"{venv}/bin/python3", env, a.runs, tmp)
        after = imports_phase(f"{copy}/bin/python3", env, a.runs, tmp)
        print(f"selftest imports phase {before:.3f} s from the original, {after:.3f} s from the copy "
              f"(same local disk here: the difference is noise; on a shared FS it is the metadata load)")
        if shutil.which("strace"):
            t0, s0 = file_ops(f"{venv}/bin/python3", venv, env, tmp)
            t1, s1 = file_ops(f"{copy}/bin/python3", venv, env, tmp)
            print(f"file ops, import torch {t0:,} in all, {s0:,} on the shared prefix (original)")
            print(f"                       {t1:,} in all, {s1:,} on the shared prefix (staged copy)")
        else:
            print("file ops: strace not installed (apt-get install strace)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
