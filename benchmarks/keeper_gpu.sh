#!/bin/bash
# The supervised path on a real NVIDIA GPU: `jobenv launch` (torchrun, the only launcher there)
# runs the NCCL selftest through the rank keeper with --gpu-bind, a rank's exit code is the
# launch's, and the transparency probe compares a rank bare and under `jobenv launch`.
#   bash benchmarks/keeper_gpu.sh OUTDIR      (from a checkout, on a machine with torch + a GPU)
set -u
out=${1:?usage: keeper_gpu.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 JOBENV_HOME=$(mktemp -d) HOME=${HOME:-/root}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 XDG_CONFIG_HOME=$(mktemp -d)
mkdir -p "$XDG_CONFIG_HOME/jobenv/profiles"
printf '%s\n' 'name: gpuhere' 'scheduler: local' 'launchers:' "  - argv: [mpiexec, -n, '{nranks}', -x, PATH, -x, PYTHONPATH]" \
    'gpu_bind: {var: CUDA_VISIBLE_DEVICES, map: identity, devices: 1}' >"$XDG_CONFIG_HOME/jobenv/profiles/gpuhere.yaml"
bin=$(dirname "$(command -v python3)")
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  command -v torchrun mpiexec; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
echo "== save (local job, 1 rank per host)"
python3 -m jobenv save --ranks-per-host 1 --profile gpuhere 2>&1 | tail -3
echo "== launch --gpu-bind selftest (NCCL through the keeper)"
( time python3 -m jobenv launch --gpu-bind -- python3 -m jobenv.selftest --backend nccl ) >"$out/selftest.txt" 2>&1
echo "rc=$?" >>"$out/selftest.txt"; tail -n 30 "$out/selftest.txt"
echo "== a rank's exit code is the launch's"
python3 -m jobenv launch -- python3 -c 'import torch; torch.zeros(1, device="cuda"); raise SystemExit(3)' \
    >"$out/exit3.txt" 2>&1; echo "rc=$?" >>"$out/exit3.txt"; cat "$out/exit3.txt"
python3 -m jobenv launch -- python3 -c 'import os, torch; torch.zeros(1, device="cuda"); os.kill(os.getpid(), 9)' \
    >"$out/kill9.txt" 2>&1; echo "rc=$?" >>"$out/kill9.txt"; cat "$out/kill9.txt"
echo "== transparency probe, bare mpiexec (Open MPI) vs launch"
for how in bare launch; do
    mkdir -p "$out/probe-$how"
    if [ $how = bare ]; then mpiexec -n 1 -x PATH -x PYTHONPATH python3 tests/rankprobe.py "$out/probe-$how"
    else python3 -m jobenv launch -- python3 tests/rankprobe.py "$out/probe-$how"; fi >"$out/probe-$how.log" 2>&1
done
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
a, b = (json.load(open(f"{d}/probe-{h}/probe-0.json")) for h in ("bare", "launch"))
skip = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
        "MASTER_PORT", "PYTHONPATH"}
for r in (a, b):
    r["env"] = [k for k in r["env"] if k not in skip and not k.startswith(("JOBENV_", "TORCHELASTIC", "ROLE_",
                                                                             "GROUP_WORLD", "TORCH_NCCL"))]
    if r.get("sitecustomize", "") and "rankhook" in r["sitecustomize"]:
        r["sitecustomize"] = None
        r["modules"] = [m for m in r["modules"] if m != "sitecustomize"]
diff = {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}
print("probe differences:", json.dumps(diff)[:3000] or "none")
PY
echo "== cost: python3 -c 'import torch' bare vs under the supervised wrapper (10 runs each)"
python3 - <<'PY'
import os, statistics, subprocess, sys, tempfile, time
from jobenv import rankwrap
env = {**os.environ, "PMI_RANK": "0", "PMI_SIZE": "1", "JOBENV_PYTHON": sys.executable}
def t(argv, sup):
    xs = []
    for _ in range(10):
        e = dict(env)
        if sup:
            e["JOBENV_RUN_DIR"] = tempfile.mkdtemp()
        s = time.perf_counter(); subprocess.run(argv, env=e, check=True); xs.append(time.perf_counter() - s)
    return statistics.median(xs)
cmd = [sys.executable, "-c", "import torch"]
bare, sup = t(cmd, False), t(["/bin/sh", rankwrap.script_path(), *cmd], True)
print(f"import torch: bare {bare*1000:.0f} ms, supervised {sup*1000:.0f} ms, added {(sup-bare)*1000:.1f} ms "
      f"({(sup-bare)/bare*100:.2f}%)")
PY
