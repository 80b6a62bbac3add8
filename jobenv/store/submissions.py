"""What `jobenv submit` remembers: one directory per submission and one record per job.

Layout, in the store (`$JOBENV_HOME`, judged by jobenv.store.paths like the records):

    batch/<time>-<pid>/job.sh       the script (Cobalt runs this very file: it stays)
    batch/<time>-<pid>/job.out      the batch output (the script's -o)
    batch/<time>-<pid>/ranks/       each rank's log (the launch's --log-dir, unless given)
    batch/<time>-<pid>/exit         the launch's exit code, written by the script at its end
    batch/<scheduler>-<id>.json     the submission: scheduler, id, profile, paths, time

The record is written only after the scheduler gave an id, so `status`, `logs` and
`cancel` find a job by its id (store.key_for, the records' own rule).  Every file read back
is read as hostile: a regular file of bounded size, fields checked for type.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Mapping, Optional

from jobenv.store import files as store
from jobenv.core.errors import BadInput, BadRecord, NoRecord
from jobenv.store.paths import home, own_dir

MAX_RECORD = 64 << 10
_FIELDS = {"scheduler": str, "jobid": str, "profile": str, "script": str, "output": str, "error": str,
           "log_dir": str, "exit_file": str, "submitted_at": float, "command": list, "cwd": str}


def batch_dir(env: Mapping[str, str]) -> str:
    return os.path.join(home(env), "batch")


def new_dir(env: Mapping[str, str]) -> str:
    """A fresh directory of the user's own for one submission (0700, never an existing one)."""
    base = batch_dir(env)
    own_dir(os.path.dirname(base))
    own_dir(base)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    for n in range(100):
        d = os.path.join(base, f"{stamp}-{os.getpid()}" + (f"-{n}" if n else ""))
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        return d
    raise BadInput(f"cannot make a new submission directory in {base}")


def record_path(env: Mapping[str, str], scheduler: str, jobid: str) -> str:
    return os.path.join(batch_dir(env), store.key_for(scheduler, jobid) + ".json")


def save(env: Mapping[str, str], rec: Dict[str, Any]) -> str:
    path = record_path(env, rec["scheduler"], rec["jobid"])
    store.write_atomic(path, (json.dumps(rec, indent=1, sort_keys=True) + "\n").encode())
    return path


def _check(data: Any, path: str) -> Dict[str, Any]:
    if not isinstance(data, dict):
        raise BadRecord(f"submission {path}: not a JSON object", kind="corrupt")
    for key, kind in _FIELDS.items():
        val = data.get(key)
        if kind is float and isinstance(val, int) and not isinstance(val, bool):
            data[key] = val = float(val)
        if not isinstance(val, kind) or (isinstance(val, list) and not all(isinstance(a, str) for a in val)):
            raise BadRecord(f"submission {path}: field {key!r} missing or not a {kind.__name__}", kind="corrupt")
    return data


def load(path: str) -> Dict[str, Any]:
    """One submission record: a regular file of ours of bounded size, its fields checked."""
    from jobenv.core.readfile import Refused, read_bytes

    try:
        raw = read_bytes(path, MAX_RECORD)
    except Refused:
        raise BadRecord(f"submission {path}: not a regular file of at most {MAX_RECORD} bytes", kind="corrupt") from None
    try:
        return _check(json.loads(raw.decode("utf-8")), path)
    except (ValueError, RecursionError):
        raise BadRecord(f"submission {path}: not valid JSON", kind="corrupt") from None


def all_records(env: Mapping[str, str], warn: Any) -> List[Dict[str, Any]]:
    """Every readable submission, newest first; a defective one is reported, not fatal."""
    base = batch_dir(env)
    if not os.path.isdir(base):
        return []
    store.check_safe(base, is_dir=True)
    out = []
    for name in sorted(os.listdir(base)):
        if name.endswith(".json"):
            try:
                out.append(load(os.path.join(base, name)))
            except (BadRecord, OSError) as exc:
                warn(f"skipping {exc}")
    return sorted(out, key=lambda r: r["submitted_at"], reverse=True)


def matches(jobid: str, asked: str) -> bool:
    """The id, or its numeric part (PBS ids carry their server: `123` names `123.server`)."""
    return jobid == asked or jobid.split(".")[0] == asked


def find(env: Mapping[str, str], asked: Optional[str], warn: Any) -> Optional[Dict[str, Any]]:
    """The submission with that id (None: none has it); the newest when none is asked."""
    recs = all_records(env, warn)
    if asked is None:
        return recs[0] if recs else None
    hits = [r for r in recs if matches(r["jobid"], asked)]
    if len(hits) > 1:
        raise NoRecord(f"job id {asked!r} names {len(hits)} submissions ({', '.join(r['jobid'] for r in hits)}): "
                       "give the whole id")
    return hits[0] if hits else None
