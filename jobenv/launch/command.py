"""`jobenv launch`: restore env + sized launcher argv + per-rank wrapper + the user's command,
run under supervision, with retries and a failure summary naming the first failed rank.

Decisions are data (`Attempt`), computed by pure helpers; this module does the I/O.
"""
from __future__ import annotations

import os
import sys
import time
from functools import partial

from .. import store
from ..errors import BadInput, JobenvError, one_line
from . import ranks, report, sizing, supervise

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Callable, List, Mapping, Optional, Sequence, Tuple


class Options:
    """How to launch, beyond the command: sizing, pass-through flags, supervision."""

    def __init__(self, request: Optional[sizing.Request] = None, launcher_args: Optional[List[str]] = None,
                 label: bool = False, log_dir: Optional[str] = None, limits: Optional[supervise.Limits] = None,
                 retries: int = 0, exclude_failed: bool = False, gpu_bind: bool = False,
                 python: bool = True) -> None:
        self.request = request or sizing.Request()
        self.launcher_args = list(launcher_args or [])
        self.label, self.log_dir = label, log_dir
        self.limits = limits or supervise.Limits()
        self.retries, self.exclude_failed = retries, exclude_failed
        self.gpu_bind, self.python = gpu_bind, python  # gpu_bind: use the profile's binding


def rank_wrapper_argv() -> List[str]:
    """The per-rank wrapper's argv (CONTRACTS item 4): torchrun's variables in every rank,
    start/exit records in JOBENV_RUN_DIR, logs in JOBENV_LOG_DIR."""
    from ..rankwrap import wrapper_argv

    return list(wrapper_argv())


def gpu_bind_mode(rec, environ: Mapping[str, str]) -> str:
    """--gpu-bind: the job's profile's `gpu_bind`, as the wrapper's JOBENV_GPU_BIND."""
    from .. import profiles

    prof = profiles.load_all(environ).get(rec.machine)
    mode = profiles.gpu_bind_mode(prof) if prof is not None else ""
    if not mode:
        raise BadInput(f"--gpu-bind: profile {rec.machine!r} declares no gpu_bind (add `gpu_bind: {{var: "
                       "CUDA_VISIBLE_DEVICES, map: identity}` to it)")
    return mode


_SYSTEM_BINS = ("/usr/bin", "/bin", "/usr/local/bin")


class Attempt:
    """One launch, fully decided: what runs, where, and what it may write."""

    def __init__(self, launcher: List[str], hostfile_text: Optional[str], size: sizing.Size, family: str) -> None:
        self.launcher = launcher  # launcher argv with sizing, label and pass-through flags
        self.hostfile_text, self.size, self.family = hostfile_text, size, family


def _profile_template(rec, environ: Mapping[str, str]):
    from .. import profiles

    profs = profiles.load_all(environ)
    prof = profs.get(rec.machine)
    if prof is None:
        raise BadInput(f"profile {rec.machine!r} of job {rec.jobid} is not installed here; cannot size "
                       "the launch (`jobenv profiles` lists the known ones)")
    return sizing.template_for(prof.launchers, rec.launch[0]), prof.vars


def plan_attempt(rec, req: sizing.Request, opts: Options, hostfile: str, environ: Mapping[str, str],
                 which=None) -> Tuple[Attempt, List[str]]:
    """Decide one attempt (reads profiles only when sizing differs from the saved job)."""
    from .. import software

    warnings: List[str] = []
    size = sizing.choose(rec.hosts, rec.ranks_per_host, req, rec.jobid)
    prog, warn = software.launcher_path(rec, rec.launch[0])
    if warn:
        if (which or _which)(prog, environ) is None:
            raise JobenvError(f"cannot run {prog!r}: {warn.split(';')[0]} and it is not on PATH", 127)
        warnings.append(warn)
    fam = sizing.family(rec.launch[0], prog if os.path.isabs(prog) else (which or _which)(prog, environ))
    if size.whole:
        argv, text = list(rec.launch), None
    else:
        template, variables = _profile_template(rec, environ)
        argv, text = sizing.render_sized(template, size, rec.gpus_per_host, rec.jobid, variables, hostfile, fam)
    argv[0] = prog
    if fam == "openmpi" and os.path.dirname(prog) in _SYSTEM_BINS:
        # Open MPI run by absolute path acts as --prefix and puts its bin directory first on
        # the ranks' PATH: /usr/bin would shadow the job's venv python3.  A system directory
        # is on every node's PATH anyway, so the prefix buys nothing there.
        argv.insert(1, "--noprefix")
    if opts.label:
        argv += sizing.LABEL_FLAGS[fam]
    argv += opts.launcher_args
    return Attempt(argv, text, size, fam), warnings


def per_host_plan(rec, environ: Mapping[str, str], hosts: List[str], hostfile: str
                  ) -> Tuple[List[str], Optional[str]]:
    """(launcher argv, hostfile text or None): one process on each of `hosts` of the job, by
    the recorded launcher (CONTRACTS item 5, for `jobenv stage`).  The caller writes the text
    to `hostfile` when it is not None, then appends its command."""
    from .. import software

    template, variables = _profile_template(rec, environ)
    prog, _ = software.launcher_path(rec, rec.launch[0])
    fam = sizing.family(rec.launch[0], prog if os.path.isabs(prog) else _which(prog, environ))
    argv, text = sizing.per_host(rec.hosts, template, hosts, rec.jobid, variables, hostfile, fam)
    argv[0] = prog
    return argv, text


