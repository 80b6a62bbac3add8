"""`jobenv launch`: restore env + sized launcher argv + per-rank wrapper + the user's command,
run under supervision, with retries and a failure summary naming the first failed rank.

Decisions are data (`Attempt`), computed by pure helpers; this module does the I/O.
"""
from __future__ import annotations

import os
import sys
import time
from functools import partial

from .. import runs as runs_history
from .. import store
from ..errors import BadInput, JobenvError, one_line
from . import badhosts, failover, families, flags, preempt, ranks, report, sizing, supervise, tee, teardown

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import AbstractSet, Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    from ..record import JobRecord
    Which = Callable[[str, Mapping[str, str]], Optional[str]]


class Options:
    """How to launch, beyond the command: sizing, pass-through flags, supervision."""

    def __init__(self, request: Optional[sizing.Request] = None, launcher_args: Optional[List[str]] = None,
                 label: bool = False, log_dir: Optional[str] = None, limits: Optional[supervise.Limits] = None,
                 retries: int = 0, exclude_failed: bool = False, gpu_bind: bool = False,
                 python: bool = True, spares: int = 0, tee: Optional[AbstractSet[int]] = frozenset({0}),
                 hook: bool = True, requeue: bool = False, grace: Optional[float] = None) -> None:
        self.request = request or sizing.Request()
        self.launcher_args = list(launcher_args or [])
        self.label, self.log_dir = label, log_dir
        self.limits = limits or supervise.Limits()
        self.retries, self.exclude_failed = retries, exclude_failed
        self.gpu_bind, self.python = gpu_bind, python  # gpu_bind: use the profile's binding
        self.spares = spares  # --spare-nodes: hosts held out of the first attempt
        self.tee = tee  # with log_dir: the ranks whose output the terminal gets too (None: all)
        self.hook = hook  # the ranks' Python hook (jobenv/rankhook) first on their PYTHONPATH
        self.requeue, self.grace = requeue, grace  # pre-emption: jobenv.launch.preempt

    @property
    def failover(self) -> bool:
        """A failed host is retired and replaced on a retry (--spare-nodes, --exclude-failed:
        then the job's hosts this launch does not use are its spares)."""
        return self.retries > 0 and (self.spares > 0 or self.exclude_failed)


def rank_wrapper_argv() -> List[str]:
    """The per-rank wrapper's argv: torchrun's variables in every rank,
    start/exit records in JOBENV_RUN_DIR, logs in JOBENV_LOG_DIR."""
    from ..rankwrap import wrapper_argv

    return list(wrapper_argv())


def gpu_bind_mode(rec: JobRecord, environ: Mapping[str, str]) -> str:
    """--gpu-bind: the job's profile's `gpu_bind`, as the wrapper's JOBENV_GPU_BIND."""
    from .. import profiles

    prof = profiles.load_all(environ).get(rec.machine)
    mode = profiles.gpu_bind_mode(prof) if prof is not None else ""
    if not mode:
        raise BadInput(f"--gpu-bind: profile {rec.machine!r} declares no gpu_bind (add `gpu_bind: {{var: "
                       "CUDA_VISIBLE_DEVICES, map: identity}` to it)")
    return mode


HOOK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "rankhook")

_SYSTEM_BINS = ("/usr/bin", "/bin", "/usr/local/bin")


class Attempt:
    """One launch, fully decided: what runs, where, and what it may write."""

    def __init__(self, launcher: List[str], hostfile_text: Optional[str], size: sizing.Size, family: str) -> None:
        self.launcher = launcher  # launcher argv with sizing, label and pass-through flags
        self.hostfile_text, self.size, self.family = hostfile_text, size, family


def _profile_template(rec: JobRecord, environ: Mapping[str, str]) -> Tuple[Any, Dict[str, str]]:
    from .. import profiles

    profs = profiles.load_all(environ)
    prof = profs.get(rec.machine)
    if prof is None:
        raise BadInput(f"profile {rec.machine!r} of job {rec.jobid} is not installed here; cannot size "
                       "the launch (`jobenv profiles` lists the known ones)")
    return sizing.template_for(prof.launchers, rec.launch[0]), prof.vars


