#!/bin/bash
# `selftest --bandwidth` on one real NVIDIA GPU with NCCL, and NCCL's own INFO logs kept.
#
# Run from a folder holding jobenv/ (the package) on a machine with torch and one GPU:
#   bash benchmarks/fabric_gpu.sh OUTDIR
# 1. one rank: NCCL's network choice ("Using network ...") on this host;
# 2. two ranks sharing the GPU, each told it is another host (NCCL_HOSTID, which NCCL's
#    getHostHash reads): NCCL refuses two ranks on one GPU of one host, so this is the
#    way to make it connect the two over its network transport, here TCP (NET/Socket);
# 3. the same two ranks without NCCL_HOSTID: what NCCL says about a shared GPU;
# 4. case 2 judged by Polaris's profile (--profile polaris): the TCP-fallback verdict;
# 5. the raw NCCL_DEBUG=INFO log of case 2 from a bare torch all-reduce (the fixture of
#    tests/test_selftest_fabric.py).
set -u
out=${1:?usage: fabric_gpu.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
run() {  # name, timeout, per-rank prefix, ranks, selftest args...
    local name=$1 limit=$2 prefix=$3 n=$4; shift 4
    echo "== $name"
    timeout "$limit" torchrun --standalone --nproc-per-node "$n" --no-python sh -c \
        "$prefix exec python3 -m jobenv.selftest --bandwidth --timeout $((limit - 10)) --json-file $out/$name.json $*" \
        >"$out/$name.txt" 2>&1
    echo "rc=$?" >>"$out/$name.txt"
    tail -n 25 "$out/$name.txt"
}
{ nvidia-smi -L; python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  ip -brief addr 2>/dev/null || cat /proc/net/dev; } >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
run one 80 "" 1
run two_hosts 140 'export NCCL_HOSTID=fakehost$LOCAL_RANK;' 2
run two_shared 50 "" 2
run polaris 100 'export NCCL_HOSTID=fakehost$LOCAL_RANK;' 2 --profile polaris
echo "== raw NCCL log"
mkdir -p "$out/raw"
cat >"$out/raw/allreduce.py" <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
torch.cuda.set_device(0)
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("rank", dist.get_rank(), "sum", x[0].item())
dist.destroy_process_group()
EOF
NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$out/raw/nccl.%h.%p.log" timeout 80 torchrun --standalone --nproc-per-node 2 \
    --no-python sh -c "export NCCL_HOSTID=fakehost\$LOCAL_RANK; exec python3 $out/raw/allreduce.py" >"$out/raw/run.txt" 2>&1
echo "rc=$?" >>"$out/raw/run.txt"
cat "$out/raw/run.txt"
grep -h "Using network\|NET/Socket\|NET/Plugin\| via \|NCCL version" "$out"/raw/nccl.*.log | head -40
