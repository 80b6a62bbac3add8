"""`jobenv save`: capture the job, choose GPUs, ranks and profile, render, write.

The only side effects are reading the scheduler's files, probing GPUs and writing the
store; everything between is pure so tests can feed plain dicts.
"""
from __future__ import annotations

import getpass
import os
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple

from jobenv import launcher_fit, schedulers
from jobenv.launch.plan.template import context, pick_launcher, render
from jobenv.launch.plan import sizing
from jobenv.capture import devices
from jobenv.profiles import load as profiles
from jobenv.restore import shell
from jobenv.capture import software_env
from jobenv.store import files as store
from jobenv.core.errors import BadInput, JobenvError
from jobenv.core.hostlist import this_host
from jobenv.runtime import families as launch_families
from jobenv.store.record import JobRecord
from jobenv.store.software_field import validate
from jobenv.schedulers.base import Capture


@dataclass
class Options:
    scheduler: Optional[str] = None
    profile: Optional[str] = None
    gpus_per_host: Optional[int] = None
    ranks_per_host: Optional[int] = None
    outside: bool = False  # capture from the scheduler's view of job `job` (`save --job`), not this shell
    job: Optional[str] = None  # with outside: the job id; None finds this user's job on this host


def _now() -> float:
    """Saved time: UTC epoch seconds (record schema 2), comparable across time zones."""
    return round(time.time(), 6)


def ranks_per_host(gpus: int, slots: Optional[List[int]], scheduler: str,
                   override: Optional[int], env: Mapping[str, str]) -> Tuple[int, List[str]]:
    """One rank per GPU; with no GPU, the scheduler's slots, else 1 (a scheduler that allocates
    no slots, as `local`: this host's cores, up to 4)."""
    notes: List[str] = []
    if override is None and env.get("JOBENV_RANKS_PER_HOST"):
        override = devices.parse_override(env["JOBENV_RANKS_PER_HOST"], "JOBENV_RANKS_PER_HOST")
    if override is not None:
        if override < 1:
            raise BadInput("--ranks-per-host must be at least 1")
        return override, notes
    if gpus > 0:
        return gpus, notes
    if slots:
        if len(set(slots)) > 1:
            notes.append(f"uneven slots per host {sorted(set(slots))}: launching {min(slots)} per host")
        return min(slots), notes
    if scheduler not in schedulers.ALLOCATES:
        return max(1, min(os.cpu_count() or 1, 4)), notes
    return 1, notes


def _capture(env: Mapping[str, str], opts: Options) -> Tuple[Capture, Optional[Dict[str, object]]]:
    """The job as this shell's variables describe it, or (`save --job`) as its scheduler
    does, with the record's provenance."""
    if not opts.outside:
        return schedulers.capture(env, opts.scheduler), None
    from jobenv.capture import outside

    name = outside.scheduler_for(env, opts.scheduler)
    cap, command = outside.describe(name, opts.job or outside.find(name, env), env)
    return cap, outside.provenance(cap, command, this_host(env), "")


def _gpus(env: Mapping[str, str], opts: Options, cap: Capture, prof_gpus: Optional[int], captured: bool,
          probe: Callable[[], Optional[Tuple[int, str]]]) -> Tuple[int, str]:
    """GPUs per host by devices.gpus_per_host's rule; from outside the job, this shell's
    devices and masks say nothing about the job's nodes: the scheduler's count is the evidence."""
    if not captured:
        return devices.gpus_per_host(env, opts.gpus_per_host, cap.gpus_hint, prof_gpus, probe)
    own = {k: env[k] for k in ("JOBENV_GPUS_PER_HOST",) if k in env}
    gpus, source = devices.gpus_per_host(own, opts.gpus_per_host, cap.gpus_hint, prof_gpus, lambda: None)
    if source == "Slurm gres":  # the scheduler's count, under the name of the field it came from
        source = cap.sources.get("gpus_per_host", source)
    return gpus, "no GPU named by the scheduler" if source == "no GPU found" else source


