"""One launch attempt decided as data: the sized launcher argv (`Attempt`), the launcher's
environment, and the one-process-per-host argv `jobenv stage` runs.

Pure decisions from the record, the profiles and the request, apart from the supervised
run that jobenv.launch.command does with them; `attempt_env` writes only the attempt's
private hostfile.
"""
from __future__ import annotations

import os
import sys
import time

import jobenv

from jobenv.core.errors import BadInput, JobenvError
from jobenv.core.hostlist import hostfile_text
from jobenv.runtime.discovery import launch_port
from jobenv.runtime import families
from jobenv import schedulers
from jobenv.launch.plan import flags, sizing
from jobenv.launch import ranks
from jobenv.launch.types import Request

TYPE_CHECKING = False  # `import typing`/`dataclasses` cost ~50 ms: `launch` starts on every run
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

    from jobenv.store.record import JobRecord
    from jobenv.launch.types import Options
    Which = Callable[[str, Mapping[str, str]], Optional[str]]


def gpu_bind_mode(rec: JobRecord, environ: Mapping[str, str]) -> str:
    """--gpu-bind: the job's profile's `gpu_bind`, as the wrapper's JOBENV_GPU_BIND (`VAR:V0,V1,...`)."""
    from jobenv.profiles import load as profiles
    from jobenv.rankwrap import gpu_bind_cycle

    prof = profiles.load_all(environ).get(rec.machine)
    mode = profiles.gpu_bind_mode(prof) if prof is not None else ""
    if not mode:
        raise BadInput(f"--gpu-bind: profile {rec.machine!r} declares no gpu_bind (add `gpu_bind: {{var: "
                       "CUDA_VISIBLE_DEVICES, map: identity}` to it)")
    try:
        return gpu_bind_cycle(mode)
    except ValueError as e:
        raise BadInput(f"--gpu-bind: profile {rec.machine!r}: {e}") from None


HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(jobenv.__file__)), "rankhook")  # wherever this module sits

_SYSTEM_BINS = ("/usr/bin", "/bin", "/usr/local/bin")


class Attempt:
    """One launch, fully decided: what runs, where, and what it may write."""

    def __init__(self, launcher: List[str], hostfile: str, hostfile_text: Optional[str], size: sizing.Size,
                 family: str) -> None:
        self.launcher = launcher  # launcher argv with sizing, label and pass-through flags
        self.hostfile = hostfile  # the attempt's hostfile: the path the launcher argv names
        self.hostfile_text = hostfile_text  # what attempt_env writes there (None: no hostfile)
        self.size, self.family = size, family


def _job_template(rec: JobRecord, fam: str, environ: Mapping[str, str]) -> Tuple[List[Any], Dict[str, str]]:
    """(template, its variables): the record's (save's decision); a record older than version 3
    carries none, so its profile's is found as save would have rendered it."""
    if rec.launch_template is not None:
        return list(rec.launch_template["argv"]), dict(rec.launch_template["vars"])
    from jobenv.profiles import load as profiles

    profs = profiles.load_all(environ)
    prof = profs.get(rec.machine)
    if prof is None:
        raise BadInput(f"profile {rec.machine!r} of job {rec.jobid} is not installed here; cannot size "
                       "the launch (`jobenv profiles` lists the known ones)")
    template = sizing.template_for(prof.launchers, rec.launch[0])
    return sizing.job_template(template, fam, rec.provenance is not None), prof.vars


class Launcher:
    """The program a launch runs (`prog`), its family, whether it is not the job's family (then
    launch --launcher's own flags size it: launcher.retarget), and the warning choosing it gave."""

    def __init__(self, prog: str, family: str, other: bool, warning: Optional[str]) -> None:
        self.prog, self.family, self.other, self.warning = prog, family, other, warning


