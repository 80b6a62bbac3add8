"""The per-host half of `jobenv stage`: one process on every host, started by the job's
launcher.  Stdlib (and jobenv's own light modules) only, so it runs under any interpreter
that can see the store.

The stage directory is created with mkdir (0700) and must pass the store's ownership rule
(restore.check_root): one another user made first, or can write, is refused before
anything is read from or written into it.  Stage: if this host's copy passes
restore.check_copy and its entry count is right, nothing is copied.  Otherwise the one
archive is read sequentially and unpacked into a hidden temporary directory next to the copy, the result is walked and compared
with the manifest (count and hash), the prefix is rewritten where files name it, a stamp
is written, and only then is it renamed into place: `launch` never sees a half copy, and
nothing outside the target directory is touched (removal never follows a symbolic link).
Clean: remove this host's copy.

Reports are single lines `@@jobenv-stage@@ {json}` on stdout (progress, then one result).
"""
from __future__ import annotations

import json
import os
import socket
import sys
import tarfile
import time
from typing import Any, Dict, List, Mapping, Optional

from jobenv.core.errors import BadInput, JobenvError
from jobenv.core.pids import pid_alive
from jobenv.store.paths import own_dir
from . import manifest, relay, relaydir, relocate
from .manifest import BASE_DIR
from .restore import HINT, STAMP, check_copy, check_root
from .untar import Failure, cause, dest, rmtree, unpack

MARK = "@@jobenv-stage@@ "


def emit(obj: Dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(obj) + "\n")
    sys.stdout.flush()


def default_root(environ: Mapping[str, str]) -> str:
    """Node-local temporary storage, per user: JOBENV_STAGE_DIR, else $TMPDIR, else /tmp.
    A relative one is refused (BadInput): it would name a different directory in every
    process's cwd, and the record must name the copy from anywhere."""
    if environ.get("JOBENV_STAGE_DIR"):
        var, value = "JOBENV_STAGE_DIR", environ["JOBENV_STAGE_DIR"]
        root = value
    else:
        user = environ.get("USER") or environ.get("LOGNAME") or str(os.getuid())
        var, value = "TMPDIR", environ.get("TMPDIR") or "/tmp"
        root = os.path.join(value, f"jobenv-{user}")
    if not os.path.isabs(root):
        raise BadInput(f"{var}={value!r} is not an absolute path; give the stage directory as one "
                       "(JOBENV_STAGE_DIR or --to DIR)")
    return root


def stage_root(spec: Dict[str, Any], host: str) -> str:
    """This host's stage directory: --to (host_path), else default_root here (TMPDIR is per node)."""
    try:
        return host_path(spec["to"], host) if spec.get("to") else default_root(os.environ)
    except JobenvError as exc:
        raise Failure(exc.message) from None


def host_path(template: str, host: str) -> str:
    """A --to template for one host: `%h` is the host name."""
    return template.replace("%h", host)


def copy_walk(copy: str) -> List[manifest.Entry]:
    """The manifest of a copy as it is on disk (stamp and relocation aside)."""
    top = set(os.listdir(copy))
    items = list(manifest.walk("env", copy, lambda rel: rel not in (BASE_DIR, STAMP)))
    if BASE_DIR in top:
        items += list(manifest.walk("base", os.path.join(copy, BASE_DIR)))
    return items


def _private_root(root: str) -> None:
    """Create the stage directory (mkdir, 0700) or find it yours and private, or fail."""
    try:
        own_dir(root, "stage directory", HINT)
    except JobenvError as exc:
        raise Failure(exc.message) from None
    except OSError as exc:
        raise Failure(cause(exc, root)) from None


def stage(spec: Dict[str, Any], host: str, meta: Dict[str, Any]) -> Dict[str, Any]:
    """Stage this host's copy; in a broadcast (jobenv.stage.relay) also relay the archive on
    to this host's children, whether or not this host needed a copy itself."""
    root = stage_root(spec, host)
    copy = os.path.join(root, spec["name"])
    _private_root(root)
    node = None
    if not spec.get("dry_run"):
        try:
            node = relay.join(spec, meta, host, root)
        except (relaydir.RelayError, OSError) as exc:
            raise Failure(f"relay: {exc}") from None
    try:
        out = _stage(spec, host, meta, root, copy, node)
    finally:
        done = node.finish() if node is not None else None
    if done is not None:
        out["relay"] = done
    return out


