"""Is the user's program there?  Asked before the launch, on this host's PATH as the ranks see
it (the restore plan's environment, which the launcher passes on), so that `launch pyhton3 x.py`
is one line naming the program and the host, not the per-rank wrapper's path and line number
once per rank.  A shell gives 127 for a program it cannot find and 126 for one it cannot run;
so does this."""
from __future__ import annotations

import os

from jobenv.core.errors import JobenvError

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Mapping, Sequence


def check(command: Sequence[str], environ: Mapping[str, str]) -> None:
    """JobenvError (exit 127, or 126 for a file that is not executable) unless `command[0]` is
    a program the ranks can start."""
    from jobenv.capture.software import _which

    prog = command[0] if command else ""
    host = environ.get("JOBENV_HOSTNAME") or os.uname().nodename
    if "/" in prog and os.path.isdir(prog):
        raise JobenvError(f"{prog}: is a directory on {host}", 126)
    if prog and _which(prog, environ.get("PATH", "")) is not None:
        return
    if "/" in prog and os.path.exists(prog):
        raise JobenvError(f"{prog}: permission denied on {host} (not an executable file)", 126)
    where = "" if "/" in prog else " (PATH has no such program)"
    raise JobenvError(f"{prog}: command not found on {host}{where}", 127)
