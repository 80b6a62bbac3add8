"""GPUs per host: the count the launch command starts one rank for.

Order (first answer wins): explicit override (`--gpus-per-host`, JOBENV_GPUS_PER_HOST);
the scheduler's gres count (Slurm); device masks in this shell (CUDA_VISIBLE_DEVICES,
ZE_AFFINITY_MASK, ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES); the machine profile's
known count (a Polaris node has 4 A100s whatever node the shell is on, and it is right
even from a login node); then probing tools on this host.  Zero is a valid answer.
"""
from __future__ import annotations

import json
import subprocess
from typing import Callable, List, Mapping, Optional, Tuple

from jobenv.core.numparse import MAX_PER_HOST, parse_uint
from jobenv.schedulers.base import command_path

MASKS = ("CUDA_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def parse_override(value: str, where: str) -> int:
    """A count from the environment: ASCII digits, at most MAX_PER_HOST."""
    return parse_uint(value.strip(), where, MAX_PER_HOST)


def from_masks(env: Mapping[str, str]) -> Optional[Tuple[int, str]]:
    """Count devices named by a visibility mask; ('', 'NoDevFiles', '-1') mean none."""
    for var in MASKS:
        if var not in env:
            continue
        val = env[var].strip()
        if val in ("", "NoDevFiles", "-1", "none"):
            return 0, var
        return min(len([x for x in val.split(",") if x.strip()]), MAX_PER_HOST), var
    return None


def count_nvidia(out: str) -> int:
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def count_rocm(out: str) -> int:
    import re

    return len(set(re.findall(r"GPU\[(\d+)\]", out)))


def count_xpu(out: str) -> int:
    try:
        return len(json.loads(out).get("device_list", []))
    except (ValueError, AttributeError):
        return 0


PROBES: List[Tuple[List[str], Callable[[str], int]]] = [
    (["nvidia-smi", "-L"], count_nvidia),
    (["xpu-smi", "discovery", "-j"], count_xpu),
    (["rocm-smi", "--showid"], count_rocm),
]


def probe(timeout: float = 15.0) -> Optional[Tuple[int, str]]:
    """Ask the vendor tools on this host; a missing or failing tool is not an error."""
    for argv, count in PROBES:
        exe = command_path(argv[0])  # never one planted in the working directory
        if exe is None:
            continue
        try:
            p = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            n = count(p.stdout)
            if n:
                return n, argv[0]
    return None


def gpus_per_host(env: Mapping[str, str], override: Optional[int], gres: Optional[int],
                  profile_gpus: Optional[int],
                  probe_fn: Callable[[], Optional[Tuple[int, str]]] = probe) -> Tuple[int, str]:
    """(count, where it came from)."""
    if override is not None:
        return override, "--gpus-per-host"
    if env.get("JOBENV_GPUS_PER_HOST"):
        return parse_override(env["JOBENV_GPUS_PER_HOST"], "JOBENV_GPUS_PER_HOST"), "JOBENV_GPUS_PER_HOST"
    if gres is not None:
        return gres, "Slurm gres"
    masked = from_masks(env)
    if masked is not None:
        return masked
    if profile_gpus is not None:
        return profile_gpus, "machine profile"
    found = probe_fn()
    if found is not None:
        return found
    return 0, "no GPU found"
