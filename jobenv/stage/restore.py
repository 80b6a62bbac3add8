"""The staged copy in a restored shell and in every rank.

`restore_items` feeds the restore plan (plan.build's `extra` items): on a host with a verified
copy, its `bin` goes first on PATH and VIRTUAL_ENV / CONDA_PREFIX name it.  It runs on
the `jobenv get` path, in every new shell: one small file read, no heavy imports.
`rank_prefix` is the argv `jobenv launch` puts before the user's command so that each
rank, on its own host, runs that host's copy (paths may differ per host: `--to .../%h`).

A copy is code the user's ranks run, on a node another user may share, so it is trusted
by one rule (`check_copy`; rankenv.sh applies the same rule per rank): every directory
above the stage directory is root's or yours and not writable by others unless sticky
(the store's ssh-style check), the stage directory and the copy are your own real
directories not writable by group/others, and the copy's stamp carries the recorded key.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, Tuple

    from jobenv.store.record import JobRecord

STAMP = ".jobenv-stage.json"  # written last in a verified copy (stage.worker); its presence marks one
HINT = "stage to a directory of your own (--to DIR or JOBENV_STAGE_DIR)"


def check_root(root: str) -> None:
    """Raise JobenvError unless the stage directory `root` (if it exists) and every one
    above it pass the store's rule (store.paths): nobody but you could put a copy there."""
    from jobenv.core.trust import check_ancestors
    from jobenv.store.paths import check_safe

    check_ancestors(root, "the stage directory", HINT)
    check_safe(root, True, "stage directory", HINT)


def check_copy(prefix: str, key: str) -> Tuple[str, str, Dict[str, Any]]:
    """(status, why, stamp) of the staged copy at `prefix`, recorded with manifest `key`:
    "ok" (why is ""), "unsafe" (another user could have made or changed it: never run it),
    "missing" or "stale" (not the recorded copy)."""
    from jobenv.core.errors import JobenvError
    from jobenv.store.paths import check_safe

    try:
        check_root(os.path.dirname(prefix))
        check_safe(prefix, True, "staged copy", HINT)
    except JobenvError as exc:
        return "unsafe", exc.message, {}
    stamp = read_stamp(prefix)
    if stamp is None:
        return "missing", f"staged copy {prefix} is gone", {}
    if stamp.get("key") != key:
        return "stale", f"staged copy {prefix} is not the recorded one", stamp
    return "ok", "", stamp


def _entry(record: JobRecord, host: str) -> Optional[Tuple[str, Dict[str, Any]]]:
    from jobenv.core.hostlist import host_index

    staged = getattr(record, "staged", None) or {}
    names = list(staged)
    i = host_index(names, host)
    return None if i is None else (names[i], staged[names[i]])


def read_stamp(prefix: str) -> Optional[Dict[str, Any]]:
    from jobenv.core.jsonread import loads

    try:
        with open(os.path.join(prefix, STAMP), "rb") as f:
            data = loads(f.read().decode("utf-8", "surrogateescape"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def template(record: JobRecord) -> Optional[str]:
    """One path for every host, `%h` standing for the host name; None if there is none."""
    staged = getattr(record, "staged", None) or {}
    forms = {e["prefix"].replace(h, "%h") if h in e["prefix"] else e["prefix"] for h, e in staged.items()}
    return forms.pop() if len(forms) == 1 else None


def restore_items(record: JobRecord, environ: Mapping[str, str], host: str) -> Tuple[Dict[str, str], List[str], List[str]]:
    """(variables to set, PATH entries to put first, warnings) for `host`."""
    found = _entry(record, host)
    if found is None:
        return {}, [], []
    name, entry = found
    prefix = entry["prefix"]
    status, why, stamp = check_copy(prefix, entry["manifest"])
    if status != "ok":
        return {}, [], [f"{why} on {name}; using the shared environment; run `jobenv stage`"]
    var = "CONDA_PREFIX" if stamp.get("kind") == "conda" else "VIRTUAL_ENV"
    return {var: prefix}, [os.path.join(prefix, "bin")], []


def rank_prefix(record: JobRecord) -> List[str]:
    """argv to put before a rank's command: `sh rankenv.sh TEMPLATE KEY` when the job has
    staged copies at one path template, all with one manifest key (rankenv.sh checks each
    host's copy against it)."""
    staged = getattr(record, "staged", None) or {}
    keys = {e["manifest"] for e in staged.values()}
    tmpl = template(record)
    if tmpl is None or len(keys) != 1:
        return []
    return ["/bin/sh", os.path.join(os.path.dirname(os.path.abspath(__file__)), "rankenv.sh"), tmpl, keys.pop()]


def check(record: JobRecord, host: str) -> Tuple[str, str]:
    """For `jobenv doctor`: ("ok" | "stale" | "missing" | "unsafe" | "none", one line of detail).

    Walks the source environment (metadata only) to see whether it changed since staging.
    """
    found = _entry(record, host)
    if found is None:
        return "none", "no staged environment on this host (`jobenv stage` copies it to local disk)"
    name, entry = found
    prefix = entry["prefix"]
    status, why, stamp = check_copy(prefix, entry["manifest"])
    if status != "ok":
        return status, f"{why} on {name}; run `jobenv stage`"
    from . import manifest

    try:
        env = manifest.inspect(str(stamp.get("source")), dict(os.environ),
                               "yes" if stamp.get("base_staged") else "no")
        now = manifest.digest(manifest.entries(env))
    except manifest.EnvError as exc:
        return "stale", f"cannot read the source environment: {exc}"
    if now != entry["manifest"]:
        return "stale", f"{stamp.get('source')} changed since it was staged to {prefix}; run `jobenv stage`"
    return "ok", f"{prefix} matches {stamp.get('source')} ({stamp.get('entries')} entries)"
