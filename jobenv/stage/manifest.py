"""What a Python environment is made of: its kind, its base interpreter, and a manifest.

The manifest lists every entry of the trees to stage (path, type, mode, size, mtime in
nanoseconds, symlink target) in a fixed order; its SHA-256 names the archive in the store
and the copy on every host, so "unchanged" is a string comparison, not a re-read of the
environment's bytes.  Nanoseconds, because a file rewritten with the same size within
the second it was staged is a change (whole seconds called it unchanged).  A tar keeps
whole seconds only, so an unpacked copy is checked against the digest in whole seconds.  Stdlib only: the per-host worker imports this module too.
"""
from __future__ import annotations

import hashlib
import os
import stat
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Tuple

# File systems whose metadata is served over the network: an interpreter living on one
# of these is staged with the environment.  JOBENV_SHARED_FS adds types (comma list).
SHARED_FS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "fuse.beegfs", "cifs", "smb3", "smbfs", "ceph",
    "fuse.ceph", "fuse.ceph-fuse", "cephfs", "panfs", "wekafs", "glusterfs", "fuse.glusterfs",
    "dvs", "orangefs", "pvfs2", "afs", "fuse.sshfs", "9p", "virtiofs", "fuse.squashfuse_ll",
})
BASE_DIR = ".jobenv-base"  # where a staged base interpreter lives inside the copy


class EnvError(Exception):
    """Not a stageable environment (the CLI turns this into BadInput)."""


class Entry(NamedTuple):
    tree: str  # "env" or "base"
    rel: str  # path relative to the tree root, "/"-separated, "" for the root
    kind: str  # "d", "f", "l"
    mode: int
    size: int
    mtime: int  # nanoseconds
    link: str

    def line(self, whole_seconds: bool = False) -> str:
        mtime = 0 if self.kind != "f" else self.mtime // 10**9 if whole_seconds else self.mtime  # dir/link mtimes move on their own
        return f"{self.tree}\0{self.rel}\0{self.kind}\0{self.mode:o}\0{self.size}\0{mtime}\0{self.link}"


class Env(NamedTuple):
    prefix: str
    kind: str  # "venv" or "conda"
    base: Optional[str]  # the venv's base interpreter prefix
    base_fs: str  # file system type of `base` ("" when none)
    base_shared: bool
    pyver: str  # "3.11" (venv only, from pyvenv.cfg), else ""


def fs_type(path: str, mounts: str = "/proc/self/mounts") -> str:
    """The type of the file system holding `path` (longest mount point that contains it)."""
    try:
        path = os.path.realpath(path)
        with open(mounts) as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    best, kind = "", ""
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, kind = mnt, parts[2]
    return kind


def is_shared(kind: str, environ: Dict[str, str]) -> bool:
    extra = {t.strip() for t in environ.get("JOBENV_SHARED_FS", "").split(",") if t.strip()}
    return kind in SHARED_FS or kind in extra


def read_cfg(prefix: str) -> Dict[str, str]:
    out: Dict[str, str] = {}
    with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            key, eq, val = line.partition("=")
            if eq:
                out[key.strip().lower()] = val.strip()
    return out


def inspect(prefix: str, environ: Dict[str, str], base: str = "auto") -> Env:
    """Classify `prefix` (venv: pyvenv.cfg; conda: conda-meta/) and find its base interpreter.

    base: "auto" stages a venv's base interpreter when it lives on a shared file system,
    "yes" always, "no" never.
    """
    prefix = os.path.abspath(prefix)
    if not os.path.isdir(prefix):
        raise EnvError(f"{prefix}: not a directory")
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        return Env(prefix, "conda", None, "", False, "")
    if not os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        raise EnvError(f"{prefix} is not a Python environment (no pyvenv.cfg, no conda-meta/)")
    try:
        cfg = read_cfg(prefix)
    except OSError as exc:
        raise EnvError(f"{prefix}/pyvenv.cfg: {exc.strerror}") from None
    home = cfg.get("home", "")
    if not home or not os.path.isdir(home):
        raise EnvError(f"{prefix}/pyvenv.cfg: base interpreter directory {home!r} does not exist")
    home = os.path.abspath(home)
    bprefix = os.path.dirname(home) if os.path.basename(home) == "bin" else home
    ver = ".".join(cfg.get("version", cfg.get("version_info", "")).split(".")[:2])
    kind = fs_type(bprefix)
    shared = base == "yes" or (base == "auto" and is_shared(kind, environ))
    if shared and (not ver or not os.path.isdir(os.path.join(bprefix, "lib", f"python{ver}"))):
        raise EnvError(f"cannot stage base interpreter {bprefix}: no lib/python{ver or '?'} there")
    return Env(prefix, "venv", bprefix, kind, shared, ver)


