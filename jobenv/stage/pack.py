"""Pack an environment once into a single archive in the store, keyed by its manifest.

Every host then reads one file (sequentially) from the shared file system instead of
opening and stat-ing tens of thousands.  While the bytes go into the archive they are
searched for the environment's own prefix: the list of files that mention it (and
whether they are text or binary) travels with the archive, so each host rewrites only
those.  The environment is walked again afterwards: one that changed while it was being
packed is refused rather than staged half old, half new.
"""
from __future__ import annotations

import json
import os
import tarfile
import time
from typing import BinaryIO, Callable, Dict, List, Optional, Tuple

from . import manifest
from .manifest import Entry, Env, EnvError

CHUNK = 1 << 20


def stage_dir(jobenv_home: str) -> str:
    d = os.path.join(jobenv_home, "stage")
    for p in (jobenv_home, d):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
    return d


def old_roots(env: Env) -> Dict[str, List[str]]:
    """The spellings of each tree's root that files may contain (path as given and resolved)."""
    if env.kind == "dir":
        return {}  # data are copied byte for byte: no path inside is rewritten
    roots = {"env": [env.prefix]}
    if env.base_shared and env.base:
        roots["base"] = [env.base]
    for paths in roots.values():
        real = os.path.realpath(paths[0])
        if real != paths[0]:
            paths.append(real)
    return roots


class _Scan:
    """Reads a file for tarfile and notes whether it holds a NUL byte or any needle."""

    def __init__(self, f: BinaryIO, needles: List[bytes]) -> None:
        self.f, self.needles = f, needles
        self.keep = max(len(n) for n in needles) - 1
        self.tail, self.found, self.nul = b"", False, False

    def read(self, n: int = -1) -> bytes:
        data: bytes = self.f.read(n)
        if data and not (self.found and self.nul):
            window = self.tail + data
            self.nul = self.nul or b"\0" in data
            self.found = self.found or any(nd in window for nd in self.needles)
            self.tail = window[-self.keep:] if self.keep else b""
        return data


def _member(e: Entry) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(f"{e.tree}/{e.rel}" if e.rel else e.tree)
    ti.mode, ti.mtime, ti.uname, ti.gname, ti.uid, ti.gid = e.mode, e.mtime // 10**9, "", "", 0, 0
    if e.kind == "d":
        ti.type = tarfile.DIRTYPE
    elif e.kind == "l":
        ti.type, ti.linkname = tarfile.SYMTYPE, e.link
    else:
        ti.size = e.size
    return ti


def write_archive(env: Env, items: List[Entry], path: str,
                  progress: Optional[Callable[[int], object]] = None) -> List[Tuple[str, str]]:
    """Write the tar at `path`; return [(member, "text"|"binary")] of files naming a root."""
    roots = old_roots(env)
    needles = [r.encode("utf-8", "surrogateescape") for paths in roots.values() for r in paths]
    relocate: List[Tuple[str, str]] = []
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT, bufsize=CHUNK) as tar:
        for e in items:
            ti = _member(e)
            if e.kind != "f":
                if e.kind == "l" and any(e.link.startswith(r) for r in needles_str(roots)):
                    relocate.append((ti.name, "link"))
                tar.addfile(ti)
                continue
            src = os.path.join(env.prefix if e.tree == "env" else str(env.base), e.rel)
            try:
                f = open(src, "rb")
            except OSError as exc:
                raise EnvError(f"cannot read {src}: {exc.strerror}") from None
            with f:
                st = os.fstat(f.fileno())
                if st.st_size != e.size or st.st_mtime_ns != e.mtime:
                    raise EnvError(f"environment changed while packing: {src}")
                if e.rel.endswith(".pyc") or not needles:  # marshalled paths, data: never rewritten
                    tar.addfile(ti, f)
                else:
                    scan = _Scan(f, needles)
                    tar.addfile(ti, scan)
                    if scan.found:
                        relocate.append((ti.name, "binary" if scan.nul else "text"))
            if progress:
                progress(e.size)
    return relocate


def needles_str(roots: Dict[str, List[str]]) -> List[str]:
    return [r for paths in roots.values() for r in paths]


def pack(env: Env, items: List[Entry], key: str, sdir: str,
         progress: Optional[Callable[[int], object]] = None) -> Tuple[str, str, bool]:
    """(archive path, sidecar path, packed now?); an archive for `key` is reused as is."""
    name = key[:16]
    archive, side = os.path.join(sdir, name + ".tar"), os.path.join(sdir, name + ".json")
    if os.path.exists(side) and os.path.exists(archive):
        _add_hash(archive, side)
        return archive, side, False
    tmp = os.path.join(sdir, f".{name}.tmp.{os.getpid()}")
    try:
        t = time.time()
        relocate = write_archive(env, items, tmp, progress)
        after = manifest.entries(env)
        if manifest.digest(after) != key:
            where = manifest.first_difference(items, after)
            raise EnvError(f"environment {env.prefix} changed while packing ({where}); try again when it is idle")
        nfiles, nbytes = manifest.summary(items)
        meta = {"version": 1, "key": key, "source": env.prefix, "kind": env.kind, "base": env.base,
                "base_fs": env.base_fs, "base_staged": env.base_shared, "pyver": env.pyver,
                "roots": old_roots(env), "entries": nfiles, "core_entries": manifest.core_count(items), "bytes": nbytes,
                "copy_digest": manifest.digest(items, whole_seconds=True),
                "archive_bytes": os.path.getsize(tmp), "archive_sha256": file_sha256(tmp), "relocate": relocate,
                "pack_seconds": round(time.time() - t, 3), "created_at": time.time()}
        os.replace(tmp, archive)
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, side)
    except BaseException:
        _unlink(tmp)
        raise
    return archive, side, True


def prune(sdir: str, source: str, keep: Optional[str]) -> List[str]:
    """Remove archives of `source` other than `keep` (the store holds one per environment)."""
    gone = []
    for name in os.listdir(sdir):
        if not name.endswith(".json") or name.startswith("."):
            continue
        path = os.path.join(sdir, name)
        try:
            with open(path) as f:
                meta = json.load(f)
        except (OSError, ValueError):
            continue
        if meta.get("source") == source and meta.get("key") != keep:
            _unlink(path[:-5] + ".tar")
            _unlink(path)
            gone.append(path)
    return gone


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def file_sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for data in iter(lambda: f.read(CHUNK), b""):
            h.update(data)
    return h.hexdigest()


def _add_hash(archive: str, side: str) -> None:
    """A sidecar written before archives were relayed gets the archive's SHA-256 (once)."""
    try:
        with open(side) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return
    if not isinstance(meta, dict) or "archive_sha256" in meta:
        return
    meta["archive_sha256"], meta["archive_bytes"] = file_sha256(archive), os.path.getsize(archive)
    tmp = f"{side}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(meta, f)
    os.replace(tmp, side)
