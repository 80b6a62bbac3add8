"""`jobenv launch`: restore env + sized launcher argv + per-rank wrapper + the user's command,
run under supervision, with retries and a failure summary naming the first failed rank.

Decisions are data (`Attempt`), computed by jobenv.launch.plan.attempt; this module does the I/O:
the attempts' loop, their supervision, and failing over to a spare host between them.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from functools import partial

from jobenv.history import write as runs_history
from jobenv.store import files as store
from jobenv.core.errors import JobenvError, one_line
from jobenv.runtime import families
from jobenv.rank.verdict import decide
from jobenv.launch.verdict import badhosts, failover, summary
from jobenv.launch.watch import live, supervise, tee
from jobenv.launch.requeue import preempt
from jobenv.launch import ranks
from jobenv.launch.plan import sizing
from jobenv.launch.plan.attempt import attempt_env, choose_launcher, gpu_bind_mode, plan_attempt
from jobenv.launch.types import Preempt

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    from jobenv.rank.verdict import Verdict
    from jobenv.store.record import JobRecord
    from jobenv.launch.plan.attempt import Attempt, Launcher
    from jobenv.launch.types import Options


def rank_wrapper_argv() -> List[str]:
    """The per-rank wrapper's argv: torchrun's variables in every rank,
    start/exit records in JOBENV_RUN_DIR, logs in JOBENV_LOG_DIR."""
    from jobenv.rankwrap import wrapper_argv

    return list(wrapper_argv())


def say(msg: str) -> None:
    """One line `jobenv: MSG` on stderr (also the `launch` program's, jobenv.launchflow)."""
    if sys.stderr is None:  # started with stderr closed: nobody to tell
        return
    sys.stderr.write(f"jobenv: {one_line(msg)}\n")
    sys.stderr.flush()


def _warn(msg: str) -> None:
    say(f"warning: {msg}")


def run(rec: JobRecord, command: List[str], opts: Options, base_env: Mapping[str, str], dry_run: bool = False,
        rank_prefix: Sequence[str] = ()) -> int:
    """Launch `command` (with retries) in `base_env`, the restore plan's environment; the exit
    code of the last attempt.  `rank_prefix` goes between the per-rank wrapper and the command
    (the staged copy's, which the caller takes from jobenv.stage)."""
    from jobenv.store.software_field import validate
    from jobenv.launch.plan.program import check, python_form, python_name, script_end

    command = python_form(command, opts.module, python_name(validate(rec.software), opts.python), os.getcwd())
    if opts.container is None:  # in a container the program is the image's: the runtime says when it is missing
        check(command, base_env)
    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(base_env))
    argv = rank_wrapper_argv() + list(rank_prefix) + command
    # where the rank keeper (jobenv/rank/keeper.py) puts --local_rank=N in the words it runs
    local_rank_at = str(len(rank_prefix) + script_end(command)) if opts.local_rank_arg else ""
    gpu_bind = gpu_bind_mode(rec, base_env) if opts.gpu_bind else ""
    hosts = _first_hosts(rec, opts, runs, dry_run)
    launcher = choose_launcher(rec, opts, base_env)  # every attempt's
    if opts.container is None:  # in a container the MPI is the image's: `jobenv doctor --container` judges it
        one_world(launcher, command, opts, base_env)
    if dry_run:
        return _dry_run(rec, hosts, opts, runs, argv, gpu_bind, base_env, local_rank_at, launcher)
    rc, log_dir = 1, None
    from jobenv.launch.requeue.bring_back import keep_script, restarts_before

    if opts.requeue:  # before any rank runs: the script a resubmission would run (keptscript)
        keep_script(rec, base_env, say)
    before, runs_before = restarts_before(rec, base_env, opts.requeue)
    for attempt in range(opts.retries + 1):
        run_dir = ranks.make_run_dir(runs, f"a{attempt}")
        if opts.log_dir:  # the wrapper sends a rank's output there instead of the launcher's
            log_dir = ranks.set_aside(log_dir, attempt) if log_dir else ranks.prepare_log_dir(opts.log_dir)
        runs_history.note_log_dir(run_dir, log_dir)  # where `jobenv logs` finds this attempt's rank logs
        plan, warnings = plan_attempt(rec, hosts.request, opts, os.path.join(run_dir, "hostfile"), base_env,
                                      launcher=launcher)
        for w in warnings:
            say(f"warning: {w}")
        snapshot: List[ranks.RunState] = []
        env = attempt_env(plan, base_env, run_dir, log_dir, gpu_bind, opts.hook, opts.stacks)
        env.update(JOBENV_RESTART_COUNT=str(failover.restart_count(attempt, before)),
                   JOBENV_MAX_RESTARTS=str(opts.retries), JOBENV_LOCAL_RANK_ARG=local_rank_at)
        if not local_rank_at:  # the launch's alone: not one the user's shell exported
            del env["JOBENV_LOCAL_RANK_ARG"]
        started = time.time()
        follower = tee.start(log_dir, opts.tee, plan.size.nranks)
        out = _supervised(plan, argv, opts, env, log_dir, partial(_snapshot, snapshot, run_dir),
                          partial(_stacks, run_dir, plan.size.nranks, log_dir, plan.family))
        tee.stop(follower)
        verdict = _verdict(out, run_dir, plan.size.nranks, snapshot)
        rc = verdict.exit_code
        runs_history.record(run_dir, rec, command, plan, attempt, verdict, started, base_env, _warn)
        if _ended(rec, verdict, out, plan, opts, run_dir, log_dir, base_env, runs_before):
            return rc
        if attempt < opts.retries:
            failure = _failure(verdict, out, log_dir, plan.family)
            why = "" if verdict.cause in ("timeout", "idle-timeout") else failover.futile(failure)
            if why:
                say(f"not retrying: {why} (a retry would fail the same way)")
                return rc
            if opts.failover:
                hosts = _fail_over(rec, hosts, plan, failure, run_dir, runs, base_env)
            say(f"retrying ({attempt + 2} of {opts.retries + 1})")
    return rc


