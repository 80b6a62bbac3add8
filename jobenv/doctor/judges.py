"""The judges of `jobenv doctor`: pure functions from what a probe saw (a banner, a library
version string, an import's report, a GPU count) to a Check(name, status, detail, fix).

Which launcher a banner names and which MPI it speaks come from the launcher-family table
(jobenv.runtime.families); which MPI a library string names, from jobenv.launcher_fit (the
rule `save` and `launch` warn by).
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from jobenv.runtime import families
from jobenv.launcher_fit import mpi_abi as _abi
from jobenv.launcher_fit import mpi_flavor, world_misfit
from jobenv.core.numparse import plural


class Check(NamedTuple):
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def judge_mpi4py(launcher: Optional[str], library: Optional[str], lib_text: str,
                 own: Optional[Tuple[str, str]] = None) -> Check:
    """mpi4py's MPI library against the launcher's: a mismatch makes every rank rank 0.
    `own`: (path, flavor) of the mpiexec beside this Python, when there is one: when it
    matches mpi4py, the record named another launcher (saved from a shell without the venv)."""
    first = " ".join(lib_text.strip().splitlines()[0].split()) if lib_text.strip() else "unknown"
    if library is None:
        return Check("mpi4py", "warn", f"cannot tell which MPI mpi4py uses ({first})")
    if _abi(launcher) not in ("mpich", "openmpi"):  # srun and flux run serve either
        return Check("mpi4py", "ok", f"built against {library} ({first})")
    if _abi(launcher) != _abi(library):
        if own is not None and _abi(own[1]) == _abi(library):
            return Check("mpi4py", "fail", f"built against {library}, but the job's record names a {launcher} "
                         f"launcher: every rank would start as rank 0 of 1",
                         f"the record was saved from a shell where {launcher}'s mpiexec came first; {own[0]} "
                         f"({own[1]}) beside this Python matches mpi4py: activate this environment and "
                         "`jobenv save` again")
        return Check("mpi4py", "fail", f"built against {library}, but the launcher is {launcher}: every rank "
                     "would start as rank 0 of 1",
                     f"rebuild mpi4py against the launcher's MPI: MPICC=$(which mpicc) pip install --no-binary "
                     f"mpi4py --force-reinstall mpi4py, or launch with {library}'s mpiexec")
    return Check("mpi4py", "ok", f"built against {library}, matching the launcher ({first})")


def judge_torch(info: Dict[str, Any], gpus: int) -> Check:
    """torch's backends against the job's GPUs (nccl for CUDA, xccl for XPU, gloo for CPU)."""
    have = [b for b in ("nccl", "xccl", "gloo", "mpi") if info.get(b)]
    detail = f"torch {info.get('version')}, backends: {', '.join(have) or 'none'}"
    if info.get("cuda") or info.get("xpu"):
        detail += f"; {plural(int(info.get('devices') or 0), ('CUDA' if info.get('cuda') else 'XPU') + ' device')}"
    if not info.get("distributed"):
        return Check("torch", "fail", detail + "; torch.distributed is not available", "install a torch build with distributed support")
    if gpus and not (info.get("cuda") or info.get("xpu")):
        return Check("torch", "fail", detail + f"; the job has {plural(gpus, 'GPU')} per host but this torch sees none",
                     "install the CUDA or XPU build of torch (pip index of your site), or run on a compute node")
    if info.get("cuda") and not info.get("nccl"):
        return Check("torch", "warn", detail + "; CUDA without nccl: collectives fall back to gloo", "install a torch with nccl")
    return Check("torch", "ok", detail)


def judge_gpus(recorded: int, seen: Optional[int], where: str) -> Check:
    if seen is None:
        if recorded:
            return Check("gpus", "warn", f"record says {recorded} per host; no GPU tool answers on this host",
                         "run `jobenv doctor` on a compute node of the job")
        return Check("gpus", "ok", "record says 0 per host; none found here")
    if seen == recorded:
        return Check("gpus", "ok", f"{seen} visible here ({where}), as recorded")
    return Check("gpus", "fail" if seen < recorded else "warn",
                 f"record says {recorded} per host, this host shows {seen} ({where})",
                 f"save again here (`jobenv save --gpus-per-host {seen}`), or check {where}")


def launcher_family(exe: str, banner: str) -> Optional[families.Family]:
    """Which launcher family `exe` is: its --version banner tells PALS from Hydra; else its
    name or where it is installed (/opt/cray/pals/...)."""
    return families.from_banner(banner) or families.known(exe, exe)


def judge_launcher(exe: str, banner: str) -> Check:
    """Which launcher `exe` is, from its --version banner (or its path: /opt/cray/pals/...)."""
    base = os.path.basename(exe)
    row = launcher_family(exe, banner)
    if base in ("python", "python3") or row is not None and row.mpi == "none":
        return Check("launcher", "ok", f"{exe}: {base} (no MPI)")
    lines = [ln.strip() for ln in banner.splitlines() if ln.strip()]
    first = next((ln for ln in lines if "version" in ln.lower()), lines[0] if lines else "no --version output")
    first = " ".join(first.split())
    if row is None:
        return Check("launcher", "warn", f"{exe}: unknown MPI ({first[:80]})", "check that this is the launcher you meant")
    return Check("launcher", "ok", f"{exe}: {row.flavor} ({first[:80]})")


def judge_imports(results: Dict[str, Tuple[Optional[Dict[str, Any]], str]], flavor: Optional[str], gpus: int,
                  own: Optional[Tuple[str, str]] = None, backends: Tuple[str, ...] = (),
                  built: Optional[Dict[str, str]] = None) -> List[Check]:
    """One line per framework: torch and mpi4py always, the others when installed.  A missing
    torch is a warning only where the job's profile configures a torch backend (`backends`:
    its fabric's, e.g. nccl); the selftest and plain MPI programs run without torch.  horovod
    built with another MPI than the launcher's (`built`: launch.plan.mpibuilds's answer) is a
    warning, by launch's rule (launcher_fit.world_misfit): launch refuses a program that
    imports it, and runs the others (a DeepSpeed run in the same venv)."""
    out = []
    for name, (info, err) in results.items():
        if info is None and not err:
            if name == "torch" and backends:
                out.append(Check(name, "warn", f"not installed, but this job's profile configures torch's "
                                 f"{', '.join(backends)}", "pip install torch (setup_torch needs it)"))
            elif name in ("torch", "mpi4py"):
                out.append(Check(name, "ok", "not installed" + (" (no framework configured for this job)"
                                                                if name == "torch" else "")))
            continue
        if info is None:
            out.append(Check(name, "fail", f"installed but `import {name}` fails: {err}",
                             f"reinstall {name} in {sys.prefix}"))
        elif name == "torch":
            out.append(judge_torch(info, gpus))
        elif name == "mpi4py":
            lib = str(info.get("library", ""))
            out.append(judge_mpi4py(flavor, mpi_flavor(lib), lib, own))
        elif name == "horovod" and world_misfit(flavor, {name: (built or {}).get(name, "")}):
            line = world_misfit(flavor, {name: (built or {})[name]})[0]
            out.append(Check(name, "warn", f"horovod {info.get('version')}: {line.split('; ')[0]}",
                             f"`jobenv launch` refuses a program that imports horovod under this launcher; "
                             f"{line.split('; ', 1)[1]}"))
        else:
            extra = ", ".join(k[:-6] for k, v in info.items() if k.endswith("_built") and v)
            note = " (installed; --deep imports it)" if info.get("imported") is False else ""
            out.append(Check(name, "ok", f"{name} {info.get('version')}{note}" + (f" (built with {extra})" if extra else "")))
    return out


def judge_shell(sh: str, probe_output: str, rc: str, exe: str, installed: bool = False, program: str = "") -> Check:
    """A new interactive `sh` printed `J:<jobenv it found>` when getjobenv exists there.
    No rc line is a warning (a user may activate the venv by hand); `installed` (the rc file
    holds `init --install`'s line) or a getjobenv without a runnable jobenv is broken: a failure.
    `sh` names the shell as asked ("login bash"); `program` is the shell itself (bash)."""
    import os

    found = [line[2:] for line in probe_output.splitlines() if line.startswith("J:")]
    if found and found[-1] and os.access(found[-1], os.X_OK):
        return Check("shell", "ok", f"a new {sh} finds jobenv ({found[-1]}) and getjobenv, from {rc}")
    what = "has getjobenv but no runnable jobenv" if found else "finds no jobenv (getjobenv, launch: command not found)"
    program = program or sh
    fix = (f"run `{exe} init {program} --install` (adds one line naming {exe} to {rc})" if exe else
           f"run `/path/to/your/venv/bin/jobenv init {program} --install`")
    if installed and not found:
        what = f"finds no jobenv although {rc} has the line of `jobenv init --install` (the jobenv it names is gone?)"
    return Check("shell", "fail" if found or installed else "warn", f"a new {sh} (no venv active, as after ssh or in tmux) {what}",
                 fix)
