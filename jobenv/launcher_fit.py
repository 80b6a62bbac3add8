"""Does the launcher a job records take the flags its profile wrote for it?

A profile's launch line is written for one launcher family, or a few that take the same
flags (`family:` on the candidate: Polaris and Aurora write Cray PALS's `--cpu-bind depth
-d 16`; the generic PBS profile's `-ppn --hostfile` is MPICH Hydra's and PALS's); the
program that answers to its name is whatever comes first on PATH.  A venv's MPICH wheel (`pip install mpich`,
jobenv's `.[mpi]`) puts MPICH Hydra's `mpiexec` there, which rejects `--cpu-bind` at the
first launch; Debian's Open MPI `mpiexec` refuses root.  `save` warns (and keeps the
warning in the record) and `doctor` fails, both from this one rule, with the fix for what
was found.  Pure functions of (profile candidate, family found, path).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .launch import families

# What puts a family's program first on PATH, per family a profile can be written for.
_HOW = {
    "pals": "load the Cray PALS module (`module load cray-pals`, or the PrgEnv your site documents)",
    "srun": "run inside a Slurm allocation (srun comes with Slurm)",
    "intelmpi": "load the Intel MPI module (`module load intel-mpi` or oneAPI's setvars.sh)",
    "openmpi": "load the Open MPI module",
    "mpich": "load the MPICH module",
}


def declared(profile_launchers: List[Dict[str, Any]], argv0: str) -> Optional[Tuple[str, ...]]:
    """The families the profile wrote the recorded launch line for (None: any that takes it);
    `family:` names one, or a list where several take the same flags (PBS's generic
    `mpiexec -n -ppn --hostfile`: MPICH Hydra and Cray PALS, not Open MPI)."""
    for cand in profile_launchers:
        if str(cand["argv"][0]) == argv0:
            fam = cand.get("family")
            return (fam,) if isinstance(fam, str) else tuple(fam) if fam else None
    return None


def mismatch(profile: str, want: Union[None, str, Sequence[str]], found: Optional[families.Family], exe: str
             ) -> Optional[Tuple[str, str]]:
    """(problem, fix) when the launcher `found` at `exe` is none of the families `want` the
    profile's flags are for; None when they agree or either is not known."""
    wants = (want,) if isinstance(want, str) else tuple(want or ())
    if not wants or found is None or found.name in wants:
        return None
    rows = [families.get(w) for w in wants]
    shadow = (f"; {exe} shadows it: `pip uninstall mpich` in that environment, or put its bin after the "
              "system's on PATH" if found.name == "mpich" and "/bin/" in exe else "")
    titles = " or ".join(r.title for r in rows)
    problem = (f"profile {profile!r} writes its launch line for {titles}, but {exe} is {found.title}, "
               "which does not take those flags")
    how = _HOW.get(wants[0], f"put {rows[0].title} first on PATH") if len(rows) == 1 else f"put {titles} first on PATH"
    return problem, f"{how}{shadow}, then `jobenv save` again"


def changed(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """What a new save records differently from the job's previous record (`software` fields):
    the launcher or the Python, the usual sign of a shell without the job's venv or modules."""
    out = []
    for key, what in (("launcher", "launcher"), ("python", "Python")):
        a, b = old.get(key), new.get(key)
        if key == "python":
            a, b = (a or {}).get("executable"), (b or {}).get("executable")
        if a and b and a != b:
            out.append(f"this save records the {what} {b}; the job's previous record had {a} (a shell without "
                       f"the job's venv or modules? activate them and save again, or keep this one)")
    return out