def plan_attempt(rec: JobRecord, req: sizing.Request, opts: Options, hostfile: str, environ: Mapping[str, str],
                 which: Optional[Which] = None) -> Tuple[Attempt, List[str]]:
    """Decide one attempt (reads profiles only when sizing differs from the saved job)."""
    from .. import software

    warnings: List[str] = []
    size = sizing.choose(rec.hosts, rec.ranks_per_host, req, rec.jobid, oversubscribe=rec.scheduler == "local")
    prog, warn = software.launcher_path(rec, rec.launch[0])
    if warn:
        if (which or _which)(prog, environ) is None:
            raise JobenvError(f"cannot run {prog!r}: {warn.split(';')[0]} and it is not on PATH", 127)
        warnings.append(warn)
    fam = families.family(rec.launch[0], prog if os.path.isabs(prog) else (which or _which)(prog, environ))
    if size.whole:
        argv, text = list(rec.launch), None
    else:
        template, variables = _profile_template(rec, environ)
        argv, text = sizing.render_sized(template, size, rec.gpus_per_host, rec.jobid, variables, hostfile, fam)
    argv[0] = prog
    if rec.provenance:  # captured from outside the job: the launcher must be told which job
        sizing.attach(argv, fam, rec.jobid)
    row = families.get(fam)
    if os.path.dirname(prog) in _SYSTEM_BINS:  # on every node's PATH anyway: no prefix from it
        families.insert(argv, row, list(row.system_bin))
    if size.ppn > rec.ranks_per_host and row.oversubscribe and not set(row.oversubscribe) & set(argv):
        families.insert(argv, row, list(row.oversubscribe))
    if opts.label:
        argv += row.label
    argv = flags.override(argv, row, opts.launcher_args)
    return Attempt(argv, text, size, fam), warnings


def per_host_plan(rec: JobRecord, environ: Mapping[str, str], hosts: List[str], hostfile: str
                  ) -> Tuple[List[str], Optional[str]]:
    """(launcher argv, hostfile text or None): one process on each of `hosts` of the job, by
    the recorded launcher (what `jobenv stage` runs on every host).  The caller writes the text
    to `hostfile` when it is not None, then appends its command."""
    from .. import software

    template, variables = _profile_template(rec, environ)
    prog, _ = software.launcher_path(rec, rec.launch[0])
    fam = families.family(rec.launch[0], prog if os.path.isabs(prog) else _which(prog, environ))
    argv, text = sizing.per_host(rec.hosts, template, hosts, rec.jobid, variables, hostfile, fam)
    argv[0] = prog
    if rec.provenance:
        sizing.attach(argv, fam, rec.jobid)
    return argv, text


def _which(prog: str, environ: Mapping[str, str]) -> Optional[str]:
    from ..software import _which as which

    return which(prog, environ.get("PATH", ""))


def _say(msg: str) -> None:
    if sys.stderr is None:  # started with stderr closed: nobody to tell
        return
    sys.stderr.write(f"jobenv: {one_line(msg)}\n")
    sys.stderr.flush()


def run(rec: JobRecord, command: List[str], opts: Options, base_env: Mapping[str, str], dry_run: bool = False,
        rank_prefix: Sequence[str] = ()) -> int:
    """Launch `command` (with retries) in `base_env`, the restore plan's environment; the exit
    code of the last attempt.  `rank_prefix` goes between the per-rank wrapper and the command
    (the staged copy's, which the caller takes from jobenv.stage)."""
    from .program import check

    check(command, base_env)
    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(base_env))
    argv = rank_wrapper_argv() + list(rank_prefix) + command
    gpu_bind = gpu_bind_mode(rec, base_env) if opts.gpu_bind else ""
    hosts = _first_hosts(rec, opts, runs, dry_run)
    if dry_run:
        plan, _ = plan_attempt(rec, hosts.request, opts, os.path.join(runs, "<run>", "hostfile"), base_env)
        from ..shell import join

        print(join(plan.launcher + argv), flush=True)
        from .chosen import describe

        for line in describe(plan.size, gpu_bind, plan.launcher, families.get(plan.family)):
            _say(line)
        return 0
    rc, log_dir = 1, None
    from .requeue import restarts_before

    before = restarts_before(rec, base_env)
    for attempt in range(opts.retries + 1):
        run_dir = ranks.make_run_dir(runs, f"a{attempt}")
        if opts.log_dir:  # the wrapper sends a rank's output there instead of the launcher's
            log_dir = ranks.set_aside(log_dir, attempt) if log_dir else ranks.prepare_log_dir(opts.log_dir)
        runs_history.note_log_dir(run_dir, log_dir)  # where `jobenv logs` finds this attempt's rank logs
        plan, warnings = plan_attempt(rec, hosts.request, opts, os.path.join(run_dir, "hostfile"), base_env)
        for w in warnings:
            _say(f"warning: {w}")
        snapshot: List[ranks.RunState] = []
        env = _attempt_env(plan, base_env, run_dir, log_dir, gpu_bind, opts.hook)
        env.update(JOBENV_RESTART_COUNT=str(failover.restart_count(attempt, before)),
                   JOBENV_MAX_RESTARTS=str(opts.retries))
        started = time.time()
        follower = tee.start(log_dir, opts.tee, plan.size.nranks)
        out = _supervised(plan, argv, opts, env, log_dir, partial(_snapshot, snapshot, run_dir),
                          partial(_stacks, run_dir, plan.size.nranks, log_dir, plan.family))
        tee.stop(follower)
        rc = out.returncode
        runs_history.record(run_dir, rec, command, plan, attempt, out, started, base_env)
        if out.preempted is not None:  # the ranks had their grace; bring the job back
            from .requeue import bring_back

            bring_back(rec, base_env, out.preempted, run_dir, _say)
            return rc
        if rc == 0 and not out.expired:
            return 0
        if out.signalled is not None:
            return rc  # the user (or timeout(1)) stopped it: no summary, no retry
        at_expiry = snapshot[0] if snapshot else None
        late = None if out.expired else teardown.excused(ranks.read(run_dir), plan.size.nranks)
        if late is not None:  # every program finished; some died in interpreter teardown after
            for line in late:
                _say(line)
            return 0
        lines, _ = report.summarize(out, run_dir, log_dir, plan.size, opts, plan.family, at_expiry)
        for line in lines:
            _say(line)
        if attempt < opts.retries:
            if opts.failover:
                state = at_expiry if out.expired and at_expiry is not None else ranks.read(run_dir)
                hosts = _fail_over(rec, hosts, plan, _failure(state, out, log_dir, plan.family), run_dir, runs,
                                   base_env)
            _say(f"retrying ({attempt + 2} of {opts.retries + 1})")
    return rc


