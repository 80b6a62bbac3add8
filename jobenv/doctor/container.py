"""`jobenv doctor --container IMAGE`: will `launch --container IMAGE` work, told before any rank
starts: the runtime found, the image readable, the GPU flag, and the image's MPI against the
host launcher's (an Open MPI image under MPICH's Hydra starts every rank as a singleton: each
sees MPI_COMM_WORLD of 1, and a job of N ranks is N jobs of one).

The runtime and the GPU vendor are chosen as the launch chooses them (jobenv.launch.plan.container);
the image's MPI is read from a directory image's library directories (`libmpi.so.40`: Open MPI;
`libmpi.so.12`: the MPICH ABI, which Cray MPICH and Intel MPI share); an image the runtime looks
up itself (a registry name, `docker:...`) or a single-file image is not opened: said so.
"""
from __future__ import annotations

import os
from typing import List, Mapping, Optional, Sequence

from jobenv.doctor.judges import Check

LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib", "usr/local/lib",
            "opt/hpcx/ompi/lib", "usr/local/mpi/lib")
SONAMES = {"libmpi.so.40": "openmpi", "libmpi.so.12": "mpich"}
TITLES = {"openmpi": "Open MPI", "mpich": "MPICH-ABI (MPICH, Cray MPICH, Intel MPI)"}


def image_mpi(image: str) -> Optional[str]:
    """"openmpi" | "mpich" | "" (no MPI library in a directory image); None when not a directory."""
    if not os.path.isdir(image):
        return None
    for d in LIB_DIRS:
        for soname, abi in SONAMES.items():
            if os.path.exists(os.path.join(image, d, soname)):
                return abi
    return ""


def judge_mpi(image_abi: Optional[str], launcher_mpi: Optional[str], launcher: str) -> Check:
    """The image's MPI ABI against the launcher family's (`families.Family.mpi`)."""
    if image_abi is None:
        return Check("container MPI", "warn", "the image is not a directory here: its MPI was not read",
                     "check that its MPI matches the launcher's ABI")
    if not image_abi:
        return Check("container MPI", "ok", "no MPI library in the image (NCCL/gloo ranks need none)")
    if launcher_mpi in ("mpich", "openmpi") and image_abi != launcher_mpi:
        return Check("container MPI", "fail",
                     f"the image's MPI is {TITLES[image_abi]}, the launcher ({launcher}) starts {TITLES[launcher_mpi]} "
                     "ranks: every rank would start as a singleton (MPI_COMM_WORLD of 1)",
                     f"use an image built with {TITLES[launcher_mpi]}, or launch with its own launcher")
    return Check("container MPI", "ok", f"the image's MPI is {TITLES[image_abi]}"
                 + (f", as the launcher's ({launcher})" if launcher_mpi == image_abi else ""))


def check(image: str, runtime: Optional[str], env: Mapping[str, str], site: Sequence[str], gpu: str,
          launcher_mpi: Optional[str], launcher: str) -> List[Check]:
    """The container checks, in order: runtime, image, GPU flag, MPI."""
    from jobenv.core.errors import JobenvError
    from jobenv.launch.plan.container import choose_runtime, host_gpus
    from jobenv.runtime import containers

    try:
        name = choose_runtime(runtime, site, env.get("PATH", ""))
    except JobenvError as exc:
        return [Check("container runtime", "fail", exc.message, "load the site's container module")]
    row = containers.get(name)
    found = containers.which([name], env.get("PATH", "")) if not row.launcher_flags else None
    out = [Check("container runtime", "ok" if found or row.launcher_flags else "fail",
                 f"{row.title}: {found[1]}" if found else
                 (f"{row.title}: srun's flags (the plugin is the cluster's: `srun --help` lists --container-image)"
                  if row.launcher_flags else f"{row.title}: {row.program} is not on PATH"),
                 "" if found or row.launcher_flags else f"load the module that provides {row.program}")]
    if os.path.exists(image):
        readable = os.access(image, os.R_OK | (os.X_OK if os.path.isdir(image) else 0))
        shell = not os.path.isdir(image) or os.path.exists(os.path.join(image, "bin", "sh"))
        out.append(Check("container image", "ok" if readable and shell else "fail",
                         f"{image}: {'a directory' if os.path.isdir(image) else 'a file'}"
                         + ("" if shell else " without /bin/sh") + ("" if readable else ", not readable"),
                         "" if readable and shell else "make the image readable (and a whole root file system)"))
        missing = [f for f in ("etc/hosts", "etc/resolv.conf") if not os.path.exists(os.path.join(image, f))]
        if name == "charliecloud" and os.path.isdir(image) and missing:  # ch-run binds the host's over files only
            out.append(Check("container host names", "warn", f"{image} has no /{' or /'.join(missing)}: ch-run binds "
                             "the host's only over a file the image has, so the ranks cannot resolve the job's hosts",
                             f"create them empty: touch {' '.join(os.path.join(image, f) for f in missing)}"))
    else:
        out.append(Check("container image", "warn" if not image.startswith(("/", ".")) else "fail",
                         f"{image}: not a path here; the runtime looks it up" if not image.startswith(("/", "."))
                         else f"{image} does not exist", "" if not image.startswith(("/", ".")) else "give the image's path"))
    vendor = gpu or host_gpus()
    flags = " ".join(row.gpu.get(vendor, ())) if vendor else ""
    out.append(Check("container GPU", "ok", f"{vendor} GPUs: {flags or 'no flag needed'}" if vendor
                     else "no GPU on this host: no GPU flag"))
    out.append(judge_mpi(image_mpi(image), launcher_mpi, launcher))
    return out