def one_world(launcher: Launcher, command: List[str], opts: Options, env: Mapping[str, str]) -> None:
    """Refuse (BadInput, exit 5), before any rank starts, a launch whose launcher would start the
    program's MPI as worlds of one rank (jobenv.launch.plan.worlds); --allow-mismatch: a warning."""
    from jobenv.launch.plan.worlds import misfits

    lines = misfits(launcher.prog, launcher.family, command, env, os.getcwd())
    if lines and not opts.allow_mismatch:
        from jobenv.core.errors import BadInput

        raise BadInput("; ".join(lines))
    for line in lines:
        say(f"warning: {line}")


def _verdict(out: supervise.Supervised, run_dir: str, nranks: int, snapshot: List[ranks.RunState]) -> Verdict:
    """The attempt's verdict, from the ranks' ledgers read once: after a limit, the snapshot taken
    before the kill (the exits the kill caused say nothing about what went wrong); after a
    launcher's failed end or a user's signal (^C: "interrupted: N of M ranks ended" counts the
    ends, which a keeper writes a moment after its launcher may have gone), the state
    `live.settle` read last, once the agents still beating had written the `end` or `lost` of
    their ranks (2.5 s at most)."""
    if out.expired and snapshot:
        state = snapshot[0]
    elif (out.launcher_exit != 0 or out.signalled is not None) and not out.expired and out.preempted is None:
        state = live.settle(run_dir, time.monotonic, time.sleep)
    else:
        state = ranks.read(run_dir)
    return decide(state, nranks, out.launcher_exit, out.expired, out.signalled, out.preempted)


def _dry_run(rec: JobRecord, hosts: failover.Hosts, opts: Options, runs: str, argv: List[str], gpu_bind: str,
             base_env: Mapping[str, str], local_rank_at: str = "", launcher: Optional[Launcher] = None) -> int:
    """--dry-run: print the first attempt's command line, say how it was chosen, run nothing."""
    plan, warnings = plan_attempt(rec, hosts.request, opts, os.path.join(runs, "<run>", "hostfile"), base_env,
                                  launcher=launcher)
    from jobenv.restore.shell import join

    for w in warnings:
        say(f"warning: {w}")

    print(join(plan.launcher + argv), flush=True)
    from jobenv.launch.plan.chosen import describe

    for line in describe(plan.size, gpu_bind, plan.launcher, families.get(plan.family)):
        say(line)
    if local_rank_at:
        word = argv[len(rank_wrapper_argv()) + int(local_rank_at) - 1]
        say(f"each rank's program gets --local_rank=<its local rank> after {word!r} (--local-rank-arg)")
    return 0


def _ended(rec: JobRecord, verdict: Verdict, out: supervise.Supervised, plan: Attempt, opts: Options, run_dir: str,
           log_dir: Optional[str], base_env: Mapping[str, str], runs_before: Optional[int] = None) -> bool:
    """Say what the attempt's end means; True when the launch ends with it (success, pre-emption,
    a user's signal, a teardown-only failure), False after the failure summary of an attempt a
    retry may follow."""
    if verdict.cause == "preempted":  # the ranks had their grace; bring the job back
        from jobenv.launch.requeue.bring_back import bring_back

        bring_back(rec, base_env, verdict.signal or 0, say, runs_before)
        return True
    if verdict.cause == "signal":  # the user (or timeout(1)) stopped it: one line, no summary, no retry
        if verdict.signal != signal.SIGPIPE:
            say(summary.interrupted(verdict))
        return True
    if verdict.outcome == "ok":
        from jobenv.rank.teardown import warning

        for r in verdict.excused:  # every program finished; some died in interpreter teardown after
            say(warning(r))
        return True
    for line in summary.summarize(verdict, out, run_dir, log_dir, plan.size, opts, plan.family):
        say(line)
    return False


