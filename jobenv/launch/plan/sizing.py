"""Sizing at launch time: which hosts and how many ranks, rendered for the job's launcher.

Pure functions of (record, profile launcher template, request): the decision is computed
once as a `Size`, then rendered as launcher argv plus, for MPI launchers, the text of a
sub-hostfile.  `jobenv launch` writes that file (privately, atomically) and runs the argv;
`jobenv stage` asks for `per_host()`: one process on each of some hosts.

Rendering reuses the profile's own template with new numbers, so site flags (`--cpu-bind`,
`--gpus-per-node`, ...) stay as the profile wrote them.  How a launch on fewer hosts
than the job is told which (a sub-hostfile, `--nodelist`, `--requires=host:`) is the
launcher family's row in `families.py`.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput
from jobenv.core.hostlist import compress, expand, host_index, hostfile_text
from jobenv.core.numparse import plural
from jobenv.runtime import families
from jobenv.launch.plan.template import context, render
from jobenv.launch.types import Request

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Tuple


class Size:
    """The decision: these hosts, this many ranks per host and in all."""

    __slots__ = ("hosts", "ppn", "nranks", "whole", "subset", "avoid")

    def __init__(self, hosts: Tuple[str, ...], ppn: int, nranks: int, whole: bool, subset: bool = False,
                 avoid: Tuple[str, ...] = ()) -> None:
        self.hosts, self.ppn, self.nranks = hosts, ppn, nranks
        self.whole = whole  # exactly the job as saved: the recorded argv can be used as it is
        self.subset = subset  # fewer hosts than the job: the launcher must be told which
        self.avoid = avoid  # hosts --exclude named (a retired host among them): a launcher that
        # may add hosts of its own to a step (srun -N beyond --nodelist) is told to keep off them

    def __repr__(self) -> str:
        return "Size(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"

    def host_of(self, rank: int) -> Optional[str]:
        """Where a block placement (mpiexec -ppn, srun's default) puts `rank`."""
        i = rank // max(self.ppn, 1)
        return self.hosts[i] if 0 <= rank < self.nranks and i < len(self.hosts) else None


def _select(job_hosts: Sequence[str], text: str, what: str, jobid: str) -> List[str]:
    """Hosts of the job named by a hostlist; short and fully qualified names both match."""
    out = []
    for name in expand(text):
        i = host_index(job_hosts, name)
        if i is None:
            raise BadInput(f"{what}: host {name!r} is not in job {jobid} (hosts: {compress(job_hosts)})")
        out.append(job_hosts[i])
    return out


def pool(job_hosts: Sequence[str], req: Request, jobid: str = "") -> List[str]:
    """The job's hosts that `req.hosts`/`req.exclude` leave to launch on, in the job's order
    (it decides rank placement; the spares of a failover are the last ones)."""
    out = list(dict.fromkeys(job_hosts))
    if req.hosts:
        wanted = set(_select(out, req.hosts, "--hosts", jobid))
        out = [h for h in out if h in wanted]
    if req.exclude:
        dropped = set(_select(job_hosts, req.exclude, "--exclude", jobid))
        out = [h for h in out if h not in dropped]
    return out


def choose(job_hosts: Sequence[str], ranks_per_host: int, req: Request, jobid: str = "",
           oversubscribe: bool = False) -> Size:
    """The hosts and rank counts for `req`, or BadInput naming why it cannot be met.
    `oversubscribe` (a scheduler that allocates nothing, as `local`: this host is the user's own)
    lets `-n` put more ranks on its hosts than the job has slots, as torchrun's --nproc-per-node
    does; an explicit --ppn always may."""
    offer = pool(job_hosts, req, jobid)
    if not offer:
        raise BadInput(f"no hosts left to launch on in job {jobid} after --hosts/--exclude")
    ppn = req.ppn or ranks_per_host
    if req.nhosts is not None:
        if req.nhosts > len(offer):
            raise BadInput(f"--nhosts {req.nhosts}: job {jobid} has only {plural(len(offer), 'host')} to offer "
                           f"({compress(offer)})")
        k = req.nhosts
        if req.nranks is not None and req.ppn is None:
            ppn = -(-req.nranks // k)
    elif req.nranks is not None:
        k = -(-req.nranks // ppn)
        if k > len(offer) and oversubscribe and req.ppn is None:
            k, ppn = len(offer), -(-req.nranks // len(offer))
        if k > len(offer):
            raise BadInput(f"-n {req.nranks} at {ppn} per host needs {k} hosts; job {jobid} has only "
                           f"{len(offer)} to offer ({compress(offer)}); raise --ppn or lower -n")
    else:
        k = len(offer)
    n = req.nranks if req.nranks is not None else k * ppn
    if n > k * ppn:
        raise BadInput(f"-n {n} does not fit on {plural(k, 'host')} at --ppn {ppn}")
    if n < k:
        raise BadInput(f"-n {n} leaves hosts without a rank on {plural(k, 'host')}; lower --nhosts")
    ppn = min(ppn, n)  # one host: `-n 2` of 4 slots is 2 per host (torchrun's --nproc-per-node)
    hosts = tuple(offer[:k])
    whole = hosts == tuple(dict.fromkeys(job_hosts)) and ppn == ranks_per_host and n == k * ppn
    subset = len(hosts) < len(dict.fromkeys(job_hosts))
    avoid = tuple(_select(job_hosts, req.exclude, "--exclude", jobid)) if req.exclude and subset else ()
    return Size(hosts=hosts, ppn=ppn, nranks=n, whole=whole and not subset, subset=subset, avoid=avoid)


def render_sized(template: List[Any], size: Size, gpus_per_host: int, jobid: str,
                 variables: Dict[str, str], hostfile: str, fam: str) -> Tuple[List[str], Optional[str]]:
    """(launcher argv, sub-hostfile text or None) for `size` from the profile's template."""
    ctx = context(len(size.hosts), size.ppn, gpus_per_host, hostfile, jobid, variables)
    ctx["nranks"] = str(size.nranks)
    uses_hostfile = any("{hostfile}" in str(a) for item in template
                        for a in (item["args"] if isinstance(item, dict) else [item]))
    argv = render(template, ctx)
    row = families.get(fam)
    if row.subset == "hostfile":
        if uses_hostfile:
            return argv, hostfile_text(size.hosts)
        if size.subset:
            families.insert(argv, row, [row.hostfile[0], hostfile])
            return argv, hostfile_text(size.hosts)
        return argv, None
    if row.subset == "here":
        if len(size.hosts) > 1:
            raise BadInput(f"a {row.name} profile launches on one host; use --nhosts 1 or an MPI/srun profile")
        return argv, None
    if size.subset:
        if row.subset != "flag":
            raise BadInput(f"{row.title} cannot be told which hosts of the job to use: launch on all of them "
                           "(no --hosts, --exclude or --nhosts, and -n that needs every host)")
        avoid = [row.exclude[0] + compress(list(size.avoid))] if size.avoid and row.exclude else []
        families.insert(argv, row, [row.hosts[0] + compress(size.hosts)] + avoid)
    return argv, None


def per_host(job_hosts: Sequence[str], template: List[Any], hosts: Sequence[str], jobid: str,
             variables: Dict[str, str], hostfile: str, fam: str) -> Tuple[List[str], Optional[str]]:
    """argv (+ hostfile text) running one process on each of `hosts` (for `jobenv stage`).

    The caller appends the command, and writes the hostfile text to `hostfile` when given.
    """
    size = choose(job_hosts, 1, Request(hosts=compress(list(hosts)), ppn=1), jobid)
    return render_sized(template, size, 0, jobid, variables, hostfile, fam)


def job_template(template: List[Any], fam: str, outside: bool) -> List[Any]:
    """The template every launch line of a job renders from: the profile's launcher, with, for
    a record captured from outside the job (`save --job`), the family's `attach` flags right
    after the launcher's name (their `{jobid}` filled by the render), so that the line runs
    inside the job.  The one place they are added: save records its result.  Words are text
    (a profile's YAML may give a number), as the record keeps them."""
    out: List[Any] = [{"when": str(w["when"]), "args": [str(a) for a in w["args"]]} if isinstance(w, dict)
                      else str(w) for w in template]
    if outside:
        row = families.get(fam)
        families.insert(out, row, list(row.attach))
    return out


def template_for(profile_launchers: List[Dict[str, Any]], recorded_argv0: str) -> List[Any]:
    """For a record older than version 3, which does not carry its template: the profile's
    launcher the record was rendered from (same program), else the first."""
    for cand in profile_launchers:
        if str(cand["argv"][0]) == recorded_argv0:
            return list(cand["argv"])
    return list(profile_launchers[0]["argv"])

