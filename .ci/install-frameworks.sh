#!/usr/bin/env bash
# Install the optional frameworks the runtime tests exercise: tensorflow-cpu, DeepSpeed,
# and horovod built from its PyPI sdist against Debian's Open MPI.
#
# horovod 0.28.1 as published does not build against torch 2.x (it asks for C++14; torch
# needs C++17) and its TensorFlow part needs XLA headers that tensorflow-cpu lacks, so
# the sdist is patched: C++17, and xla_mpi_ops.cc left out.  The built wheel is cached in
# $JOBENV_WHEEL_CACHE (default ~/.cache/jobenv-ci) between local runs.
set -euo pipefail
PY=${PYTHON:-python3}
CACHE=${JOBENV_WHEEL_CACHE:-$HOME/.cache/jobenv-ci}
mkdir -p "$CACHE"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

$PY -m pip install -q "tensorflow-cpu>=2.15"
# DeepSpeed from source with ops built on first use (no CUDA); torch==2.13.0 is already there,
# and stays as .ci/install-torch.sh left it: pip would add the GPU-only parts that it left out.
DS_BUILD_OPS=0 $PY -m pip install -q --no-build-isolation --no-deps "deepspeed>=0.14"
mapfile -t reqs < <($PY "$(dirname "$0")/requirements.py" deepspeed torch)
$PY -m pip install -q "${reqs[@]}"

if ! $PY -c "import horovod.torch, horovod.tensorflow" 2>/dev/null; then
    # the wheel is built against this torch: one per torch build (2.13.0+cpu, or PyPI's CUDA 2.13.0)
    CACHE=$CACHE/horovod-torch-$($PY -c 'import torch; print(torch.__version__)')
    mkdir -p "$CACHE"
    whl=$(ls "$CACHE"/horovod-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$whl" ]; then
        work=$(mktemp -d)
        $PY -m pip download -q --no-deps --no-binary :all: -d "$work" horovod==0.28.1
        tar -xzf "$work"/horovod-0.28.1.tar.gz -C "$work"
        src="$work/horovod-0.28.1"
        sed -i 's/CMAKE_CXX_STANDARD 14/CMAKE_CXX_STANDARD 17/' "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
        sed -i '/xla_mpi_ops.cc/d' "$src/horovod/tensorflow/CMakeLists.txt"
        # CPU operations only (gloo): a CUDA build of torch (what PyPI serves) on a machine with a CUDA
        # toolkit would make horovod's torch part a CUDA extension, which then needs CMake's CUDAToolkit
        sed -i 's/print(True if ((torch.version.cuda is not None) and (CUDA_HOME is not None)) else False)/print(False)/' \
            "$src/cmake/Modules/FindPytorch.cmake"
        # Debian's Open MPI wrappers ahead of the mpich wheel's (which sit beside python3),
        # and this interpreter ahead of any other python3 (CMake picks `python` from PATH)
        ompi="$work/ompi-bin"
        mkdir -p "$ompi"
        for t in mpicc mpicxx mpic++ mpirun mpiexec; do ln -sf "/usr/bin/$t.openmpi" "$ompi/$t"; done
        pybin=$(dirname "$($PY -c 'import sys; print(sys.executable)')")
        (cd "$src" && PATH="$ompi:$pybin:$PATH" MAKEFLAGS=-j2 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_TENSORFLOW=1 \
            HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=gloo \
            $PY -m pip wheel -q --no-build-isolation --no-deps -w "$CACHE" .)
        whl=$(ls "$CACHE"/horovod-*.whl | head -1)
        rm -rf "$work"
    fi
    $PY -m pip install -q --no-deps "$whl"
    $PY -m pip install -q cffi cloudpickle psutil pyyaml packaging
fi