def build(env: Mapping[str, str], opts: Options,
          probe: Callable[[], Optional[Tuple[int, str]]] = devices.probe,
          hostname: Optional[str] = None) -> Tuple[JobRecord, Dict[str, str]]:
    """Build the record (pure but for reading the nodefile, probing GPUs or, with
    opts.outside, asking the scheduler)."""
    cap, prov = _capture(env, opts)
    profs = profiles.load_all(env)
    prof = profiles.for_job(profs, cap.scheduler, cap.jobid, cap.hosts, env, opts.profile)
    gpus, gpu_source = _gpus(env, opts, cap, None if prof.generic else prof.gpus_per_host, prov is not None, probe)
    ppn, notes = ranks_per_host(gpus, cap.slots, cap.scheduler, opts.ranks_per_host, env)
    key = store.key_for(cap.scheduler, cap.jobid)
    hostfile = store.hostfile_path(key, cap.hosts, env)
    cand = pick_launcher(prof)  # the launch decision: recorded, never re-found
    ctx = context(len(cap.hosts), ppn, gpus, hostfile, cap.jobid, prof.vars)
    program = render(cand["argv"], ctx)[0]
    sw = software_env.capture(env, program)
    row, fam = launch_families.identify(program, sw["launcher"] or None)  # the one derivation of the family
    if prov is not None and not fam:
        raise launch_families.unknown(program)  # it could not be told which job to run in
    template = sizing.job_template(cand["argv"], fam, prov is not None)  # from outside: attached to the job
    argv = render(template, ctx)
    status: Dict[str, object] = {"state": "live", "reason": "saved inside the job", "gpus_from": gpu_source,
                                 "nodefile": cap.nodefile}
    if prov is not None:
        prov["fields"]["gpus_per_host"] = gpu_source  # type: ignore[index]
        status["reason"] = f"captured from outside: `{prov['command']}` says {cap.state}"
    try:
        user = getpass.getuser()
    except Exception:  # no passwd entry in some containers
        user = str(os.getuid())
    found = row if sw["launcher"] else None
    bad = launcher_fit.mismatch(prof.name, launcher_fit.declared(prof.launchers, str(cand["argv"][0])), found,
                                sw["launcher"] or argv[0])
    fit = [f"{bad[0]}: the first launch will fail; {bad[1]}"] if bad else []
    if found is not None and (found.mpi in ("mpich", "openmpi") or found.name == "srun") and sw["python"]:
        from jobenv.launch.plan.mpibuilds import mpi_builds

        sw["mpi"] = mpi_builds(sw["python"]["executable"], env)
        fit += launcher_fit.world_misfit(found.flavor, sw["mpi"])
    rec = JobRecord(
        scheduler=cap.scheduler, jobid=cap.jobid, jobname=cap.jobname, machine=prof.name,
        hosts=cap.hosts, gpus_per_host=gpus, ranks_per_host=ppn, hostfile=hostfile,
        launch=argv, launch_env=dict(prof.env), env=cap.env, created_at=_now(),
        created_on=hostname or this_host(env), user=user,
        warnings=cap.warnings + notes + fit, status=status,
        software=sw, provenance=prov, launch_template={"argv": template, "vars": dict(prof.vars)},
        launcher_family=fam,
    )
    return rec, {"key": key}


def save(env: Mapping[str, str], opts: Options, warn: Optional[Callable[[str], None]] = None
         ) -> Tuple[JobRecord, str]:
    """Capture and write; returns the record and its JSON path.  `warn` hears what this save
    records differently from the job's previous record (its launcher, its Python)."""
    store.ensure_dirs(env)
    rec, meta = build(env, opts)
    json_path = store.paths_for(meta["key"], env)[0]
    if warn is not None and os.path.lexists(json_path):
        try:
            old = validate(store.load(json_path).software) or {}
        except (OSError, ValueError, BadInput, JobenvError):
            old = {}
        for line in launcher_fit.changed(old, validate(rec.software) or {}):
            warn(line)
    env_text = shell.render_sh(rec, json_path)
    store.write_job(rec, env_text, env)
    from jobenv.launch.plan.executable import install

    install(env)  # the `launch` program that restored shells put first on PATH
    return rec, json_path
