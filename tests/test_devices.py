"""GPUs per host: precedence of the sources, masks, and the vendor tools' real output formats."""
from __future__ import annotations

import json

import pytest

from jobenv.capture import devices
from jobenv.core.errors import BadInput

# Recorded outputs of the vendor tools (formats of nvidia-smi 535, rocm-smi 5.x, xpu-smi 1.2).
NVIDIA_SMI_L = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-3a2f9c4e-1b7d-4e0a-9f63-0c8d2b7e5a11)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-8b1c2d3e-4f5a-6b7c-8d9e-0f1a2b3c4d5e)
GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d)
GPU 3: NVIDIA A100-SXM4-40GB (UUID: GPU-9f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0)
"""
NVIDIA_MIG = """GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-3a2f9c4e-1b7d-4e0a-9f63-0c8d2b7e5a11)
  MIG 3g.20gb     Device  0: (UUID: MIG-5c6d7e8f-0a1b-2c3d-4e5f-6a7b8c9d0e1f)
  MIG 3g.20gb     Device  1: (UUID: MIG-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b)
"""
ROCM_SMI_SHOWID = """

============================ ROCm System Management Interface ============================
========================================= GPU ID =========================================
GPU[0]		: GPU ID: 0x7408
GPU[1]		: GPU ID: 0x7408
GPU[2]		: GPU ID: 0x7408
GPU[3]		: GPU ID: 0x7408
GPU[4]		: GPU ID: 0x7408
GPU[5]		: GPU ID: 0x7408
GPU[6]		: GPU ID: 0x7408
GPU[7]		: GPU ID: 0x7408
==========================================================================================
================================== End of ROCm SMI Log ===================================
"""
XPU_SMI_DISCOVERY = json.dumps({"device_list": [
    {"device_id": i, "device_name": "Intel(R) Data Center GPU Max 1550", "device_type": "GPU",
     "pci_bdf_address": f"0000:{0x18 + i:02x}:00.0", "uuid": f"00000000-0000-0000-{i:04d}-000000000000"}
    for i in range(6)]})


def test_vendor_counts_from_recorded_outputs():
    assert devices.count_nvidia(NVIDIA_SMI_L) == 4
    assert devices.count_nvidia(NVIDIA_MIG) == 1  # MIG slices live inside one physical GPU line
    assert devices.count_rocm(ROCM_SMI_SHOWID) == 8
    assert devices.count_xpu(XPU_SMI_DISCOVERY) == 6
    assert devices.count_xpu("not json") == 0 and devices.count_xpu("[]") == 0


@pytest.mark.parametrize("env,expect", [
    ({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, (4, "CUDA_VISIBLE_DEVICES")),
    ({"CUDA_VISIBLE_DEVICES": "GPU-3a2f9c4e,GPU-8b1c2d3e"}, (2, "CUDA_VISIBLE_DEVICES")),
    ({"CUDA_VISIBLE_DEVICES": ""}, (0, "CUDA_VISIBLE_DEVICES")),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles"}, (0, "CUDA_VISIBLE_DEVICES")),
    ({"ZE_AFFINITY_MASK": "0.0,0.1,1.0,1.1"}, (4, "ZE_AFFINITY_MASK")),
    ({"ROCR_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, (8, "ROCR_VISIBLE_DEVICES")),
    ({"HIP_VISIBLE_DEVICES": "0, 1,"}, (2, "HIP_VISIBLE_DEVICES")),
    ({}, None),
])
def test_masks(env, expect):
    assert devices.from_masks(env) == expect


def _no_probe():
    raise AssertionError("probed although an earlier source answered")


@pytest.mark.parametrize("kw,expect", [
    (dict(override=2, gres=4, profile_gpus=8), (2, "--gpus-per-host")),
    (dict(env={"JOBENV_GPUS_PER_HOST": "3"}, gres=4), (3, "JOBENV_GPUS_PER_HOST")),
    (dict(gres=4, env={"CUDA_VISIBLE_DEVICES": "0"}, profile_gpus=8), (4, "Slurm gres")),
    (dict(env={"CUDA_VISIBLE_DEVICES": "0,1"}, profile_gpus=8), (2, "CUDA_VISIBLE_DEVICES")),
    (dict(profile_gpus=12), (12, "machine profile")),
    (dict(gres=0, profile_gpus=4), (0, "Slurm gres")),  # a CPU partition: zero is an answer
])
def test_precedence(kw, expect):
    args = dict(env={}, override=None, gres=None, profile_gpus=None, probe_fn=_no_probe)
    args.update(kw)
    assert devices.gpus_per_host(args.pop("env"), **args) == expect


def test_probe_then_nothing():
    assert devices.gpus_per_host({}, None, None, None, lambda: (4, "nvidia-smi")) == (4, "nvidia-smi")
    assert devices.gpus_per_host({}, None, None, None, lambda: None) == (0, "no GPU found")


@pytest.mark.parametrize("bad", ["four", "-1", "1.5", ""])
def test_bad_override(bad):
    with pytest.raises(BadInput):
        devices.parse_override(bad, "JOBENV_GPUS_PER_HOST")


def test_probe_without_tools(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert devices.probe() is None
