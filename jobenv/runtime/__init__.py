"""Rank discovery for any launcher, and the rendezvous every backend needs.

Standard library only, and only what is already loaded at interpreter start-up: this is
imported by every rank of every job.  Detection is a pure function of an environment
mapping (plus, for Slurm, the ids of this process and its parents), so it is tested with
recorded launcher environments and with real launches alike.

    info = jobenv.runtime.detect()       # DistInfo(rank=3, world_size=8, ...)
    jobenv.runtime.export_env(info)      # RANK, WORLD_SIZE, MASTER_ADDR, ... for env://
    jobenv.setup_torch()                 # the above + device + init_process_group
"""
from __future__ import annotations

import os

__all__ = ["DistInfo", "DetectError", "detect", "export_env", "setup_torch", "setup_horovod",
           "setup_tensorflow", "setup_deepspeed", "cleanup"]

_FIELDS = ("rank", "local_rank", "world_size", "local_world_size", "node_rank", "num_nodes",
           "master_addr", "master_port", "launcher", "jobid", "hosts")


class DetectError(RuntimeError):
    """The environment is inconsistent (two launchers disagree, a variable is garbage)."""


class DistInfo:
    """Where this process sits in the job.  Immutable.

    A slotted class with dataclass-like behaviour (equality, repr, `as_dict`, `replace`)
    instead of a frozen dataclass: `import dataclasses` alone costs more than the whole
    start-up budget of `import jobenv.runtime` (see benchmarks/).
    """

    __slots__ = _FIELDS

    def __init__(self, rank: int = 0, local_rank: int = 0, world_size: int = 1,
                 local_world_size: int = 1, node_rank: int = 0, num_nodes: int = 1,
                 master_addr=None, master_port=None, launcher: str = "none", jobid=None,
                 hosts=()) -> None:
        values = (rank, local_rank, world_size, local_world_size, node_rank, num_nodes,
                  master_addr, master_port, launcher, jobid, tuple(hosts))
        for name, value in zip(_FIELDS, values):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError(f"DistInfo is immutable; use replace({name}=...)")

    __delattr__ = __setattr__

    def as_dict(self) -> dict:
        d = {f: getattr(self, f) for f in _FIELDS}
        d["hosts"] = list(self.hosts)
        return d

    def replace(self, **changes) -> "DistInfo":
        d = {f: getattr(self, f) for f in _FIELDS}
        d.update(changes)
        return DistInfo(**d)

    def __eq__(self, other):
        if not isinstance(other, DistInfo):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    def __hash__(self):
        return hash(tuple(getattr(self, f) for f in _FIELDS))

    def __repr__(self):
        return "DistInfo(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in _FIELDS) + ")"

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def _int(env, name, launcher):
    val = env.get(name)
    if val is None:
        return None
    try:
        return int(val)
    except ValueError:
        raise DetectError(f"{launcher}: {name}={val!r} is not a number") from None


