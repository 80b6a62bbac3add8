"""The launcher a launch runs: the job's recorded absolute launcher while it is still here
(`launcher_path`), its family as the record says (`launcher_family`), or the one `launch
--launcher` names (`given_launcher`; `retarget` sizes it when its family is not the job's).
The record's field is read by jobenv.store.software_field; save records it
(jobenv.capture.software_env).  Whether it starts the program's MPI as one world is
jobenv.launch.plan.worlds's question, asked of the launcher chosen here.
"""
from __future__ import annotations

import os

from jobenv.store.software_field import field

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Any, Callable, List, Mapping, Optional, Tuple


def launcher_path(record: Any, argv0: str, exists: Callable[[str], bool] = lambda p: os.access(p, os.X_OK)
                  ) -> Tuple[str, Optional[str]]:
    """(program to run, warning): the recorded absolute launcher when it is still here."""
    sw = field(record)
    rec = sw["launcher"] if sw else None
    if rec and os.path.basename(rec) == os.path.basename(argv0):
        if exists(rec):
            return rec, None
        return argv0, f"the job's launcher {rec} is not here; using {argv0!r} from PATH"
    return argv0, None


def launcher_family(record: Any, environ: Mapping[str, str]) -> str:
    """The family of the job's launcher (jobenv.runtime.families): the record's, which save
    decided.  A record older than version 3 has none: it is derived here, once (kept on the
    record), by the rule launches used before: the launcher's name, at the path it runs from.
    BadInput for a launcher jobenv knows none of, as a launch by it would fail."""
    from jobenv.core.errors import BadInput
    from jobenv.runtime import families

    fam: str = record.launcher_family
    if fam is None:
        from jobenv.schedulers.base import command_path

        prog, _ = launcher_path(record, record.launch[0])
        resolved = prog if os.path.isabs(prog) else command_path(prog, environ.get("PATH", ""))
        fam = record.launcher_family = families.identify(record.launch[0], resolved)[1]
    if not fam:
        raise families.unknown(record.launch[0])
    if not any(row.name == fam for row in families.FAMILIES):
        raise BadInput(f"job {record.jobid}: its record names launcher family {fam!r}, which this jobenv does not know")
    return fam


def given_launcher(text: str, which: Callable[[str], Optional[str]]) -> Tuple[str, str]:
    """(path, family) of `launch --launcher TEXT`: a path (with a `/`), a family's name (openmpi,
    mpich, intelmpi, ...: the first of its programs on the launch's PATH, `which`, then an
    mpiexec or mpirun there that is of that family), or a program's name on PATH.  BadInput
    (exit 5) when it names nothing runnable or a launcher jobenv does not know."""
    from jobenv.core.errors import BadInput, visible
    from jobenv.runtime import families

    if "/" in text:
        path: Optional[str] = os.path.abspath(text) if os.path.isfile(text) and os.access(text, os.X_OK) else None
    elif text in families.BY_NAME:
        row = families.BY_NAME[text]
        shared = [p for p in (which(n) for n in ("mpiexec", "mpirun")) if p]
        path = next((p for p in (which(n) for n in row.programs) if p), None) or next(
            (p for p in shared if families.identify(os.path.basename(p), p)[1] == row.name), None)
        if path is None:
            raise BadInput(f"--launcher {text}: no {row.title} on PATH ({', '.join((*row.programs, 'mpiexec', 'mpirun'))}"
                           f"); give its path: --launcher /path/to/mpiexec")
    else:
        path = which(text)
    if path is None:
        raise BadInput(f"--launcher {visible(text)}: no such program (a path, a program on PATH, or a family: "
                       f"{', '.join(families.BY_NAME)})")
    fam = families.identify(os.path.basename(path), path)[1]
    if not fam:
        raise families.unknown(path)
    return path, fam


def retarget(prog: str, row: Any, nranks: int, ppn: int, hosts: int, hostfile: str) -> List[str]:
    """The sized line of `launch --launcher` naming another family than the job's: its own
    flags for the ranks, per host and the hostfile (an mpiexec/mpirun family's; BadInput for
    one that sizes otherwise: srun, flux, jsrun, torchrun); more ranks than slots allowed."""
    from jobenv.core.errors import BadInput

    if not (row.nranks and row.ppn and row.hostfile) or row.words != 1:
        raise BadInput(f"--launcher: {row.title} is not an mpiexec of another MPI; launch with the job's own "
                       "family, or save the job again with it first on PATH")
    argv = [prog, row.nranks[0], str(nranks), *row.oversubscribe]
    return argv + ([row.ppn[0], str(ppn), row.hostfile[0], hostfile] if hosts > 1 else [])