def _first_hosts(rec: JobRecord, opts: Options, runs: str, dry_run: bool) -> failover.Hosts:
    """The first attempt's hosts: the request less the job's retired hosts, spares held back."""
    if not dry_run:
        from ..storepath import own_dir

        own_dir(runs, "run directory")  # the ledger is read from there: a directory of our own
    entries = badhosts.load(runs, lambda m: _say(f"warning: {m}"))
    hosts = failover.first_hosts(rec.hosts, rec.ranks_per_host, opts.request, opts.spares if opts.failover else 0,
                                 badhosts.retired(entries), opts.failover, rec.jobid)
    latest = {e["host"]: e for e in entries}
    for host in hosts.left_out:  # the ledger names the job's hosts as the record spells them
        if host in latest:
            _say(f"leaving out {badhosts.describe(latest[host])} (retired; --hosts naming it uses it again)")
    return hosts


def _failure(state: ranks.RunState, out: supervise.Outcome, log_dir: Optional[str], family: str
             ) -> failover.Failure:
    lines: Dict[int, List[str]] = {}
    shared: List[str] = []
    for r in state.ranks.values():
        if r.failed or getattr(r, "lost", False):
            where, last = report.rank_lines(out, log_dir, family, r.rank)
            if where:
                lines[r.rank] = last
            else:
                shared = last
    return failover.Failure(state, lines, shared)


def _fail_over(rec: JobRecord, hosts: failover.Hosts, plan: Attempt, failure: failover.Failure, run_dir: str,
               runs: str, base_env: Mapping[str, str]) -> failover.Hosts:
    """Retire the host the failed attempt names (in the ledger), and put a spare in its place."""
    from ..hostlist import host_index

    v = failover.judge(failure)
    i = host_index(rec.hosts, v.host) if v.host else None
    if v.host is None or i is None:
        why = f"{v.fault}: {v.why}" if v.fault else v.why or f"{v.host} is not a host of job {rec.jobid}"
        _say(f"no host retired: {why}")
        return hosts
    v.host = rec.hosts[i]
    evidence = "named" if v.named else "guessed"
    entry = {"host": v.host, "rank": v.rank, "how": v.how, "evidence": evidence,
             "run": os.path.basename(run_dir), "why": v.why}
    badhosts.add(runs, entry, dict(base_env), lambda m: _say(f"warning: {m}"))
    nxt = failover.replace(rec.hosts, rec.ranks_per_host, hosts, v.host, rec.jobid)
    if nxt is None:
        _say(f"retired {v.host} ({v.how}, {evidence}) but no spare host is left: retrying on the same hosts")
        return hosts
    now = sizing.choose(rec.hosts, rec.ranks_per_host, nxt.request, rec.jobid).hosts
    spare = [h for h in now if h not in plan.size.hosts]
    _say(f"retired {v.host} ({v.how} of rank {v.rank}, {evidence}; ledger {badhosts.path(runs)}): "
         f"{', '.join(spare) or 'no host'} takes its place")
    return nxt


