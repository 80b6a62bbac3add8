"""What `jobenv init` costs a login shell with no job, side by side with `python -c pass`.

    python benchmarks/init_bench.py [--runs 31]

Targets: `eval "$(jobenv init bash)"` adds at most 1.5x `python -c pass`; the
static form (`jobenv init bash > ~/.jobenv/init.bash`, then `. ~/.jobenv/init.bash`) adds
at most 5 ms.  Each figure is the median over --runs shells of the time around the
eval/source alone (EPOCHREALTIME inside the shell, so shell start-up is not counted), with
and without --auto (no store; and a store whose jobs are on other hosts), runs interleaved
so that drift hits all alike.  The `jobenv` measured is this checkout's, started like the
installed bin/jobenv.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def timed_python(env: dict) -> float:
    t = time.perf_counter()
    subprocess.run([PY, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - t


def in_shell(shell: str, body: str, env: dict) -> float:
    """Seconds `body` takes inside `shell` (its own start-up excluded)."""
    pre = "zmodload zsh/datetime; " if shell == "zsh" else ""
    script = f'{pre}s=$EPOCHREALTIME; {body}; e=$EPOCHREALTIME; echo "$s $e"'
    flags = ["-f", "-i"] if shell == "zsh" else ["--norc", "--noprofile", "-i"]
    p = subprocess.run([shell, *flags, "-c", script], env=env, capture_output=True, text=True, check=True,
                       stdin=subprocess.DEVNULL)
    s, e = (float(x.replace(",", ".")) for x in p.stdout.split()[-2:])
    return e - s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=31)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="jobenv-init-bench-"))
    exe = tmp / "bin" / "jobenv"
    exe.parent.mkdir()
    exe.write_text(f"#!{PY}\nimport sys\n\nfrom jobenv.__main__ import main\n\nsys.exit(main())\n")
    exe.chmod(0o755)
    home = tmp / "home"
    home.mkdir()
    other = tmp / "other"  # a store with two jobs on other hosts
    (other / "jobs").mkdir(parents=True, mode=0o700)
    for i in (1, 2):
        (other / "jobs" / f"slurm-{i}.hosts").write_text("nid000001\nnid000002\n")
        (other / "jobs" / f"slurm-{i}.json").write_text("{}")
    env = {"HOME": str(home), "PATH": f"{exe.parent}:/usr/bin:/bin", "PYTHONPATH": str(REPO), "LANG": "C.UTF-8",
           "TERM": "dumb", "JOBENV_HOSTNAME": "login1"}
    shells = [s for s in ("bash", "zsh") if shutil.which(s)]
    static = {}
    for sh in shells:
        for auto in ("", " --auto"):
            f = tmp / f"init.{sh}{auto.strip()}"
            f.write_text(subprocess.run([str(exe), "init", sh, *auto.split()], env=env, capture_output=True,
                                        text=True, check=True).stdout)
            static[(sh, auto)] = f
    cases = {"python -c pass": lambda: timed_python(env)}
    for sh in shells:
        for auto in ("", " --auto"):
            cases[f'{sh}: eval "$(jobenv init {sh}{auto})"'] = (
                lambda sh=sh, auto=auto: in_shell(sh, f'eval "$(jobenv init {sh}{auto})"', env))
            cases[f"{sh}: . init.{sh}{auto.replace(' ', '')} (static)"] = (
                lambda sh=sh, auto=auto: in_shell(sh, f". {static[(sh, auto)]}", env))
        cases[f"{sh}: . init.{sh}--auto (static), store of other hosts' jobs"] = (
            lambda sh=sh: in_shell(sh, f". {static[(sh, ' --auto')]}", {**env, "JOBENV_HOME": str(other)}))
    samples: dict = {k: [] for k in cases}
    for _ in range(args.runs):
        for k, fn in cases.items():
            samples[k].append(fn())
    med = {k: statistics.median(v) for k, v in samples.items()}
    base = med["python -c pass"]
    print(f"python: {PY} ({sys.version.split()[0]}), {args.runs} runs each, interleaved")
    ok = True
    for k, v in med.items():
        if k == "python -c pass":
            print(f"{k}: {v * 1000:.1f} ms")
        elif "eval" in k:
            good = v / base <= 1.5
            ok &= good
            print(f"{k}: {v * 1000:.1f} ms ({v / base:.2f}x python -c pass)  target <= 1.5x: {'ok' if good else 'MISSED'}")
        else:
            good = v <= 0.005
            ok &= good
            print(f"{k}: {v * 1000:.2f} ms  target <= 5 ms: {'ok' if good else 'MISSED'}")
    shutil.rmtree(tmp, ignore_errors=True)
    print("summary: all targets met" if ok else "summary: some targets MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
