"""Every Python interpreter jobenv starts: never with the current directory on sys.path.

HPC nodes are shared, and users run jobenv from directories others can write (/tmp, a
project directory): a `json.py`, `runpy.py` or `jobenv/` planted there must not run.
`python -m M` puts the cwd first on sys.path and `python -c C` puts '' (the cwd) first;
`-P` removes it but exists only from Python 3.11, and `-I` also drops PYTHONPATH and the
user site directory, which users rely on (and which choose the jobenv under test).

So every child is `python -c BOOT ARGS`, where BOOT first deletes every '' from sys.path,
before any import, and then runs the module or code.  This holds on every version
jobenv supports (checked on 3.9-3.13):
- `-c` adds '' only after `site` ran, so a `sitecustomize.py` or `.pth` lookup never sees
  the cwd; `sys` is built in and never comes from a path.
- PYTHONPATH and the user site stay as the user set them.  Python makes an empty or
  relative PYTHONPATH entry absolute (`/foo:` adds the cwd) before any code of ours runs:
  that is the user's own instruction, which every python they start obeys (even
  `sitecustomize` is looked up there), so jobenv keeps it, and `jobenv doctor` warns.
"""
from __future__ import annotations

TYPE_CHECKING = False  # imported on the `jobenv get` path (the restore plan): no typing import
if TYPE_CHECKING:
    from typing import List, Optional

# The first statement of every child: '' (the cwd, added by `-c`) out of sys.path.
BOOT = "import sys; sys.path[:] = [p for p in sys.path if p]"


def code_argv(python: str, code: str, pin: Optional[str] = None, isolated: bool = False) -> List[str]:
    """`python` running `code` (then argv[1:] are the arguments that follow).

    `pin` goes first on sys.path (jobenv's own directory, for a child that must run this very
    jobenv); `isolated` adds `-I` for a child that needs the standard library only."""
    boot = BOOT + (f"; sys.path.insert(0, {pin!r})" if pin else "")
    # one line stays one line: `launch` is a one-line shell function (no newline to quote)
    return [python, *(["-I"] if isolated else []), "-c", boot + ("\n" if "\n" in code else "; ") + code]


def module_argv(python: str, module: str) -> List[str]:
    """`python -m module`, without the cwd on sys.path (arguments follow)."""
    return code_argv(python, f"import runpy; runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")


def cwd_entries(pythonpath: str) -> List[str]:
    """PYTHONPATH entries that Python resolves against the cwd (empty, as `$PYTHONPATH:/x`
    leaves with PYTHONPATH unset, or relative): `jobenv doctor` warns about them."""
    import os

    return [p for p in pythonpath.split(os.pathsep) if not os.path.isabs(p)] if pythonpath else []
