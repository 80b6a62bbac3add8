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
    from typing import Any, List, Mapping, Optional, Sequence


def _which(name: str, path: str) -> Optional[str]:
    """The user's own command as exec will find it, relative PATH entries included (`launch
    CMD` checks CMD is there).  Not for what jobenv records or runs on its own behalf (the
    launcher, python3): schedulers.base.command_path finds those, never in the working
    directory.  shutil.which without importing shutil (it is on the `get`/`launch` path)."""
    if "/" in name:
        return os.path.abspath(name) if os.access(name, os.X_OK) else None
    for d in path.split(os.pathsep):
        p = os.path.join(d or ".", name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def check(command: Sequence[str], environ: Mapping[str, str]) -> None:
    """JobenvError (exit 127, or 126 for a file that is not executable) unless `command[0]` is
    a program the ranks can start."""
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


def python_form(command: Sequence[str], module: bool, python: str, cwd: str) -> List[str]:
    """torchrun's two forms run with the job's Python (`python`, a name the ranks find on their
    PATH, which the restore plan and a staged copy point at the job's environment):
    `-m MODULE [ARG...]` (`module`), and `SCRIPT.py [ARG...]` where SCRIPT.py is a file in `cwd`
    (or at its path): torchrun's `train.py` habit.  Anything else is a program, as given."""
    if module:
        return [python, "-m", *command]
    first = command[0] if command else ""
    if first.endswith(".py") and os.path.isfile(os.path.join(cwd, first)):
        return [python, *command]
    return list(command)


def python_name(software: Optional[Mapping[str, Any]], saved_python: bool) -> str:
    """The job's Python as the ranks' PATH names it: the saved interpreter's name (its directory
    is first on the restored PATH), `python3` with --no-python or when none was saved."""
    exe = ((software or {}).get("python") or {}).get("executable") if saved_python else None
    return os.path.basename(exe) if isinstance(exe, str) and exe else "python3"


SHELLS = ("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash")


def _shell_script(command: Sequence[str]) -> Optional[int]:
    """Where SCRIPT is in `SHELL [OPTION...] -c SCRIPT [NAME [ARG...]]` (`bash -lc`, `sh -e -c`
    too); None for any other command."""
    if not command or os.path.basename(command[0]) not in SHELLS:
        return None
    i = 1
    while i < len(command) and command[i][:1] in ("-", "+") and command[i] not in ("-", "--"):
        word = command[i]
        if word in ("-o", "+o", "-O", "+O"):  # they take the next word
            i += 2
            continue
        if not word.startswith("--") and "c" in word[1:]:
            return i + 1 if i + 1 < len(command) else None
        i += 1
    return None


def shell_named(command: Sequence[str]) -> List[str]:
    """`SHELL -c SCRIPT` with its $0 given (the shell's name, which it would have anyway), so
    that DeepSpeed's `--local_rank=N`, put after it (script_end), is the script's $1, in "$@";
    put after SCRIPT it would be $0, which "$@" leaves out.  Any other command as given."""
    at = _shell_script(command)
    if at is not None and len(command) == at + 1:
        return [*command, os.path.basename(command[0])]
    return list(command)


def script_end(command: Sequence[str]) -> int:
    """How many words of `command` are the program and its script, where DeepSpeed's launcher
    puts `--local_rank=N`: `python3 [-u ...] train.py` or `python3 -m pkg.mod` -> after the
    script or module; `sh -c SCRIPT NAME` -> after NAME (the script's "$@" then holds it; see
    shell_named), `sh [-e] run.sh` -> after run.sh; any other program -> after the program."""
    at = _shell_script(command)
    if at is not None:
        return min(at + 2, len(command))
    if command and os.path.basename(command[0]) in SHELLS:  # `sh [OPTION...] run.sh ARGS`: after run.sh
        i = 1
        while i < len(command) and command[i][:1] in ("-", "+") and command[i] not in ("-", "--"):
            i += 2 if command[i] in ("-o", "+o", "-O", "+O") else 1
        return min(i + 1, len(command))
    if not command or not os.path.basename(command[0]).startswith("python"):
        return min(1, len(command))
    i = 1
    while i < len(command):
        word = command[i]
        if word in ("-m", "-c"):
            return min(i + 2, len(command))
        if word in ("-W", "-X"):  # options that take the next word
            i += 2
        elif word.startswith("-") and word != "-":
            i += 1
        else:
            return i + 1
    return len(command)