def _which(prog: str, environ: Mapping[str, str]) -> Optional[str]:
    from ..software import _which as which

    return which(prog, environ.get("PATH", ""))


def _say(msg: str) -> None:
    if sys.stderr is None:  # started with stderr closed: nobody to tell
        return
    sys.stderr.write(f"jobenv: {one_line(msg)}\n")
    sys.stderr.flush()


def run(rec, command: List[str], opts: Options, base_env: Mapping[str, str], dry_run: bool = False,
        rank_prefix: Sequence[str] = ()) -> int:
    """Launch `command` (with retries) in `base_env`, the restore plan's environment; the exit
    code of the last attempt.  `rank_prefix` goes between the per-rank wrapper and the command
    (the staged copy's, which the caller takes from jobenv.stage)."""
    environ = base_env
    runs = store.runs_dir(store.key_for(rec.scheduler, rec.jobid), dict(environ))
    wrapper = rank_wrapper_argv() + list(rank_prefix)
    gpu_bind = gpu_bind_mode(rec, environ) if opts.gpu_bind else ""
    req = opts.request
    rc = 1
    for attempt in range(opts.retries + 1):
        if dry_run:
            plan, _ = plan_attempt(rec, req, opts, os.path.join(runs, "<run>", "hostfile"), base_env)
            from ..shell import join

            print(join(plan.launcher + wrapper + command))
            return 0
        run_dir = ranks.make_run_dir(runs, f"a{attempt}")
        # the wrapper sends a rank's output there instead of the launcher's
        log_dir = ranks.prepare_log_dir(opts.log_dir) if opts.log_dir else None
        hostfile = os.path.join(run_dir, "hostfile")
        plan, warnings = plan_attempt(rec, req, opts, hostfile, base_env)
        for w in warnings:
            _say(f"warning: {w}")
        env = dict(base_env)
        env.update(JOBENV_RUN_DIR=run_dir, JOBENV_LAUNCH_TIME=f"{time.time():.6f}", JOBENV_GPU_BIND=gpu_bind)
        if log_dir:
            env["JOBENV_LOG_DIR"] = log_dir
        if plan.size.subset:  # the wrapper's node rank and MASTER_ADDR follow this launch's hosts
            ranks.write_private(hostfile, sizing.hostfile_text(plan.size))
            env["JOBENV_HOSTFILE"] = hostfile
        elif plan.hostfile_text is not None:
            ranks.write_private(hostfile, plan.hostfile_text)
        if not plan.size.whole:
            env.update(NHOSTS=str(len(plan.size.hosts)), NRANKS_PER_HOST=str(plan.size.ppn),
                       NRANKS=str(plan.size.nranks))
        launcher = list(plan.launcher)
        on_expire: Optional[Callable[[], None]] = None
        if plan.family == "srun" and (opts.limits.timeout or opts.limits.idle_timeout):
            step = f"jobenv-{os.path.basename(run_dir)}"
            launcher[1:1] = [f"--job-name={step}"]
            on_expire = partial(supervise.scancel_step, env, step)
        snapshot: List[ranks.RunState] = []
        out = supervise.run(launcher + wrapper + command, env, opts.limits, log_dir, on_expire,
                            partial(_snapshot, snapshot, run_dir))
        if out.dropped:
            _say(f"warning: {out.dropped} bytes of output dropped: our output was not read fast enough "
                 "(--log-dir DIR keeps every byte)")
        rc = out.returncode
        if rc == 0 and not out.expired:
            return 0
        if out.signalled is not None:
            return rc  # the user (or timeout(1)) stopped it: no summary, no retry
        lines, bad_host = report.summarize(out, run_dir, log_dir, plan.size, opts, plan.family,
                                    snapshot[0] if snapshot else None)
        for line in lines:
            _say(line)
        if attempt < opts.retries:
            if opts.exclude_failed and bad_host:
                req = _without(rec, req, bad_host, len(plan.size.hosts))
            _say(f"retrying ({attempt + 2} of {opts.retries + 1})")
    return rc


def _snapshot(into: List[ranks.RunState], run_dir: str) -> None:
    into.append(ranks.read(run_dir))


def fast_main(argv: List[str]) -> Optional[int]:
    """Kept for `launch` programs written by an older `jobenv save`, which call it first:
    None sends them to the full CLI (`jobenv launch`).  A save writes the new program
    (jobenv.fastlaunch), which skips click."""
    return None


def _without(rec, req: sizing.Request, host: str, nhosts: int) -> sizing.Request:
    """`req` minus `host`, when the job has a spare host to take its place (same host count)."""
    from ..hostlist import compress, expand

    excluded = expand(req.exclude) if req.exclude else []
    trial = req.replace(exclude=compress(excluded + [host]), nhosts=nhosts)
    try:
        sizing.choose(rec.hosts, rec.ranks_per_host, trial, rec.jobid)
    except BadInput:
        _say(f"no spare host to replace {host}; retrying on the same hosts")
        return req
    _say(f"excluding {host} (first failure) from the next attempt")
    return trial
