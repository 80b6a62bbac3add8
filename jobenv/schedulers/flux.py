"""Flux (LLNL El Capitan, Tuolumne, RZAdams; also a Flux instance started inside another
scheduler's allocation).

What a shell of a Flux job holds (flux-core doc/man7/flux-environment.rst): a task started
by `flux run`/`flux submit` sees FLUX_JOB_ID (an F58 id such as `ƒ2oLkTLb`: not ASCII),
FLUX_JOB_SIZE, FLUX_JOB_NNODES, FLUX_TASK_RANK, FLUX_TASK_LOCAL_ID and FLUX_URI (its local
broker).  The initial program of an allocation (`flux alloc`'s shell, `flux batch`'s
script) runs in a new instance: the broker *unsets* FLUX_JOB_ID and friends there and sets
FLUX_URI (the new instance) and FLUX_ENCLOSING_ID (the allocation's id in the instance that
ran it).  So the allocation is FLUX_ENCLOSING_ID when set (a task of a `flux run` inside the
allocation is one step of it), else FLUX_JOB_ID.

Hosts: no variable lists them; `flux hostlist instance` prints the instance's hosts as an
RFC 29 hostlist (`elcap[1001-1004]`, the syntax jobenv.core.hostlist reads), `flux hostlist
local` the job's when FLUX_JOB_ID is set (flux-core doc/man1/flux-hostlist.rst).

Liveness: `flux jobs` with job ids lists them in any state (filters are ignored with a
job-id list; src/cmd/flux-jobs.py) and `flux --parent` asks the instance that ran the
current one (doc/man1/flux.rst; at the root it changes nothing), which is where an
allocation's id lives.  A job that instance does not know gets no verdict (never "ended"):
from a nested instance the question may have gone to the wrong one.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput
from .base import Batch, Capture, Scheduler, run_parsed, run_query
from .parse import pick_env

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    Runner = Callable[[List[str], Optional[Mapping[str, str]], float], Optional[Tuple[int, str]]]

NAME = "flux"
PREFIXES = ("FLUX_",)
# Per-task and per-step variables (and the broker's PMI plumbing): wrong in another shell.
TASK_VARS = ("FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "FLUX_KVS_NAMESPACE", "FLUX_PMI_LIBRARY_PATH",
             "FLUX_PROXY_REMOTE", "FLUX_JOB_TMPDIR")
STEP_VARS = ("FLUX_JOB_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES", "FLUX_JOB_ID_PATH")
# F58: base58 digits after a `ƒ` prefix (or `f` where the locale is not UTF-8); src/common/libutil/fluid.c
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _job_id(env: Mapping[str, str]) -> str:
    """The allocation: the enclosing instance's id, else this job's."""
    return env.get("FLUX_ENCLOSING_ID") or env.get("FLUX_JOB_ID", "")


def job_hosts(env: Mapping[str, str], run: Runner = run_query) -> List[str]:
    """The allocation's hosts, from `flux hostlist` (bounded; one BadInput line otherwise)."""
    from jobenv.core.hostlist import HostlistError, expand

    source = "instance" if env.get("FLUX_ENCLOSING_ID") else "local"
    res = run(["flux", "hostlist", source], env, 10.0)
    if res is None or res[0] != 0:
        why = "is not on PATH or did not answer" if res is None else f"failed: {res[1].strip()[:200]!r}"
        raise BadInput(f"cannot list job {_job_id(env)}'s hosts: `flux hostlist {source}` {why}")
    try:
        return expand(res[1].strip())
    except HostlistError as exc:
        raise BadInput(f"`flux hostlist {source}`: {exc}") from None


def capture(env: Mapping[str, str], run: Runner = run_query) -> Capture:
    jobid = _job_id(env)
    drop = TASK_VARS + (STEP_VARS if env.get("FLUX_ENCLOSING_ID") else ())
    return Capture(scheduler=NAME, jobid=jobid, hosts=job_hosts(env, run), env=pick_env(env, PREFIXES, drop))


def decimal(jobid: str) -> Optional[str]:
    """A Flux job id (F58 or decimal) as the decimal every flux command accepts; None for
    anything else (so only ids of this shape reach the command line, never an option)."""
    if jobid.isdigit() and jobid.isascii() and len(jobid) <= 20:
        return str(int(jobid))
    if jobid[:1] not in ("ƒ", "f") or not 1 < len(jobid) <= 13 or not set(jobid[1:]) <= set(_B58):
        return None
    n = 0
    for ch in jobid[1:]:
        n = n * 58 + _B58.index(ch)
    return str(n) if n < 1 << 64 else None


FORMAT = "{id.dec} {state} {result}"  # state: DEPEND PRIORITY SCHED RUN CLEANUP INACTIVE (RFC 21)


def parse_jobs(out: str, rc: int, jobids: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Verdicts from `flux jobs -n -o '{id.dec} {state} {result}' ID...`: one line per job it
    knows; INACTIVE has ended (its result says how), every other state is live.  Unknown
    jobs (`JobID 123 unknown` on stderr) get no verdict."""
    states: Dict[str, Tuple[str, str]] = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 2 and cols[0].isdigit() and cols[1].isalpha() and cols[1].isupper():
            states[cols[0]] = (cols[1], " ".join(cols[2:3]))
    verdicts: Dict[str, Tuple[str, str]] = {}
    for j in jobids:
        dec = decimal(j)
        if dec in states:
            state, result = states[dec]
            said = f"flux jobs says {state}" + (f" ({result})" if result else "")
            verdicts[j] = ("ended" if state == "INACTIVE" else "live", said)
    return verdicts


def query(jobids: Sequence[str], env: Optional[Mapping[str, str]] = None,
          timeout: float = 5.0) -> Dict[str, Tuple[str, str]]:
    """One `flux --parent jobs` for all `jobids`; jobs it does not answer for are left out."""
    asked = [j for j in jobids if decimal(j) is not None]
    argv = ["flux", "--parent", "jobs", "-n", "-o", FORMAT, *[str(decimal(j)) for j in asked]]
    return run_parsed(argv, asked, parse_jobs, env, timeout)


SCHEDULER = Scheduler(
    NAME, jobid_vars=("FLUX_ENCLOSING_ID", "FLUX_JOB_ID"), prefixes=PREFIXES,
    # FLUX_URI alone is no job: a login shell may point it at any instance (`flux proxy`)
    detect_any=("FLUX_ENCLOSING_ID", "FLUX_JOB_ID"), detect_all=("FLUX_URI",),
    # flux-environment(7): where the flux command finds subcommands, connector and broker
    # plugins, the PMI library it hands to tasks, and rc scripts of the broker and job shell
    program_vars=("FLUX_EXEC_PATH", "FLUX_CONNECTOR_PATH", "FLUX_MODULE_PATH", "FLUX_PMI_LIBRARY_PATH",
                  "FLUX_RC_EXTRA", "FLUX_SHELL_RC_PATH"),
    hosts="`flux hostlist instance` (an allocation's shell), else `flux hostlist local`",
    # a Flux instance may run inside a Slurm or LSF allocation (`srun flux start`): the
    # innermost scheduler is the one whose launcher reaches the shell's hosts
    priority=10, profile="elcapitan", capture=capture, query=query, parse=parse_jobs,
    # flux-batch(1): `#flux:` directives, prints the new job's F58 id
    batch=Batch("#flux:", output=("--output={output}",), name="--job-name={jobname}", submit=("flux", "batch", "{script}"),
                jobid=r"^(\S+)\s*$", cancel=("flux", "cancel"), id_ok=lambda j: decimal(j) is not None),
)
