"""Rank discovery: a pure function of (environment, this process's ancestry, host name,
job record), built from the launcher table in `launchers.py`.

The per-rank wrapper (`jobenv/rankwrap.sh`) implements rules 1-4 in POSIX sh;
tests/test_rankwrap.py proves the two agree on every row of the table and on every
rejection below.  The rules, in order:

1. rank / size: the first live launcher row (launchers.py); other live rows must agree.
2. local rank / local size / node: that row's variables; else local size is the job's
   ranks per host (record, or NRANKS_PER_HOST), else the world size; local rank is
   rank % local size; node is this host's place in the launch's host list (the record's
   hosts, or JOBENV_HOSTFILE when `jobenv launch` runs on a subset), else rank // local size.
3. checks: numbers are 1-9 ASCII digits; node < size (from a launcher) and node < the
   job's hosts; MASTER_PORT in 1..65535; then DistInfo's own invariants (info.py):
   0 <= rank < size, 1 <= local size <= size, local rank < local size.
4. MASTER_ADDR: as set; else loopback for one rank, for one host and for the local
   scheduler; else srun's first step host; else the first host of the launch.
5. MASTER_PORT: as set; else 29500 for one rank; else `derived_port` of a per-launch seed
   (a Flux F58 job id in it as its decimal: `seed_id`).  `jobenv launch` always sets it
   (`launch_port`), so the wrapper only keeps it (29500 when a hand-run wrapper finds none).
"""
from __future__ import annotations

import os

from jobenv.core.numparse import plural

from .info import DetectError, DistInfo, first_number, number, optional_number, port_number
from .launchers import (CHECK, LAUNCHERS, LOCAL, LSIZE, MAX_DIGITS, NAME, NODE, PORT_SEED_VARS,
                        RANK, REQUIRES, SIZE, SLURM_NOT_A_STEP)

TYPE_CHECKING = False  # `import typing` costs milliseconds in every rank
if TYPE_CHECKING:
    from typing import Any, List, Mapping, Optional, Sequence, Tuple

    from jobenv.store.record import JobRecord
    from .launchers import Row

    Found = Tuple[str, int, int, Optional[int], Optional[int], Optional[int], str, str]

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 29500


def ancestors(depth: int = 3) -> Tuple[int, ...]:
    """This process and its parents (Linux /proc), to tell a live srun task from leftovers."""
    out, pid = [], os.getpid()
    for _ in range(depth):
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
    return tuple(out)


def srun_is_live(env: Mapping[str, str], pids: Optional[Sequence[int]]) -> bool:
    """srun sets SLURM_TASK_PID to the task's pid: if neither we nor our (grand)parent are
    that task, the SLURM_PROCID here was left over from a batch script or a step shell
    that later ran another launcher."""
    if not env.get("SLURM_STEP_ID") or env.get("SLURM_STEP_ID") in SLURM_NOT_A_STEP:
        return False
    task = env.get("SLURM_TASK_PID")
    if task is None or pids is None:
        return True
    return task.isascii() and task.isdigit() and int(task) in pids


def slurm_local_size(env: Mapping[str, str], node: Optional[int]) -> Optional[int]:
    """This node's task count from SLURM_STEP_TASKS_PER_NODE ('2(x3),1'), without expanding it."""
    text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    if not text or node is None:
        return None
    seen = 0
    for item in text.split(","):
        n, _, rep = item.partition("(x")
        rep = rep[:-1] if rep.endswith(")") else ("" if not rep else "?")
        if not all(0 < len(x) <= MAX_DIGITS and x.isascii() and x.isdigit() for x in (n, rep or "1")):
            return None
        seen += int(rep) if rep else 1
        if node < seen:
            return int(n)
    return None


def _row_is_live(row: Row, env: Mapping[str, str], pids: Optional[Sequence[int]]) -> bool:
    if row[RANK][0] not in env or not all(r in env for r in row[REQUIRES]):
        return False
    return row[CHECK] != "srun" or srun_is_live(env, pids)


def sources(env: Mapping[str, str], pids: Optional[Sequence[int]] = None) -> List[Found]:
    """Every live launcher: (name, rank, size, local, local size, node, rank var, size var)."""
    found = []
    for row in LAUNCHERS:
        name = row[NAME]
        if not _row_is_live(row, env, pids):
            continue
        size, size_v = first_number(env, row[SIZE], name)
        if size is None:
            continue
        rank_v = row[RANK][0]
        rank = number(env, rank_v, name)
        assert rank is not None
        local, _ = first_number(env, row[LOCAL], name)
        lsize, _ = first_number(env, row[LSIZE], name)
        node, _ = first_number(env, row[NODE], name)
        if row[CHECK] == "srun" and lsize is None:
            lsize = slurm_local_size(env, node)
        if not 0 <= rank < size:
            raise DetectError(f"{name}: {rank_v}={rank} is outside {size_v}={size}")
        found.append((name, rank, size, local, lsize, node, rank_v, size_v))
    return found