def inspect_dir(path: str) -> Env:
    """Any directory (a data set, a checkpoint): copied as it is, nothing relocated."""
    prefix = os.path.abspath(path)
    if not os.path.isdir(prefix):
        raise EnvError(f"{prefix}: not a directory")
    return Env(prefix, "dir", None, "", False, "")


def _base_filter(env: Env) -> Callable[[str], bool]:
    """Which parts of a base prefix a venv needs: the interpreter, libpython, the stdlib
    (without its test suite), and site-packages only for --system-site-packages venvs."""
    ver = env.pyver
    cfg = read_cfg(env.prefix)
    system_site = cfg.get("include-system-site-packages", "false").lower() == "true"

    def keep(rel: str) -> bool:
        top = rel.split("/")
        if top[0] == "bin":
            return len(top) == 1 or top[1] in (f"python{ver}", "python3", "python")
        if top[0] == "lib":
            if len(top) == 1 or top[1].startswith(f"libpython{ver}") or top[1].startswith("libpython3.so"):
                return True
            if top[1] != f"python{ver}":
                return False
            if len(top) > 2 and top[2] in ("test", "idlelib", "tkinter", "turtledemo"):
                return False
            return system_site or len(top) < 3 or top[2] != "site-packages"
        return False

    return keep


def walk(tree: str, root: str, keep: Optional[Callable[[str], bool]] = None) -> Iterator[Entry]:
    """Every entry under `root` (itself first, then depth-first in name order) that `keep`
    takes, as the manifest lists them; also how a node's worker re-reads its copy."""
    stack = [""]
    while stack:
        rel = stack.pop()
        path = os.path.join(root, rel) if rel else root
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise EnvError(f"{path} vanished while reading the environment (is it changing?)") from None
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            yield Entry(tree, rel, "l", 0, 0, 0, os.readlink(path))
        elif stat.S_ISREG(st.st_mode):
            yield Entry(tree, rel, "f", mode, st.st_size, st.st_mtime_ns, "")
        elif stat.S_ISDIR(st.st_mode):
            yield Entry(tree, rel, "d", mode, 0, 0, "")
            try:
                names = os.listdir(path)
            except OSError as exc:
                raise EnvError(f"cannot read {path}: {exc.strerror}") from None
            for name in sorted(names, reverse=True):
                child = f"{rel}/{name}" if rel else name
                if keep is None or keep(child):
                    stack.append(child)
        # sockets, fifos and devices have no place in an environment: skipped


def entries(env: Env) -> List[Entry]:
    """Every entry to stage, env tree first, in a deterministic order."""
    out = list(walk("env", env.prefix))
    if env.base_shared and env.base:
        out += list(walk("base", env.base, _base_filter(env)))
    return out


def digest(items: List[Entry], whole_seconds: bool = False) -> str:
    """The manifest's SHA-256; `whole_seconds` is what an unpacked copy can match."""
    h = hashlib.sha256()
    for e in items:
        h.update(e.line(whole_seconds).encode("utf-8", "surrogateescape"))
        h.update(b"\n")
    return h.hexdigest()


def summary(items: List[Entry]) -> Tuple[int, int]:
    """(number of entries, bytes of regular files)."""
    return len(items), sum(e.size for e in items)


def core_count(items: List[Entry]) -> int:
    """Entries outside `__pycache__`: what a no-op re-stage counts, since Python adds
    byte-code to a copy as soon as it is used."""
    return sum(1 for e in items if "__pycache__" not in e.rel.split("/"))


def first_difference(a: List[Entry], b: List[Entry]) -> Optional[str]:
    """The first path whose entry differs between two manifests (for error messages)."""
    da = {(e.tree, e.rel): e for e in a}
    db = {(e.tree, e.rel): e for e in b}
    for key in sorted(set(da) | set(db)):
        if da.get(key) != db.get(key):
            return key[1] or "."
    return None
