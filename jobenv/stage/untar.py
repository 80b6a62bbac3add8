"""Unpacking the stage's archive into a directory, and removing what it made, without trusting
either: every member must land inside the copy's `env` or `base` tree (a name with `..`, an
absolute one, or a device is refused, and the whole archive with it), files are created
O_EXCL, and removal never follows a symbolic link.

Apart from jobenv.stage.worker because it is the one part that writes what an archive says:
the worker decides whether to stage, verifies and renames into place; this module only turns
a tar stream into files and takes them away again.  Stdlib only (the worker runs anywhere).
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
import tarfile
import time
from typing import Callable

from .manifest import BASE_DIR

CHUNK = 1 << 20


class Failure(Exception):
    pass


def rmtree(path: str) -> None:
    """Remove a tree this worker made, read-only directories included, without ever
    following a symbolic link: a link (at the top or inside) is removed, not entered, and
    only real directories are made writable (chmod follows links, so each is lstat-ed)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
        except OSError:
            pass
        return

    def real_dir(p: str) -> bool:
        try:
            return stat.S_ISDIR(os.lstat(p).st_mode)
        except OSError:
            return False

    _chmod_own(path)
    for dirpath, dirnames, _ in os.walk(path):  # does not descend into links to directories
        for d in dirnames:
            full = os.path.join(dirpath, d)
            if real_dir(full):
                _chmod_own(full)
    shutil.rmtree(path, onerror=lambda func, p, exc: None)  # fd-based: does not follow links


def _chmod_own(path: str) -> None:
    try:
        os.chmod(path, 0o700)
    except OSError:
        pass


def cause(exc: OSError, where: str) -> str:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left in {where}"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"cannot write {exc.filename or where}: {exc.strerror}"
    return f"{exc.strerror or exc} ({exc.filename or where})"


def dest(tmp: str, name: str) -> str:
    tree, _, rel = name.partition("/")
    if tree not in ("env", "base") or name.startswith("/") or ".." in rel.split("/"):
        raise Failure(f"archive member {name!r} is outside the environment; refusing the archive")
    root = tmp if tree == "env" else os.path.join(tmp, BASE_DIR)
    return os.path.join(root, rel) if rel else root


def unpack(archive: str, tmp: str, progress: Callable[[int], None]) -> int:
    """Unpack `archive` (read once, in order) into `tmp`; the bytes written, told to `progress`
    about once a second.  Directories get their modes last (a read-only one is filled first)."""
    dirs = []
    written, last = 0, time.time()
    with tarfile.open(archive, "r|", bufsize=CHUNK) as tar:
        for m in tar:
            path = dest(tmp, m.name)
            if m.isdir():
                os.makedirs(path, 0o700, exist_ok=True)
                dirs.append((path, m.mode))
            elif m.issym():
                os.symlink(m.linkname, path)
            elif m.isreg():
                src = tar.extractfile(m)
                assert src is not None
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(src, out, CHUNK)
                    os.fchmod(out.fileno(), m.mode & 0o7777)
                os.utime(path, (m.mtime, m.mtime))
                written += m.size
                if time.time() - last > 1.0:
                    last = time.time()
                    progress(written)
            else:
                raise Failure(f"archive member {m.name!r} has an unexpected type")
    for path, mode in reversed(dirs):
        os.chmod(path, mode & 0o7777)
    return written
