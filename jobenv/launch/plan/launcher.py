"""The launcher a launch runs: the job's recorded absolute launcher while it is still here
(`launcher_path`), its family as the record says (`launcher_family`), with launch's word,
before any rank starts, when it cannot start the job's MPI packages as one world (`world_warning`).
The record's field is read by jobenv.store.software_field; save records it (jobenv.capture.software_env).
"""
from __future__ import annotations

import os

from jobenv.store.software_field import field

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Optional, Tuple


def launcher_path(record: Any, argv0: str, exists: Callable[[str], bool] = lambda p: os.access(p, os.X_OK)
                  ) -> Tuple[str, Optional[str]]:
    """(program to run, warning): the recorded absolute launcher when it is still here."""
    sw = field(record)
    rec = sw["launcher"] if sw else None
    if rec and os.path.basename(rec) == os.path.basename(argv0):
        if exists(rec):
            return rec, world_warning(argv0, rec, sw.get("mpi", {}) if sw else {})
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


def world_warning(argv0: str, launcher: str, built: Mapping[str, str]) -> Optional[str]:
    """launch's word, before any rank starts, when `launcher` cannot start the job's MPI
    packages (`built`, recorded by save) as one world (the rule: launcher_fit.world_misfit)."""
    if not built:
        return None
    from jobenv.runtime.families import known
    from jobenv.launcher_fit import world_misfit

    row = known(argv0, launcher)
    lines = world_misfit(row.flavor if row is not None else None, built)
    return "; ".join(lines) or None