# (launcher, rank var, size var(s), local rank var(s), local size var(s), node var, required var)
_TABLE = (
    ("torchrun", "RANK", ("WORLD_SIZE",), ("LOCAL_RANK",), ("LOCAL_WORLD_SIZE",), "GROUP_RANK", "TORCHELASTIC_RUN_ID"),
    ("horovodrun", "HOROVOD_RANK", ("HOROVOD_SIZE",), ("HOROVOD_LOCAL_RANK",), ("HOROVOD_LOCAL_SIZE",), "HOROVOD_CROSS_RANK", None),
    ("pals", "PALS_RANKID", ("PMI_SIZE",), ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"), ("PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"), "PALS_NODEID", None),
    ("srun", "SLURM_PROCID", ("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), ("SLURM_LOCALID",), (), "SLURM_NODEID", "SLURM_STEP_ID"),
    ("jsrun", "JSM_NAMESPACE_RANK", ("JSM_NAMESPACE_SIZE",), ("JSM_NAMESPACE_LOCAL_RANK",), ("JSM_NAMESPACE_LOCAL_SIZE",), None, None),
    ("openmpi", "OMPI_COMM_WORLD_RANK", ("OMPI_COMM_WORLD_SIZE",), ("OMPI_COMM_WORLD_LOCAL_RANK",), ("OMPI_COMM_WORLD_LOCAL_SIZE",), None, None),
    ("mvapich2", "MV2_COMM_WORLD_RANK", ("MV2_COMM_WORLD_SIZE",), ("MV2_COMM_WORLD_LOCAL_RANK",), ("MV2_COMM_WORLD_LOCAL_SIZE",), None, None),
    ("mpich", "PMI_RANK", ("PMI_SIZE",), ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"), ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"), None, None),
    ("pmix", "PMIX_RANK", ("OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"), ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"), ("OMPI_COMM_WORLD_LOCAL_SIZE",), "SLURM_NODEID", None),
)


def _first(env, names, launcher):
    for n in names:
        v = _int(env, n, launcher)
        if v is not None:
            return v, n
    return None, None


def ancestors(depth: int = 3) -> tuple:
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


def _srun_is_live(env, pids) -> bool:
    """srun sets SLURM_TASK_PID to the task's pid: if neither we nor our (grand)parent are
    that task, the SLURM_PROCID in this environment was left over from a batch script or
    an interactive step shell that later ran another launcher."""
    if not env.get("SLURM_STEP_ID") or env.get("SLURM_STEP_ID") in ("4294967294", "batch"):
        return False
    task = env.get("SLURM_TASK_PID")
    if task is None or pids is None:
        return True
    return task.isdigit() and int(task) in pids


def _slurm_local_size(env, node):
    text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    if not text or node is None:
        return None
    counts = []
    for item in text.split(","):
        n, _, rep = item.partition("(x")
        try:
            counts.extend([int(n)] * (int(rep.rstrip(")")) if rep else 1))
        except ValueError:
            return None
    return counts[node] if node < len(counts) else None


def sources(env, pids=None) -> list:
    """Every launcher whose variables are present and live: (name, rank, size, local, lsize, node)."""
    found = []
    for name, rank_v, size_vs, local_vs, lsize_vs, node_v, required in _TABLE:
        if rank_v not in env or (required and required not in env):
            continue
        if name == "srun" and not _srun_is_live(env, pids):
            continue
        rank = _int(env, rank_v, name)
        size, size_v = _first(env, size_vs, name)
        if size is None:
            continue
        local, _ = _first(env, local_vs, name)
        lsize, _ = _first(env, lsize_vs, name)
        node = _int(env, node_v, name) if node_v else None
        if name == "srun" and lsize is None:
            lsize = _slurm_local_size(env, node)
        if not 0 <= rank < size:
            raise DetectError(f"{name}: {rank_v}={rank} is outside {size_v}={size}")
        found.append((name, rank, size, local, lsize, node, rank_v, size_v))
    return found


def _read_record(env):
    """The job's record (hosts, job id), via JOBENV_RECORD or the job id; None if absent."""
    path = env.get("JOBENV_RECORD")
    if not path:
        jobid = env.get("JOBENV_JOBID") or env.get("SLURM_JOB_ID") or env.get("PBS_JOBID") or env.get("COBALT_JOBID")
        if not jobid:
            return None
        from .. import store

        sched = env.get("JOBENV_SCHEDULER") or ("slurm" if env.get("SLURM_JOB_ID") else "pbs" if env.get("PBS_JOBID") else "cobalt")
        path = store.paths_for(store.key_for(sched, jobid), env)[0]
    from ..record import loads  # json.loads without importing re: this runs in every rank

    try:
        with open(path, "rb") as f:
            data = loads(f.read().decode("utf-8", "surrogateescape"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def derived_port(seed: str) -> int:
    """A port in [20000, 60000) from a seed every rank shares (job id, launch id)."""
    import zlib

    return 20000 + zlib.crc32(seed.encode("utf-8", "surrogateescape")) % 40000


def _port_seed(env, jobid):
    """Prefer a per-launch id, so back-to-back launches in one job use different ports."""
    for k in ("PALS_APID", "PMIX_NAMESPACE", "TORCHELASTIC_RUN_ID"):
        if env.get(k):
            return env[k]
    if env.get("SLURM_JOB_ID") and env.get("SLURM_STEP_ID"):
        return f"{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}"
    # stamped by the `launch` shell function and forwarded by every launcher to every rank
    return f"{jobid or 'jobenv'}@{env.get('JOBENV_LAUNCH_TIME', '')}"


def detect(env=None, pids=None, hostname=None) -> DistInfo:
    """This process's place in the job, from whatever launcher started it.

    A plain `python` run is rank 0 of 1.  Leftover variables (a batch script's
    SLURM_PROCID, a stale RANK without torchrun) are ignored; two live launchers that
    disagree raise DetectError naming both.
    """
    env = os.environ if env is None else env
    if pids is None and env is os.environ and "SLURM_STEP_ID" in env:
        pids = ancestors()  # only srun's variables need the parent chain checked
    found = sources(env, pids)
    if found:
        base = found[0]
        for other in found[1:]:
            if (other[1], other[2]) != (base[1], base[2]):
                raise DetectError(
                    f"launchers disagree: {base[0]} says {base[6]}={base[1]} {base[7]}={base[2]}, "
                    f"{other[0]} says {other[6]}={other[1]} {other[7]}={other[2]}; unset the stale ones")
        launcher, rank, size = base[0], base[1], base[2]
        local = next((s[3] for s in found if s[3] is not None), None)
        lsize = next((s[4] for s in found if s[4] is not None), None)
        node = next((s[5] for s in found if s[5] is not None), None)
    else:
        launcher, rank, size, local, lsize, node = "none", 0, 1, 0, 1, 0

    record = _read_record(env) if size > 1 or env.get("JOBENV_RECORD") else None
    hosts = tuple(record.get("hosts") or ()) if record else ()
    jobid = (record or {}).get("jobid") or env.get("JOBENV_JOBID") or env.get("SLURM_JOB_ID") \
        or env.get("PBS_JOBID") or env.get("COBALT_JOBID")
    if local is None:
        local = 0 if size == 1 else rank % (lsize or size)
    if lsize is None:
        lsize = size if (hosts and len(hosts) == 1) else (int(record.get("ranks_per_host") or 0) if record else 0) or size
    if node is None:
        idx = None
        if hosts:  # only then: the plain-`python` path imports nothing more
            from ..hostlist import host_index, this_host

            idx = host_index(hosts, hostname or this_host(env))
        node = idx if idx is not None else rank // max(lsize, 1)
    num_nodes = -(-size // max(lsize, 1))

    addr = env.get("MASTER_ADDR")
    if not addr and size > 1:
        if lsize >= size or (record and record.get("scheduler") == "local"):
            addr = "127.0.0.1"
        elif launcher == "srun" and env.get("SLURM_STEP_NODELIST"):
            from ..hostlist import expand

            addr = expand(env["SLURM_STEP_NODELIST"])[0]
        elif hosts:
            addr = hosts[0]
    port_s = env.get("MASTER_PORT")
    if port_s:
        try:
            port = int(port_s)
        except ValueError:
            raise DetectError(f"MASTER_PORT={port_s!r} is not a port number") from None
    else:
        port = derived_port(_port_seed(env, jobid)) if size > 1 else 29500
    return DistInfo(rank=rank, local_rank=local, world_size=size, local_world_size=lsize,
                    node_rank=node, num_nodes=num_nodes, master_addr=addr or ("127.0.0.1" if size == 1 else None),
                    master_port=port, launcher=launcher, jobid=jobid, hosts=hosts)


def export_env(info=None, env=None) -> DistInfo:
    """Set RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and
    GROUP_RANK/NODE_RANK) so unmodified `init_process_group("env://")` scripts work."""
    info = info or detect()
    env = os.environ if env is None else env
    if info.master_addr is None:
        raise DetectError(_NO_ADDR)
    env.update(RANK=str(info.rank), LOCAL_RANK=str(info.local_rank), WORLD_SIZE=str(info.world_size),
               LOCAL_WORLD_SIZE=str(info.local_world_size), GROUP_RANK=str(info.node_rank),
               NODE_RANK=str(info.node_rank), MASTER_ADDR=str(info.master_addr),
               MASTER_PORT=str(info.master_port))
    return info


_NO_ADDR = ("cannot tell the rendezvous host: set MASTER_ADDR, or restore the job with "
            "`source <(jobenv get)` so that JOBENV_RECORD names its hosts")


def __getattr__(name):
    if name in ("setup_torch", "setup_horovod", "setup_tensorflow", "setup_deepspeed", "cleanup",
                "check_port", "choose_backend", "tf_config"):
        from . import backends

        return getattr(backends, name)
    raise AttributeError(f"module 'jobenv.runtime' has no attribute {name!r}")
