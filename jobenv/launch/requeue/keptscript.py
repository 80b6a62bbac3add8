"""The batch script a resubmission runs: a copy of the script the scheduler ran, kept in
the user's store, never the file at the path the job was submitted from.

That path is only where the script came from: after the submission it may have been
edited, deleted, or (in a shared directory) replaced by another user's file, which a
resubmission would then run as the job's owner.  So `jobenv launch --requeue` keeps a copy
of the job's script, as its scheduler holds it (the scheduler file's `Requeue.script`:
Slurm's `scontrol write batch_script`, PBS's copy on the mother superior), when it starts,
before any rank runs; a script `jobenv submit` wrote (in the store) stands in where the
scheduler's copy cannot be read.  The copy is taken once per job: the first one stays (a
requeued job's second launch finds it and keeps it), and `bring_back` takes it then if the
start could not.  Where none can be had the job is not resubmitted, and one line says why.

    $JOBENV_HOME/scripts/<key>.sh      the copy (0600, in a 0700 directory of the user's own)
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Optional, Tuple

    from jobenv.store.record import JobRecord

MAX_SCRIPT = 64 << 20


def scripts_dir(env: Mapping[str, str]) -> str:
    from jobenv.store.paths import home

    return os.path.join(home(env), "scripts")


def path_for(rec: JobRecord, env: Mapping[str, str]) -> str:
    from jobenv.store.files import key_for

    return os.path.join(scripts_dir(env), key_for(rec.scheduler, rec.jobid) + ".sh")


def _kept(path: str, what: str = "the kept batch script") -> str:
    """Why the file at `path` cannot be used ("" when it can): a regular file of ours that
    nobody else can write, in a directory that is ours alone (storepath's rules)."""
    import stat

    from jobenv.core.errors import BadRecord
    from jobenv.core.trust import check_ancestors
    from jobenv.store.paths import check_safe

    try:
        check_ancestors(path, what, last=True)
        check_safe(os.path.dirname(path), is_dir=True, what=f"the directory of {what}")
        check_safe(path, is_dir=False, what=what)
        st = os.lstat(path)
    except BadRecord as exc:
        return str(exc)
    except OSError as exc:
        return f"{what} {path} cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return f"{what} {path} is not a regular file"
    return ""


def _from_submit(rec: JobRecord, env: Mapping[str, str]) -> Optional[bytes]:
    """The script `jobenv submit` wrote for this job, in the store (jobenv.store.submissions)."""
    from jobenv.store import submissions
    from jobenv.core.errors import JobenvError
    from jobenv.core.readfile import read_bytes

    try:
        found = submissions.record_path(env, rec.scheduler, rec.jobid)
        if not os.path.lexists(found) or _kept(found, "the submission record"):
            return None
        sub = submissions.load(found)
        base = os.path.realpath(submissions.batch_dir(env))
        script = os.path.realpath(sub["script"])
        if sub["jobid"] != rec.jobid or os.path.commonpath([base, script]) != base or _kept(script, "the submitted script"):
            return None
        return read_bytes(script, MAX_SCRIPT)
    except (JobenvError, OSError, ValueError):
        return None


def keep(rec: JobRecord, env: Mapping[str, str]) -> Tuple[str, str]:
    """(path of the kept copy, "") or ("", why there is none).  Idempotent: a copy kept
    before is used as it is, never replaced."""
    from jobenv import schedulers
    from jobenv.core.errors import JobenvError

    req = schedulers.descriptor(rec.scheduler).requeue
    path = path_for(rec, env)
    if os.path.lexists(path):
        why = _kept(path)
        return ("", why) if why else (path, "")
    if req is None:
        return "", f"jobenv cannot resubmit a {rec.scheduler} job"
    data, why = req.script(rec.jobid, env)
    if data is None:
        data = _from_submit(rec, env)
    if data is None:
        return "", why
    try:
        _write_once(path, data)
    except (JobenvError, OSError) as exc:
        return "", f"cannot keep a copy of the batch script in {scripts_dir(env)}: {exc}"
    why = _kept(path)
    return ("", why) if why else (path, "")


def _write_once(path: str, data: bytes) -> None:
    """Write `path` whole (temp file, fsync, link), unless it exists: a concurrent launch of
    the same job that kept it first wins, and no copy is ever overwritten."""
    from jobenv.core.atomic import tmp_name
    from jobenv.store.paths import own_dir

    own_dir(os.path.dirname(path), "kept scripts' directory")
    tmp = tmp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        os.unlink(tmp)
