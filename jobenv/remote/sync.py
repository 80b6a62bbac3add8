"""`submit --remote NAME --sync DIR`: the working directory, as a tar stream over the same
ssh connection, into a new copy under the remote's workdir (`remote receive` unpacks it).

What goes: in a git work tree, what git would commit or could (`git ls-files --cached
--others --exclude-standard`: .gitignore honoured, .git itself left out); elsewhere every
file.  Never a virtual environment (a directory holding pyvenv.cfg) nor a .git directory.
Each sync is a new directory (`<workdir>/<name>-<time>`), so a job's record (its cwd) names
the exact copy it ran from.
"""
from __future__ import annotations

import os
import subprocess
import tarfile
import time
from typing import IO, List, Mapping

from jobenv.core.errors import BadInput
from jobenv.remote.remotes import Remote


def _is_venv(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def files(root: str) -> List[str]:
    """The paths (relative to `root`) that the copy holds, sorted."""
    p = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, stdin=subprocess.DEVNULL)
    if p.returncode == 0:
        listed = [os.fsdecode(x) for x in p.stdout.split(b"\0") if x]
        venvs = {d for d in {x.split("/", 1)[0] for x in listed if "/" in x} if _is_venv(os.path.join(root, d))}
        return sorted(x for x in listed if x.split("/", 1)[0] not in venvs
                      and os.path.lexists(os.path.join(root, x)))
    out: List[str] = []
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != ".git" and not _is_venv(os.path.join(d, x)))
        rel = os.path.relpath(d, root)
        out += [os.path.normpath(os.path.join(rel, n)) for n in names]
    return sorted(out)


def target(r: Remote, root: str) -> str:
    """The new copy's path there."""
    name = os.path.basename(os.path.abspath(root)) or "root"
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:64]
    return f"{r.workdir.rstrip('/')}/{safe}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 100000}"


def writer(root: str, names: List[str]):  # type: ignore[no-untyped-def]
    """What feeds `remote receive` its tar stream (gzip)."""
    def feed(pipe: IO[bytes]) -> None:
        try:
            with tarfile.open(fileobj=pipe, mode="w|gz", format=tarfile.PAX_FORMAT) as tar:
                for n in names:
                    tar.add(os.path.join(root, n), arcname=n, recursive=False)
        except BrokenPipeError:
            pass  # the remote side ended first: its message and code tell why
    return feed


def sync(env: Mapping[str, str], r: Remote, root: str) -> str:
    """Copy `root` there; the copy's path."""
    from jobenv.remote.ssh import call

    if not os.path.isdir(root):
        raise BadInput(f"--sync {root}: not a directory")
    root = os.path.abspath(root)
    dest = target(r, root)
    rc = call(env, r, "receive", {"dir": dest}, feed=writer(root, files(root)))
    if rc != 0:
        raise BadInput(f"--sync: copying {root} to remote {r.name} failed (exit {rc})")
    return dest
