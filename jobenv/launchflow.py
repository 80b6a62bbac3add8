"""The `launch` flow, and `launch ARGS` without click.

`start` is what `jobenv launch` and the `launch` program do: which job (jobenv.store.lookup, by
way of the restore plan), refuse an ended one, then run in the restore plan's environment
(the one `source <(jobenv get)` gives a shell) with the job's staged copy before each
rank's command (jobenv.stage).  It lives here, above get, stage and launch, so that none
of those calls up into another; `kill` (`jobenv kill`) finds a launch the same way.  `run` is
the `launch` program's click-free parser (click costs ~50 ms per launch), like
jobenv.restore.fastget for `get`.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional

    from .launch.types import Options
    from .store.record import JobRecord


def start(job: Optional[str], allow_stale: bool, command: List[str], opts: Options,
          environ: Mapping[str, str], warn: Callable[[str], None], dry_run: bool = False) -> int:
    """Choose the job, refuse an ended one, launch: the exit code of the last attempt.

    Liveness is asked of the scheduler now, not taken from `get`'s one-minute cache: a job
    cancelled since is refused here, naming it, before any launcher runs into it."""
    from jobenv.core.errors import NoRecord
    from jobenv.restore import plan
    from jobenv.restore.get import restore_plan
    from .launch.command import run
    from .stage import rank_prefix

    try:
        p, _, rec = restore_plan(environ, job, allow_stale, python=opts.python, fresh=True)
    except NoRecord:
        if job is not None or not _this_host_alone(environ, warn):
            raise
        p, _, rec = restore_plan(environ, None, allow_stale, python=opts.python, fresh=True)
    for w in p.warnings:
        warn(w)
    env = plan.apply(p, environ)
    if opts.master_addr is not None:  # torchrun's flags: the ranks keep them (runtime.discovery)
        env["MASTER_ADDR"] = opts.master_addr
    if opts.master_port is not None:
        env["MASTER_PORT"] = str(opts.master_port)
    if opts.standalone and rec.nhosts > 1:
        opts.request = opts.request.replace(hosts=_this_host_of(rec, environ))
    if opts.local_rank_arg:
        from .launch.plan.program import shell_named

        command = shell_named(command)  # `sh -c SCRIPT`: --local_rank=N goes to the script's "$@"
    prefix = rank_prefix(rec)
    if opts.container is not None:
        prefix = container_words(rec, opts, env) + prefix
    return run(rec, command, opts, env, dry_run, prefix)


def container_words(rec: JobRecord, opts: Options, env: Dict[str, str]) -> List[str]:
    """`launch --container`: the container's words before each rank's program (the staged copy's
    rankenv.sh then runs inside it); its variables into `env`; Pyxis's flags onto srun's line."""
    from .launch.plan.container import plan
    from .profiles import load as profiles
    from .stage.restore import template

    assert opts.container is not None
    prof = profiles.load_all(env).get(rec.machine) if rec.machine else None
    site = getattr(prof, "container", None) or {}
    box = plan(opts.container, env, os.getcwd(), opts.log_dir, template(rec), site.get("runtimes", ()),
               site.get("flags"), site.get("gpu", ""))
    env.update(box.env)
    opts.launcher_args = list(box.launcher_flags) + opts.launcher_args
    return box.words


def _this_host_alone(environ: Mapping[str, str], warn: Callable[[str], None]) -> bool:
    """No job saved and no scheduler's job around: save this host as `jobenv save` would
    (the local scheduler) and say so, so that `launch --nproc-per-node 2 train.py` runs as
    torchrun does, on this host.  False inside a scheduler's job: that one must be saved."""
    from jobenv import schedulers
    from .capture.save import Options, save

    if schedulers.which_scheduler(environ) != "local":
        return False
    rec, _ = save(environ, Options(scheduler="local"))
    from .core.errors import visible

    warn(f"no saved job and no scheduler: launching on this host ({visible(rec.hosts[0])}), as torchrun does "
         f"(saved as local job {visible(rec.jobid)}; `jobenv save` in an allocation launches there)")
    return True


def _this_host_of(rec: JobRecord, environ: Mapping[str, str]) -> str:
    """--standalone in a job of several hosts: this host, which must be one of them."""
    from jobenv.core.errors import BadInput, visible
    from jobenv.core.hostlist import host_index, this_host

    here = this_host(environ)
    at = host_index(rec.hosts, here)
    if at is None:
        raise BadInput(f"--standalone: this host ({visible(here)}) is not one of job {visible(rec.jobid)}'s hosts")
    return rec.hosts[at]


def kill(job: Optional[str], run: Optional[str], environ: Mapping[str, str], say: Callable[[str], None]) -> int:
    """`jobenv kill`: the job as `launch` finds it (its restored environment names the job to
    scancel/flux), its running attempt (jobenv.launch.watch.current.find), then jobenv.launch.watch.kill."""
    from jobenv.restore import plan
    from jobenv.store import files as store
    from jobenv.restore.get import restore_plan
    from jobenv.core.hostlist import this_host
    from .launch.plan.launcher import launcher_family
    from .runtime import families
    from .launch.watch.kill import kill as end_run
    from .launch.watch.current import find

    p, _, rec = restore_plan(environ, job, allow_stale=True)
    env = plan.apply(p, environ)
    run_dir = find(store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(environ)), run, environ,
                   f"job {rec.jobid}")
    fam = launcher_family(rec, env)
    from jobenv.core.errors import visible

    say(f"killing run {visible(os.path.basename(run_dir))} of job {visible(rec.jobid)}")
    return end_run(run_dir, families.get(fam).cancel, env, this_host(environ), say)


def run(argv: List[str]) -> Optional[int]:
    """Only the two forms the `launch` program uses, `launch [--job ID] -- ARGS` with ARGS a
    program (not an option: `launch -n 4 -- ARGS` is jobenv's options first); None sends
    anything else to the full CLI."""
    if argv[:1] != ["launch"]:
        return None
    job = None
    rest = argv[1:]
    if rest[:1] == ["--job"] and len(rest) >= 2:
        job, rest = rest[1], rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2 or rest[1].startswith("-"):
        return None
    from jobenv.core.errors import JobenvError, report_error
    from .launch.command import say
    from .launch.types import Options

    try:
        return start(job, False, rest[1:], Options(), os.environ, lambda m: say(f"warning: {m}"))
    except (JobenvError, OSError) as exc:
        return report_error(exc)
    except KeyboardInterrupt:
        return 130
