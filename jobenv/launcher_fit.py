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

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .runtime import families

# What puts a family's program first on PATH, per family a profile can be written for.
_HOW = {
    "pals": "load the Cray PALS module (`module load cray-pals`, or the PrgEnv your site documents)",
    "srun": "run inside a Slurm allocation (srun comes with Slurm)",
    "intelmpi": "load the Intel MPI module (`module load intel-mpi` or oneAPI's setvars.sh)",
    "openmpi": "load the Open MPI module",
    "mpich": "load the MPICH module",
}


# MPI libraries that are no launcher's: Cray MPICH (launched by PALS or srun), and MPICH's own
# version string (its launcher's banner says HYDRA).  Name, what the text holds, the ABI.
_LIBRARIES = (("Cray MPICH", "cray mpich", "mpich"), ("MPICH", "mpich", "mpich"))
# The sonames a compiled extension links (horovod's mpi_lib): which MPI library it was built with.
SONAMES = ((b"libmpi.so.40", "Open MPI"), (b"libmpi.so.12", "MPICH"), (b"libmpich.so", "MPICH"))
# srun's --mpi plugin each ABI's library starts under, in order of preference (MPICH's simple
# PMI client speaks pmi2; Open MPI 4 and 5 need pmix); without one every rank is rank 0 of 1
_ABI_NAMES = {"mpich": "MPICH or a derivative", "openmpi": "Open MPI"}
SRUN_MPI = {"mpich": ("pmi2", "pmix"), "openmpi": ("pmix",)}
_KNOWN_TYPES = ("none", "pmi2", "pmix", "cray_shasta", "openmpi", "pmi1", "mvapich")


def mpi_flavor(text: str) -> Optional[str]:
    """Which MPI a `--version` banner or MPI_Get_library_version string names: a launcher
    family's (jobenv.runtime.families) or an MPI library's."""
    t = text.lower()
    if _LIBRARIES[0][1] in t:
        return _LIBRARIES[0][0]
    row = families.from_banner(text)
    if row is not None:
        return row.flavor
    return next((name for name, needle, _ in _LIBRARIES if needle in t), None)


def mpi_abi(flavor: Optional[str]) -> Optional[str]:
    """The MPI ABI a launcher or library of this flavor speaks: mpich, openmpi, any or none."""
    row = next((r for r in families.FAMILIES if r.flavor == flavor), None)
    if row is not None:
        return row.mpi
    return next((abi for name, _, abi in _LIBRARIES if name == flavor), None)


def soname_flavor(data: bytes) -> Optional[str]:
    """The MPI a shared object links, from the sonames in its bytes (its DT_NEEDED strings)."""
    return next((flavor for name, flavor in SONAMES if name + b"\0" in data), None)


def world_misfit(launcher: Optional[str], built: Mapping[str, str]) -> List[str]:
    """One line per package of the job's Python (`built`: mpi4py, horovod -> the MPI flavor it
    was built with) that the launcher of flavor `launcher` cannot start as one world: an MPICH
    library under Open MPI's mpirun (or the reverse) starts every rank as rank 0 of 1, exits 0
    and says nothing.  srun and flux serve either ABI; an unknown side says nothing."""
    have = mpi_abi(launcher)
    if have not in ("mpich", "openmpi"):
        return []
    return [f"{package} is built with {flavor}, but the launcher is {launcher}: every rank would start as "
            f"rank 0 of a world of 1 (and exit 0); launch with {flavor}'s mpiexec (`jobenv launch --launcher "
            f"{mpi_abi(flavor)}`), or rebuild {package} against the launcher's MPI ({_ABI_NAMES[have]})"
            for package, flavor in sorted(built.items())
            if mpi_abi(flavor) in ("mpich", "openmpi") and mpi_abi(flavor) != have]


def _srun_types(flavor: str) -> Tuple[str, ...]:
    """The srun --mpi types that start a library of this flavor as one world, preferred first;
    Cray MPICH's own PMI plugin on HPE systems is cray_shasta (Perlmutter's default)."""
    fits = SRUN_MPI.get(str(mpi_abi(flavor)), ())
    return ("cray_shasta", *fits) if flavor == "Cray MPICH" else fits


def _types(text: str) -> List[str]:
    """srun --mpi type names in `srun --mpi=list` output or a flag, a versioned one as its plugin
    (`pmix_v4` is pmix)."""
    return [re.sub(r"_v\d+$", "", t) for t in re.findall(r"[a-z0-9_]+", text.lower())]


def _mpi_first(built: Mapping[str, str]) -> List[Tuple[str, str]]:
    """The packages srun could start as singletons, mpi4py first: the MPI a program makes its
    world with (horovod's MPI is one of its controllers; gloo serves it too)."""
    return sorted(((p, f) for p, f in built.items() if _srun_types(f)), key=lambda pf: (pf[0] != "mpi4py", pf[0]))


def srun_mpi(built: Mapping[str, str], available: str) -> Optional[str]:
    """The srun --mpi type that starts the job's MPI (`built`: mpi4py's, else the first package's)
    as one world, the first it takes among those `srun --mpi=list` printed (`available`); None
    when no package needs one or none is there."""
    first = _mpi_first(built)
    offered = set(_types(available))
    return next((t for t in _srun_types(first[0][1]) if t in offered), None) if first else None


def srun_world(built: Mapping[str, str], given: Optional[str], listed: Callable[[], str]
               ) -> Tuple[Optional[str], List[str]]:
    """What `launch` does about srun's --mpi for the job's MPI packages (`built`), as (the type to
    add, warnings): when the user gave none (`given`: an --mpi flag or SLURM_MPI_TYPE), the type
    `srun_mpi` picks among those `srun --mpi=list` prints (`listed`, asked only then); then one
    warning, before any rank starts, for each package the type in force (or the lack of one)
    would start as rank 0 of a world of 1 on every rank: exit 0, silently, otherwise."""
    mine = _mpi_first(built)
    if not mine:
        return None, []
    kind, offered = given, ""
    if given is None:
        available = listed()
        kind = srun_mpi(built, available)
        offered = ", ".join(t for t in dict.fromkeys(_types(available)) if t in _KNOWN_TYPES) or "none"
    plugin = (_types(kind) or [kind])[0] if kind is not None else None
    split = "every rank would start it as rank 0 of a world of 1 (and exit 0)"
    out = []
    for package, flavor in mine:
        fits = _srun_types(flavor)
        if plugin in fits:
            continue
        need = f"it needs --mpi={' or '.join(fits)}"
        if given is not None:
            out.append(f"{package} is built with {flavor}, but srun --mpi={given} (--mpi or SLURM_MPI_TYPE) is not "
                       f"its PMI: {split}; {need}")
        elif kind is None:
            out.append(f"{package} is built with {flavor}, and no srun --mpi type here fits ({need}; srun --mpi=list "
                       f"offers {offered}): {split}")
        else:
            out.append(f"{package} is built with {flavor}, but launch passes srun --mpi={kind} for {mine[0][0]} "
                       f"({mine[0][1]}): {split}; {need} (rebuild one of them against the other's MPI)")
    return (kind if given is None else None), out


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