def choose_launcher(rec: JobRecord, opts: Options, environ: Mapping[str, str], which: Optional[Which] = None
                    ) -> Launcher:
    """The launcher of every attempt of this launch: `launch --launcher`'s, else the job's recorded
    one while it is here, else the recorded name on PATH (JobenvError 127 when neither is)."""
    from jobenv.launch.plan.launcher import given_launcher, launcher_family, launcher_path

    find = which or find_program
    if opts.launcher:
        path, fam = given_launcher(opts.launcher, lambda name: find(name, environ))
        return Launcher(path, fam, fam != launcher_family(rec, environ), None)
    prog, warn = launcher_path(rec, rec.launch[0])
    if warn and find(prog, environ) is None:
        raise JobenvError(f"cannot run {prog!r}: {warn.split(';')[0]} and it is not on PATH", 127)
    return Launcher(prog, launcher_family(rec, environ), False, warn)


def plan_attempt(rec: JobRecord, req: Request, opts: Options, hostfile: str, environ: Mapping[str, str],
                 which: Optional[Which] = None, launcher: Optional[Launcher] = None) -> Tuple[Attempt, List[str]]:
    """Decide one attempt at `hostfile` (its one path: the launcher argv names it, attempt_env
    writes it).  Reads profiles only for a record older than version 3 sized differently.
    `launcher`: the launch's choose_launcher, made once for all its attempts (else made here)."""
    from jobenv.launch.plan.launcher import retarget

    size = sizing.choose(rec.hosts, rec.ranks_per_host, req, rec.jobid, oversubscribe=rec.scheduler not in schedulers.ALLOCATES)
    chosen = launcher or choose_launcher(rec, opts, environ, which)
    prog, fam = chosen.prog, chosen.family
    warnings: List[str] = [chosen.warning] if chosen.warning else []
    if chosen.other:
        argv = retarget(prog, families.get(fam), size.nranks, size.ppn, len(size.hosts), hostfile)
        text = hostfile_text(size.hosts) if len(size.hosts) > 1 else None
    elif size.whole:
        argv, text = list(rec.launch), None
    else:
        template, variables = _job_template(rec, fam, environ)
        argv, text = sizing.render_sized(template, size, rec.gpus_per_host, rec.jobid, variables, hostfile, fam)
    if text is None and size.subset:  # the wrapper's node rank and MASTER_ADDR follow this launch's hosts
        text = hostfile_text(size.hosts)
    argv[0] = prog
    row = families.get(fam)
    if os.path.dirname(prog) in _SYSTEM_BINS:  # on every node's PATH anyway: no prefix from it
        families.insert(argv, row, list(row.system_bin))
    if size.ppn > rec.ranks_per_host and row.oversubscribe and not set(row.oversubscribe) & set(argv):
        families.insert(argv, row, list(row.oversubscribe))
    consent = environ.get("OMPI_ALLOW_RUN_AS_ROOT") == "1" == environ.get("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
    if row.as_root and os.geteuid() == 0 and not consent and not set(row.as_root) & set(argv):
        families.insert(argv, row, list(row.as_root))
        warnings.append(f"running as root: {row.title} refuses root without {' '.join(row.as_root)}, passed to it")
    if row.interrupt and not set(row.interrupt) & set(argv[row.words:]):
        families.insert(argv, row, list(row.interrupt[:1]))
    if opts.label:
        argv += row.label
    if opts.gpu_bind and row.gpu_off and any(w.split("=", 1)[0] == row.gpu_off[0] for w in argv[row.words:]):
        argv = flags.override(argv, row, list(row.gpu_off))  # one binding: the wrapper's
    argv = flags.override(argv, row, opts.launcher_args)
    if fam == "srun":
        warnings += srun_mpi(rec, argv, row, environ)
    return Attempt(argv, hostfile, text, size, fam), warnings


def srun_mpi(rec: JobRecord, argv: List[str], row: families.Family, environ: Mapping[str, str]) -> List[str]:
    """srun's --mpi for the job's recorded MPI packages (the rule: launcher_fit.srun_world), added
    to `argv` when the user gave none (an --mpi flag, SLURM_MPI_TYPE); the warnings for the
    worlds that would split into singletons."""
    from jobenv.store.software_field import validate
    from jobenv.launcher_fit import srun_world

    built = (validate(rec.software) or {}).get("mpi") or {}
    if not built:
        return []
    kind, warnings = srun_world(built, _mpi_given(argv[row.words:], environ), lambda: _mpi_list(argv[0], environ))
    if kind is not None:
        families.insert(argv, row, [f"--mpi={kind}"])
    return warnings


def _mpi_given(words: List[str], environ: Mapping[str, str]) -> Optional[str]:
    """The --mpi type the launch line (the profile's, --launcher-args) or SLURM_MPI_TYPE gives."""
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name == "--mpi":
            return value if eq else words[i + 1] if i + 1 < len(words) else ""
    return environ.get("SLURM_MPI_TYPE") or None


def _mpi_list(srun: str, environ: Mapping[str, str]) -> str:
    """What `srun --mpi=list` prints (both streams: Slurm versions differ), "" when it cannot run."""
    import subprocess

    try:
        p = subprocess.run([srun, "--mpi=list"], env=dict(environ), capture_output=True, text=True,
                           errors="replace", timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    return p.stdout + p.stderr


def per_host_plan(rec: JobRecord, environ: Mapping[str, str], hosts: List[str], hostfile: str
                  ) -> Tuple[List[str], Optional[str]]:
    """(launcher argv, hostfile text or None): one process on each of `hosts` of the job, by
    the recorded launcher (what `jobenv stage` runs on every host).  The caller writes the text
    to `hostfile` when it is not None, then appends its command."""
    from jobenv.launch.plan.launcher import launcher_family, launcher_path

    fam = launcher_family(rec, environ)
    template, variables = _job_template(rec, fam, environ)
    prog, _ = launcher_path(rec, rec.launch[0])
    argv, text = sizing.per_host(rec.hosts, template, hosts, rec.jobid, variables, hostfile, fam)
    argv[0] = prog
    return argv, text


def find_program(prog: str, environ: Mapping[str, str]) -> Optional[str]:
    """`prog`'s path on the PATH of `environ` (the launch's, not ours; absolute directories
    only, schedulers.base.command_path), None when absent."""
    from jobenv.schedulers.base import command_path

    return command_path(prog, environ.get("PATH", ""))


def attempt_env(plan: Attempt, base_env: Mapping[str, str], run_dir: str, log_dir: Optional[str],
                 gpu_bind: str, hook: bool = True, stacks: bool = False) -> Dict[str, str]:
    """The launcher's environment for one attempt; writes the attempt's hostfile when it has one.
    With `hook`, the ranks' Python hook's directory goes first on PYTHONPATH (it removes itself);
    with `stacks`, it arms faulthandler into the attempt's stacks/ (made here, private)."""
    from jobenv.rankwrap import DUMP_SIGNAL, LAUNCH_SETS

    # JOBENV_HOSTNAME names one host: exported, the launcher would carry it to every host of the launch
    env = {k: v for k, v in base_env.items() if k not in LAUNCH_SETS and k != "JOBENV_HOSTNAME"}
    env.update(JOBENV_RUN_DIR=run_dir, JOBENV_LAUNCH_TIME=f"{time.time():.6f}", JOBENV_GPU_BIND=gpu_bind)
    env["JOBENV_DUMP_SIGNAL"] = str(DUMP_SIGNAL)
    env["JOBENV_PYTHON"] = sys.executable  # runs each rank's keeper (jobenv/rank/keeper.py)
    if log_dir:
        env["JOBENV_LOG_DIR"] = log_dir
    port = launch_port(env)  # one port for every rank of this attempt: the wrapper derives none
    if port is not None:
        env["MASTER_PORT"] = str(port)
    if hook:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (HOOK_DIR, env.get("PYTHONPATH")) if p)
    if hook and stacks:
        os.mkdir(os.path.join(run_dir, "stacks"), 0o700)
        env["JOBENV_STACKS"] = "1"
    if plan.hostfile_text is not None:
        ranks.write_private(plan.hostfile, plan.hostfile_text)
    if plan.size.subset:  # the wrapper's node rank and MASTER_ADDR follow this launch's hosts
        env["JOBENV_HOSTFILE"] = plan.hostfile
    if not plan.size.whole:
        env.update(NHOSTS=str(len(plan.size.hosts)), NRANKS_PER_HOST=str(plan.size.ppn),
                   NRANKS=str(plan.size.nranks))
    return env