def _stage(spec: Dict[str, Any], host: str, meta: Dict[str, Any], root: str, copy: str,
           node: Optional[relay.Node]) -> Dict[str, Any]:
    key = meta["key"]
    if check_copy(copy, key)[0] == "ok":
        try:
            count = manifest.core_count(copy_walk(copy))
        except (OSError, manifest.EnvError):
            count = -1
        if count == meta["core_entries"]:
            return {"prefix": copy, "unchanged": True, "entries": count, "bytes": 0}
    if spec.get("dry_run"):
        return {"prefix": copy, "unchanged": False, "would_copy": True, "bytes": 0}
    vfs = os.statvfs(root)
    spool = int(meta["archive_bytes"]) if node is not None else 0  # the received archive, beside the copy
    free, need = vfs.f_bavail * vfs.f_frsize, int(meta["bytes"] * 1.05) + spool + (16 << 20)
    if free < need:
        raise Failure(f"no space in {root}: the copy needs {need >> 20} MiB, {free >> 20} MiB free")
    _leftovers(root, spec["name"], host)
    tmp = os.path.join(root, f".{spec['name']}.tmp.{host}.{os.getpid()}")
    t = time.time()
    try:
        os.mkdir(tmp, 0o700)
        nbytes = unpack(node.fetched() if node is not None else spec["archive"], tmp,
                        lambda n: emit({"event": "progress", "host": host, "bytes": n}))
        got, want = copy_walk(tmp), meta.get("copy_digest", key)  # whole seconds: what a tar keeps
        if len(got) != meta["entries"] or manifest.digest(got, whole_seconds=True) != want:
            raise Failure(f"verification failed: {len(got)} of {meta['entries']} entries, "
                          f"hash {manifest.digest(got, whole_seconds=True)[:12]} != {want[:12]}")
        pairs = relocate.mapping(meta["roots"], copy, BASE_DIR)
        counts = relocate.relocate(meta["relocate"], lambda name: dest(tmp, name), pairs, meta["kind"])
        info = {"key": key, "source": meta["source"], "kind": meta["kind"], "entries": len(got),
                "host": host, "staged_at": time.time(), "base_staged": meta.get("base_staged", False),
                "relocated": counts}
        with open(os.path.join(tmp, STAMP), "w") as f:
            json.dump(info, f)
        # the copy's top stays 0700 as made: the user's ranks alone run it (no chmod past the umask)
        old = None
        if os.path.lexists(copy):
            old = os.path.join(root, f".{spec['name']}.old.{host}.{os.getpid()}")
            os.rename(copy, old)
        os.rename(tmp, copy)
        if old:
            rmtree(old)
    except OSError as exc:
        rmtree(tmp) if os.path.isdir(tmp) else None
        raise Failure(cause(exc, root)) from None
    except (Failure, relocate.RelocError, relaydir.RelayError, tarfile.TarError, manifest.EnvError) as exc:
        rmtree(tmp) if os.path.isdir(tmp) else None
        raise Failure(str(exc)) from None
    return {"prefix": copy, "unchanged": False, "entries": len(got), "bytes": nbytes,
            "seconds": round(time.time() - t, 3), "relocated": counts}


def _leftovers(root: str, name: str, host: str, all_of_them: bool = False) -> None:
    """Remove temporary and old copies left by killed stages of this env on this host."""
    for entry in os.listdir(root):
        for kind in ("tmp", "old", "spool"):
            head = f".{name}.{kind}.{host}."
            pid = entry[len(head):]
            if entry.startswith(head) and pid.isdigit() and (all_of_them or not pid_alive(int(pid))):
                rmtree(os.path.join(root, entry))


def clean(spec: Dict[str, Any], host: str) -> Dict[str, Any]:
    root = stage_root(spec, host)
    copy = os.path.join(root, spec["name"])
    removed = False
    try:
        check_root(root)
    except JobenvError as exc:
        raise Failure(f"{exc.message}; left alone") from None
    if os.path.lexists(copy):
        if spec.get("dry_run"):
            return {"prefix": copy, "removed": False, "would_remove": True}
        if not os.path.isfile(os.path.join(copy, STAMP)):
            raise Failure(f"{copy} is not a staged copy (no {STAMP}); left alone")
        gone = os.path.join(root, f".{spec['name']}.old.{host}.{os.getpid()}")
        try:
            os.rename(copy, gone)
            rmtree(gone)
        except OSError as exc:
            raise Failure(cause(exc, root)) from None
        removed = True
    if os.path.isdir(root):
        _leftovers(root, spec["name"], host)
    return {"prefix": copy, "removed": removed}


def main(argv: List[str]) -> int:
    host = socket.gethostname()  # not JOBENV_HOSTNAME: the launcher copies one host's value to all
    out: Dict[str, Any] = {"event": "done", "host": host}
    try:
        spec = json.loads(argv[0])
        if spec.get("clean"):
            out.update(clean(spec, host))
        else:
            with open(spec["sidecar"]) as f:
                meta = json.load(f)
            out.update(stage(spec, host, meta))
        out["ok"] = True
    except Failure as exc:
        out.update(ok=False, error=str(exc))
    except OSError as exc:
        out.update(ok=False, error=cause(exc, "the store"))
    emit(out)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