def _first_hosts(rec: JobRecord, opts: Options, runs: str, dry_run: bool) -> failover.Hosts:
    """The first attempt's hosts: the request less the job's retired hosts, spares held back."""
    if not dry_run:
        from jobenv.store.paths import own_dir

        own_dir(runs, "run directory")  # the ledger is read from there: a directory of our own
    entries = badhosts.load(runs, _warn)
    hosts = failover.first_hosts(rec.hosts, rec.ranks_per_host, opts.request, opts.spares if opts.failover else 0,
                                 badhosts.retired(entries), opts.failover, rec.jobid)
    latest = {e["host"]: e for e in entries}
    for host in hosts.left_out:  # the ledger names the job's hosts as the record spells them
        if host in latest:
            say(f"leaving out {badhosts.describe(latest[host])} (retired; --hosts naming it uses it again)")
    return hosts


def _failure(verdict: Verdict, out: supervise.Supervised, log_dir: Optional[str], family: str) -> failover.Failure:
    lines: Dict[int, List[str]] = {}
    shared: List[str] = []
    for r in verdict.state.ranks.values():
        if r.failed or r.lost:
            where, last = summary.rank_lines(out, log_dir, family, r.rank)
            if where:
                lines[r.rank] = last
            else:
                shared = last
    return failover.Failure(verdict, lines, shared)


def _fail_over(rec: JobRecord, hosts: failover.Hosts, plan: Attempt, failure: failover.Failure, run_dir: str,
               runs: str, base_env: Mapping[str, str]) -> failover.Hosts:
    """Retire the host the failed attempt names (in the ledger), and put a spare in its place."""
    from jobenv.core.hostlist import host_index

    v = failover.judge(failure)
    i = host_index(rec.hosts, v.host) if v.host else None
    if v.host is None or i is None:
        why = f"{v.fault}: {v.why}" if v.fault else v.why or f"{v.host} is not a host of job {rec.jobid}"
        say(f"no host retired: {why}")
        return hosts
    v.host = rec.hosts[i]
    evidence = "named" if v.named else "guessed"
    entry = {"host": v.host, "rank": v.rank, "how": v.how, "evidence": evidence,
             "run": os.path.basename(run_dir), "why": v.why}
    try:
        badhosts.add(runs, entry, dict(base_env), _warn)
    except (OSError, JobenvError) as exc:  # the ledger is history: this launch fails over all the same
        _warn(f"bad-host ledger {badhosts.path(runs)} not updated: {one_line(str(exc))}")
    nxt = failover.replace(rec.hosts, rec.ranks_per_host, hosts, v.host, rec.jobid)
    if nxt is None:
        say(f"retired {v.host} ({v.how}, {evidence}) but no spare host is left: retrying on the same hosts")
        return hosts
    now = sizing.choose(rec.hosts, rec.ranks_per_host, nxt.request, rec.jobid).hosts
    spare = [h for h in now if h not in plan.size.hosts]
    say(f"retired {v.host} ({v.how} of rank {v.rank}, {evidence}; ledger {badhosts.path(runs)}): "
         f"{', '.join(spare) or 'no host'} takes its place")
    return nxt




def _supervised(plan: Attempt, argv: List[str], opts: Options, env: Dict[str, str], log_dir: Optional[str],
                before_kill: Callable[[], None],
                on_stacks: Optional[Callable[[List[Tuple[float, bytes]], bool], List[str]]] = None
                ) -> supervise.Supervised:
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
    watch_for = Preempt(preempt.signal_numbers(), grace, partial(
        _tell_ranks, env["JOBENV_RUN_DIR"], row.cancel, env, step)) if opts.requeue else None
    out = supervise.run(launcher + argv, env, opts.limits, log_dir, on_expire, before_kill, preempt=watch_for,
                        on_stacks=on_stacks)
    if out.dropped:
        say(f"warning: {out.dropped} bytes of output dropped: our output was not read fast enough "
             "(--log-dir DIR keeps every byte)")
    return out


def _tell_ranks(run_dir: str, cancel: str, env: Mapping[str, str], step: str, signum: int) -> None:
    from jobenv.launch.requeue.bring_back import deliver

    deliver(run_dir, cancel, env, step, signum, say)


def _snapshot(into: List[ranks.RunState], run_dir: str) -> None:
    into.append(ranks.read(run_dir))


def _stacks(run_dir: str, nranks: int, log_dir: Optional[str], family: str, last: List[Tuple[float, bytes]],
            at_limit: bool) -> List[str]:
    """The report of the ranks' grouped stacks (at a time limit, before the kill; on SIGUSR1);
    a failure to collect them is a warning: the launch (or its kill) goes on."""
    from jobenv.launch.watch import stacks

    try:
        return stacks.collect(run_dir, at_limit, nranks, log_dir, family, last)
    except (JobenvError, OSError) as exc:
        return [f"warning: cannot collect the ranks' stacks: {one_line(str(exc))}"]


def fast_main(argv: List[str]) -> Optional[int]:
    """Kept for `launch` programs written by an older `jobenv save`, which call it first:
    None sends them to the full CLI (`jobenv launch`).  A save writes the new program
    (jobenv.launchflow), which skips click."""
    return None
