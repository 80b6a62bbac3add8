#!/usr/bin/env bash
# torch for the test suite, which runs it on the CPU only (gloo, DDP, torchrun): into $PYTHON's
# environment, unless it imports already.  Used by .ci/run and by tests/test_stage_e2e.py's venv.
#
# PyTorch's CPU index (the +cpu wheel, ~190 MB) where it can be reached (quickly refused where
# not).  Otherwise PyPI, which has only CUDA builds: its torch (527 MB for 2.13.0) plus every
# requirement except those no CPU run loads, measured for 2.13.0 on a machine with no system
# CUDA (a container image; a host's /usr/local/cuda in ld.so.conf hides a missing cudart or
# cupti): `import torch` and a 2-process gloo DDP step work without
#   triton (torch.compile's GPU kernels), cuda-bindings, and cuda-toolkit's extras cusolver
#   (torch.linalg on a GPU: libtorch_cuda_linalg.so, loaded lazily) and nvtx: ~440 MB less.
#   What libtorch links must stay: cuBLAS, cuDNN, cuFFT, cuSPARSE(Lt), cuRAND, cuFile, NCCL,
#   NVRTC, NVSHMEM, nvJitLink, and cudart and cupti (libtorch_cpu.so needs both: without
#   them "libcudart.so.13: cannot open shared object file").  The import and gloo are checked
#   at the end, so a torch that needs more fails here, not in a test.  pip's resolver brings
#   the parts left out back with any later package that requires torch: install those with
#   --no-deps and .ci/requirements.py (DeepSpeed, in .ci/install-frameworks.sh).
set -euo pipefail
PY=${PYTHON:-python3}
VERSION=${JOBENV_TORCH_VERSION:-2.13.0}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

if ! $PY -c 'import torch' 2>/dev/null; then
    if ! $PY -m pip install -q --retries 0 --timeout 20 --index-url https://download.pytorch.org/whl/cpu \
            "torch==$VERSION" 2>/dev/null; then
        echo "PyTorch's CPU index cannot be reached: PyPI's torch $VERSION, less its GPU-only requirements"
        $PY -m pip install -q --no-deps "torch==$VERSION"
        mapfile -t reqs < <($PY "$(dirname "$0")/requirements.py" torch triton cuda-bindings \
            'cuda-toolkit[cusolver,nvtx]')
        $PY -m pip install -q "${reqs[@]}"
    fi
fi
$PY -c 'import torch, torch.distributed as d; assert d.is_gloo_available(), "torch without gloo"'
