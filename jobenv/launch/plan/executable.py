"""The `launch` program: `launch ARGS` = `jobenv launch -- ARGS`, as a file on PATH.

A shell function is invisible to `timeout 600 launch ...`, `nohup launch ...` and to child
scripts, so `jobenv save` also writes a tiny POSIX sh program to `$JOBENV_HOME/bin/launch`
and the restore plan puts that directory first on PATH.  It runs the interpreter that
saved the job by absolute path, with jobenv's own directory first on sys.path (instead of
the current directory), so neither PATH nor PYTHONPATH nor the user's cwd can swap it.
The job is the restored shell's (`JOBENV_JOBID`), else `jobenv launch`'s default choice.
"""
from __future__ import annotations

import os
import sys

import jobenv

from jobenv.store.paths import LAUNCH_PROGRAM, bin_dir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional

NAME = LAUNCH_PROGRAM


def program_text(python: str = sys.executable, package_parent: Optional[str] = None) -> str:
    from jobenv.core.interpreter import code_argv
    from jobenv.core.quoting import quote

    parent = package_parent or os.path.dirname(os.path.dirname(os.path.abspath(jobenv.__file__)))
    code = ("from jobenv.launchflow import run as f; rc = f(sys.argv[1:]); "
            "from jobenv.__main__ import main; sys.exit(main(sys.argv[1:]) if rc is None else rc)")
    run = "exec " + " ".join(quote(a) for a in code_argv(python, code, pin=parent))
    return ("#!/bin/sh\n"
            "# Written by `jobenv save`: `launch ARGS` runs `jobenv launch -- ARGS` for the restored job.\n"
            f'if [ -n "${{JOBENV_JOBID-}}" ]; then {run} launch --job "$JOBENV_JOBID" -- "$@"; fi\n'
            f'{run} launch -- "$@"\n')


def install(environ: Mapping[str, str], text: Optional[str] = None) -> str:
    """Write `launch` (0755, atomically, only when it changed); return its path."""
    from jobenv.store.files import check_safe

    d = bin_dir(environ)
    os.makedirs(d, mode=0o700, exist_ok=True)
    check_safe(d, is_dir=True)  # it goes first on PATH: nobody else may write there
    path = os.path.join(d, NAME)
    text = text or program_text()
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return path
    except (OSError, UnicodeDecodeError):
        pass
    from jobenv.core.atomic import write_atomic

    write_atomic(path, text.encode("utf-8"), mode=0o755)
    return path