def agree(found: List[Found]) -> Found:
    """The first live launcher, after checking that every other one says the same."""
    base = found[0]
    for other in found[1:]:
        if (other[1], other[2]) != (base[1], base[2]):
            raise DetectError(
                f"launchers disagree: {base[0]} says {base[6]}={base[1]} {base[7]}={base[2]}, "
                f"{other[0]} says {other[6]}={other[1]} {other[7]}={other[2]}; unset the stale ones")
    return base


def job_id(env: Mapping[str, str], record: Optional[Any]) -> Optional[str]:
    if env.get("JOBENV_JOBID"):  # a restored shell's (every `jobenv launch`): no scheduler table loaded
        return env["JOBENV_JOBID"]
    from ..schedulers import job_id_vars

    for k in job_id_vars():
        if env.get(k):
            return env[k]
    return record.jobid if record is not None else None


def record_path(env: Mapping[str, str]) -> Optional[str]:
    """The job's record: JOBENV_RECORD, else the store's file for the job id in the environment."""
    path = env.get("JOBENV_RECORD")
    if path:
        return path
    jobid = job_id(env, None)
    if not jobid:
        return None
    from jobenv import schedulers
    from jobenv.store import files as store

    sched = env.get("JOBENV_SCHEDULER") or schedulers.job_scheduler(env)
    return store.paths_for(store.key_for(sched, jobid), dict(env))[0]


def load_record(path: str) -> Optional[JobRecord]:
    """The record at `path` through the store's own checks (owner, mode, symbolic links,
    schema), exactly as `jobenv get` reads it; None when there is none."""
    if not os.path.lexists(path):
        return None
    from jobenv.store import files as store
    from jobenv.core.errors import JobenvError

    try:
        store.open_jobs(os.path.dirname(os.path.abspath(path)), again=True)  # judged at every detect()
        return store.load(path)
    except JobenvError as exc:
        raise DetectError(f"cannot use the job's record: {exc}") from None


def read_hostfile(path: str) -> Tuple[str, ...]:
    """JOBENV_HOSTFILE: the hosts of this launch, one per line, each once (jobenv launch).
    Yours and no symbolic link (the store's rule), then read as every hostfile is."""
    from jobenv.store import files as store
    from jobenv.core.errors import JobenvError
    from jobenv.core.hostlist import is_valid_host
    from jobenv.core.readfile import MAX_HOSTFILE_BYTES, read_regular

    try:
        store.check_safe(path, is_dir=False)
        data = read_regular(path, MAX_HOSTFILE_BYTES, "file")
    except (OSError, JobenvError) as exc:
        raise DetectError(f"JOBENV_HOSTFILE={path!r}: {exc}") from None
    hosts = tuple(line.strip() for line in data.splitlines() if line.strip())
    if not hosts or not all(is_valid_host(h) for h in hosts) or len(set(hosts)) != len(hosts):
        raise DetectError(f"JOBENV_HOSTFILE={path!r}: not a list of distinct host names")
    return hosts


def node_index(hosts: Sequence[str], hostname: str, rank: int, lsize: int) -> int:
    if hosts:
        from jobenv.core.hostlist import host_index

        idx = host_index(hosts, hostname)
        if idx is not None:
            return idx
    return rank // max(lsize, 1)


def check_node(launcher: str, size: int, node: int, nhosts: Optional[int], from_launcher: bool = True) -> None:
    """A node rank from the host list may exceed the world size (two ranks on the job's
    third host); never the job's host count.  (The other counts are DistInfo's invariants.)"""
    if (from_launcher and node >= size) or (nhosts is not None and node >= nhosts):
        where = f"{launcher}: " if launcher != "none" else ""
        raise DetectError(f"{where}node rank {node} is beyond the job ({plural(size, 'rank')}"
                          + (f" on {plural(nhosts, 'host')})" if nhosts is not None else ")"))


def master_addr(env: Mapping[str, str], launcher: str, size: int, lsize: int, scheduler: Optional[str],
                hosts: Sequence[str]) -> Optional[str]:
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    if size == 1 or lsize >= size:
        return LOOPBACK
    from ..schedulers import THIS_HOST_ONLY

    if scheduler in THIS_HOST_ONLY:  # every rank is on the host jobenv runs on
        return LOOPBACK
    if launcher == "srun" and env.get("SLURM_STEP_NODELIST"):
        from jobenv.core.hostlist import expand

        return expand(env["SLURM_STEP_NODELIST"])[0]
    return hosts[0] if hosts else None


# Derived ports stay below Linux's ephemeral range (32768-60999 by default): an outgoing
# connection on rank 0's host (slurmstepd's, a previous launch's) may hold any port there,
# and the rendezvous then fails "already in use".  torchrun's default, 29500, is in range.
PORT_LOW, PORT_SPAN = 20000, 12768