def _attempt_env(plan: Attempt, base_env: Mapping[str, str], run_dir: str, log_dir: Optional[str],
                 gpu_bind: str, hook: bool = True) -> Dict[str, str]:
    """The launcher's environment for one attempt; writes the attempt's hostfile when it has one.
    With `hook`, the ranks' Python hook's directory goes first on PYTHONPATH (it removes itself)."""
    hostfile = os.path.join(run_dir, "hostfile")
    from ..rankwrap import DUMP_SIGNAL, LAUNCH_SETS

    env = {k: v for k, v in base_env.items() if k not in LAUNCH_SETS}
    env.update(JOBENV_RUN_DIR=run_dir, JOBENV_LAUNCH_TIME=f"{time.time():.6f}", JOBENV_GPU_BIND=gpu_bind)
    env["JOBENV_DUMP_SIGNAL"] = str(DUMP_SIGNAL)
    if log_dir:
        env["JOBENV_LOG_DIR"] = log_dir
    if hook:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (HOOK_DIR, env.get("PYTHONPATH")) if p)
    if plan.size.subset:  # the wrapper's node rank and MASTER_ADDR follow this launch's hosts
        ranks.write_private(hostfile, sizing.hostfile_text(plan.size))
        env["JOBENV_HOSTFILE"] = hostfile
    elif plan.hostfile_text is not None:
        ranks.write_private(hostfile, plan.hostfile_text)
    if not plan.size.whole:
        env.update(NHOSTS=str(len(plan.size.hosts)), NRANKS_PER_HOST=str(plan.size.ppn),
                   NRANKS=str(plan.size.nranks))
    return env


def _supervised(plan: Attempt, argv: List[str], opts: Options, env: Dict[str, str], log_dir: Optional[str],
                before_kill: Callable[[], None],
                on_stacks: Optional[Callable[[List[Tuple[float, bytes]], bool], List[str]]] = None
                ) -> supervise.Outcome:
    """Run one attempt under supervision.  A launcher whose ranks on other hosts outlive its
    process group (srun, flux run) is given a name to be cancelled by (at a time limit, when a
    failed rank leaves the others running, by `jobenv kill`, on pre-emption), `jobenv-<run directory's name>`."""
    launcher = list(plan.launcher)
    on_expire: Optional[Callable[[], None]] = None
    row = families.get(plan.family)
    step = f"jobenv-{os.path.basename(env['JOBENV_RUN_DIR'])}"
    if row.cancel:
        families.insert(launcher, row, [row.step_flag + step])
        on_expire = partial(supervise.cancel_step, row.cancel, env, step)
    grace = preempt.DEFAULT_GRACE_S if opts.grace is None else opts.grace
    watch_for = preempt.Preempt(preempt.signal_numbers(), grace, partial(
        _tell_ranks, env["JOBENV_RUN_DIR"], row.cancel, env, step)) if opts.requeue else None
    out = supervise.run(launcher + argv, env, opts.limits, log_dir, on_expire, before_kill, preempt=watch_for,
                        on_stacks=on_stacks)
    if out.dropped:
        _say(f"warning: {out.dropped} bytes of output dropped: our output was not read fast enough "
             "(--log-dir DIR keeps every byte)")
    return out


def _tell_ranks(run_dir: str, cancel: str, env: Mapping[str, str], step: str, signum: int) -> None:
    from .requeue import deliver

    deliver(run_dir, cancel, env, step, signum, _say)


def _snapshot(into: List[ranks.RunState], run_dir: str) -> None:
    into.append(ranks.read(run_dir))


def _stacks(run_dir: str, nranks: int, log_dir: Optional[str], family: str, last: List[Tuple[float, bytes]],
            at_limit: bool) -> List[str]:
    """The report of the ranks' grouped stacks (at a time limit, before the kill; on SIGUSR1);
    a failure to collect them is a warning: the launch (or its kill) goes on."""
    from . import stacks

    try:
        return stacks.collect(run_dir, at_limit, nranks, log_dir, family, last)
    except (JobenvError, OSError) as exc:
        return [f"warning: cannot collect the ranks' stacks: {one_line(str(exc))}"]


def fast_main(argv: List[str]) -> Optional[int]:
    """Kept for `launch` programs written by an older `jobenv save`, which call it first:
    None sends them to the full CLI (`jobenv launch`).  A save writes the new program
    (jobenv.fastlaunch), which skips click."""
    return None
