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
    from typing import Callable, List, Mapping, Optional

    from .launch.types import Options


def start(job: Optional[str], allow_stale: bool, command: List[str], opts: Options,
          environ: Mapping[str, str], warn: Callable[[str], None], dry_run: bool = False) -> int:
    """Choose the job, refuse an ended one, launch: the exit code of the last attempt.

    Liveness is asked of the scheduler now, not taken from `get`'s one-minute cache: a job
    cancelled since is refused here, naming it, before any launcher runs into it."""
    from jobenv.restore import plan
    from jobenv.restore.get import restore_plan
    from .launch.command import run
    from .stage import rank_prefix

    p, _, rec = restore_plan(environ, job, allow_stale, python=opts.python, fresh=True)
    for w in p.warnings:
        warn(w)
    return run(rec, command, opts, plan.apply(p, environ), dry_run, rank_prefix(rec))


def kill(job: Optional[str], run: Optional[str], environ: Mapping[str, str], say: Callable[[str], None]) -> int:
    """`jobenv kill`: the job as `launch` finds it (its restored environment names the job to
    scancel/flux), its running attempt (jobenv.launch.liverun.find), then jobenv.launch.kill."""
    from jobenv.restore import plan
    from jobenv.store import files as store
    from jobenv.restore.get import restore_plan
    from jobenv.core.hostlist import this_host
    from .launch.software import launcher_path
    from .runtime import families
    from .launch.attempt import find_program
    from .launch.kill import kill as end_run
    from .launch.liverun import find

    p, _, rec = restore_plan(environ, job, allow_stale=True)
    env = plan.apply(p, environ)
    run_dir = find(store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(environ)), run, environ,
                   f"job {rec.jobid}")
    prog, _ = launcher_path(rec, rec.launch[0])
    fam = families.family(rec.launch[0], prog if os.path.isabs(prog) else find_program(prog, env))
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