def derived_port(seed: str) -> int:
    """A port in [PORT_LOW, PORT_LOW + PORT_SPAN) from a seed every rank shares (job id,
    launch id).

    djb2 over the seed's bytes: the per-rank wrapper computes the same in sh arithmetic,
    one step per byte, without a fork (its constants rendered from these)."""
    h = 5381
    for b in seed.encode("utf-8", "surrogateescape"):
        h = (h * 33 + b) & 0xFFFFFFFF
    return PORT_LOW + h % PORT_SPAN


def seed_id(jobid: str) -> str:
    """A job id as a port seed holds it: a Flux F58 id (`ƒ2oLkTLb`) as the decimal `flux job id
    --to=dec` prints, the form every tool shows in ASCII; every other id as it is (an ASCII F58
    id, `f2oLkTLb`, too)."""
    if not jobid.startswith("\u0192"):
        return jobid
    from ..schedulers.flux import decimal

    return decimal(jobid) or jobid


def _seed(env: Mapping[str, str], jobid: Optional[str]) -> str:
    for k in PORT_SEED_VARS:
        if env.get(k):
            return env[k]
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        return f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
    return _launch_seed(env, jobid)


def _launch_seed(env: Mapping[str, str], jobid: Optional[str]) -> str:
    # JOBENV_LAUNCH_TIME: stamped by `launch` and forwarded by every launcher to every rank
    return f"{jobid or 'jobenv'}@{env.get('JOBENV_LAUNCH_TIME', '')}"


def port_seed(env: Mapping[str, str], jobid: Optional[str]) -> str:
    """Prefer a per-launch id, so back-to-back launches in one job use different ports."""
    return _seed(env, seed_id(jobid) if jobid else jobid)


def launch_port(env: Mapping[str, str]) -> Optional[int]:
    """The MASTER_PORT `jobenv launch` hands every rank of one attempt (the per-rank wrapper derives
    none): `derived_port` of the job's id (`seed_id`: a Flux F58 id as its decimal) and the attempt's
    start time, so back-to-back and concurrent launches in one job use different ports.  None when
    MASTER_PORT is set (`env` is the launch's, JOBENV_JOBID the job's)."""
    if env.get("MASTER_PORT"):
        return None
    jobid = env.get("JOBENV_JOBID") or None
    return derived_port(_launch_seed(env, seed_id(jobid) if jobid else None))


def master_port(env: Mapping[str, str], size: int, jobid: Optional[str]) -> int:
    text = env.get("MASTER_PORT")
    if text:
        return port_number(text)
    return derived_port(port_seed(env, jobid)) if size > 1 else DEFAULT_PORT


def detect(env: Optional[Mapping[str, str]] = None, pids: Optional[Sequence[int]] = None, hostname: Optional[str] = None) -> DistInfo:
    """This process's place in the job, from whatever launcher started it.

    A plain `python` run is rank 0 of 1.  Leftover variables (a batch script's
    SLURM_PROCID, a stale RANK without torchrun) are ignored; two live launchers that
    disagree, garbage numbers and impossible counts raise DetectError.
    """
    env = os.environ if env is None else env
    if pids is None and env is os.environ and "SLURM_STEP_ID" in env:
        pids = ancestors()  # only srun's variables need the parent chain checked
    found = sources(env, pids)
    if found:
        launcher, rank, size, local, lsize, node = agree(found)[:6]
    else:
        launcher, rank, size, local, lsize, node = "none", 0, 1, 0, 1, 0

    path = record_path(env) if size > 1 or env.get("JOBENV_RECORD") else None
    record = load_record(path) if path else None
    run_hosts = read_hostfile(env["JOBENV_HOSTFILE"]) if size > 1 and env.get("JOBENV_HOSTFILE") else None
    hosts = run_hosts or (tuple(record.hosts) if record is not None else ())
    if lsize is None:
        rph = record.ranks_per_host if record is not None else optional_number(env, "NRANKS_PER_HOST")
        lsize = min(rph, size) if rph else size
    per_node = lsize or 1  # only for arithmetic: DistInfo refuses a local size of 0 below
    if local is None:
        local = rank % per_node
    from_launcher = node is not None
    if node is None:
        node = node_index(hosts, hostname or _this_host(env), rank, lsize) if hosts and size > 1 else rank // per_node
    nhosts = len(record.hosts) if record is not None else optional_number(env, "NHOSTS")
    check_node(launcher, size, node, nhosts, from_launcher)
    jobid = job_id(env, record)
    scheduler = record.scheduler if record is not None else env.get("JOBENV_SCHEDULER")
    return DistInfo(rank=rank, local_rank=local, world_size=size, local_world_size=lsize, node_rank=node,
                    num_nodes=len(hosts) if run_hosts else -(-size // per_node),
                    master_addr=master_addr(env, launcher, size, lsize, scheduler, hosts),
                    master_port=master_port(env, size, jobid), launcher=launcher, jobid=jobid, hosts=hosts)


def _this_host(env: Mapping[str, str]) -> str:
    from jobenv.core.hostlist import this_host

    return this_host(env)
