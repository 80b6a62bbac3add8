"""Capture a running job from outside it: `jobenv save --job ID` on a login node, in a tmux
pane, in any shell that never saw the job's variables.

The scheduler's own description of the job (`scontrol show job -d`, `qstat -f -F json`,
`qstat -lf`: each scheduler file's `Outside`) replaces this shell's environment as the
source of the record.  Its output is hostile input like any other: it is bounded, parsed
by pure functions, and the job must be this user's and running.  With no ID the job is
the one this user runs on this host (one, or a clear error naming them all).
"""
from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional, Tuple

from jobenv import schedulers
from jobenv.core.errors import BadInput, JobEnded, JobenvError, NoRecord, one_line
from jobenv.schedulers.base import Capture, Outside, run_query

# Which scheduler a shell outside any job asks, when --scheduler does not say: Slurm first
# (its torque wrappers install a `qstat` too), then PBS (Cobalt's `qstat` takes -l, PBS's -F).
ORDER = ("slurm", "pbs", "cobalt")
MAX_OUTPUT = 16 << 20  # one job's description is a few KiB; all jobs of a site a few MiB
TIMEOUT = 20.0


def scheduler_for(env: Mapping[str, str], forced: Optional[str]) -> str:
    """--scheduler, else the first of ORDER whose command is on PATH."""
    from jobenv.schedulers.base import on_path

    if forced:
        if _outside(forced) is None:
            raise BadInput(f"--job: jobenv cannot capture a {forced} job from outside it "
                           f"(it can for {', '.join(ORDER)})")
        return forced
    for name in ORDER:
        o = _outside(name)
        if o is not None and on_path(o.show[0], env.get("PATH", "")):
            return name
    raise BadInput("--job: no scheduler command here (scontrol, qstat) to ask about the job; "
                   "run it where the scheduler's commands are, or give --scheduler")


def _outside(name: str) -> Optional[Outside]:
    return schedulers.descriptor(name).outside if name in schedulers.NAMES else None


def _ask(argv: List[str], env: Mapping[str, str], timeout: float) -> Tuple[int, str]:
    res = run_query(argv, env, timeout)
    if res is None:
        raise JobenvError(f"`{' '.join(argv)}` did not answer within {timeout:g} s (or is not installed)")
    if len(res[1]) > MAX_OUTPUT:
        raise BadInput(f"`{argv[0]}` answered with {len(res[1]):,} characters, more than jobenv reads "
                       f"({MAX_OUTPUT:,})")
    return res


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return str(os.getuid())


def is_mine(owner: str, uid: int, user: str) -> bool:
    """Is a job whose scheduler names `owner` (`alice`, Slurm's `alice(1234)`) this user's?
    By uid where the scheduler gives one, else by name."""
    name, _, rest = owner.partition("(")
    if rest.endswith(")") and rest[:-1].isdigit():
        return int(rest[:-1]) == uid
    return bool(name) and name == user


def describe(name: str, jobid: str, env: Mapping[str, str], timeout: float = TIMEOUT) -> Tuple[Capture, str]:
    """(the job as the scheduler describes it, the command asked): this user's, running,
    with nodes; one JobenvError line otherwise."""
    o = _outside(name)
    if o is None:
        raise BadInput(f"jobenv cannot capture a {name} job from outside it")
    if not o.id_ok(jobid):
        raise BadInput(f"--job {one_line(jobid)[:80]!r} is not a {name} job id")
    argv = list(o.show) + [jobid]
    rc, out = _ask(argv, env, timeout)
    if rc != 0:
        first = next((ln.strip() for ln in out.splitlines() if ln.strip()), f"exit code {rc}")
        raise NoRecord(f"{argv[0]} does not know job {jobid}: {one_line(first)[:200]}")
    cap = o.parse(out, jobid)
    if not is_mine(cap.owner, os.getuid(), _user()):
        raise BadInput(f"job {jobid} belongs to {one_line(cap.owner)[:80]!r}, not to you: jobenv captures only "
                       "your own jobs")
    if cap.state not in o.running:
        state = one_line(cap.state)[:40] or "in no state"
        if cap.state in o.ended:
            raise JobEnded(f"job {jobid} has ended ({name} says {state}): nothing to capture")
        raise BadInput(f"job {jobid} is {state}, not running: it holds no nodes yet")
    if not cap.hosts:
        raise BadInput(f"{argv[0]} lists no nodes for running job {jobid}")
    desc = schedulers.descriptor(name)
    cap.env.update((k, env[k]) for k in desc.site_vars if env.get(k))  # this site's, for later queries
    return cap, " ".join(argv)


def find(name: str, env: Mapping[str, str], timeout: float = TIMEOUT) -> str:
    """The id of this user's one running job on this host."""
    from jobenv.core.hostlist import this_host

    o = _outside(name)
    if o is None:
        raise BadInput(f"jobenv cannot find a {name} job from outside it")
    host, user = this_host(env), _user()
    argv = o.find(host, user)
    rc, out = _ask(argv, env, timeout)
    ids = o.found(out, host, user) if rc == 0 else []
    if not ids:  # a login node is no node of any job: squeue says "Invalid node name"
        why = "" if rc == 0 else " (" + one_line(next((ln.strip() for ln in out.splitlines() if ln.strip()),
                                                        f"exit code {rc}"))[:200] + ")"
        raise NoRecord(f"no running {name} job of {user} on {host}{why}: give its id with --job ID")
    if len(ids) > 1:
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        raise BadInput(f"{len(ids)} running {name} jobs of {user} on {host} ({shown}): pick one with --job ID")
    return ids[0]


def provenance(cap: Capture, command: str, host: str, gpus_from: str) -> Dict[str, object]:
    """The record's `provenance`: captured from outside, by which command, where each field came from."""
    fields = dict(cap.sources)
    fields["gpus_per_host"] = gpus_from
    return {"how": "outside", "command": command, "on": host, "fields": fields}


def summary(prov: Mapping[str, object]) -> str:
    """One line for `jobenv show`."""
    fields = prov.get("fields")
    parts = [f"{k}: {v}" for k, v in fields.items()] if isinstance(fields, dict) else []
    head = f"captured from outside the job by `{prov.get('command')}` on {prov.get('on')}"
    return head + (" (" + "; ".join(parts) + ")" if parts else "")
