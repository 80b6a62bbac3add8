"""`jobenv stage`: copy the job's Python environment to node-local disk on every host.

Pack once into the store (shared), unpack on every host in parallel through the job's
launcher, verify, record where each host's copy is.  See README "Staging".
"""
from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import click

from jobenv import schedulers
from jobenv.core.params import Count, Seconds
from jobenv.core.errors import BadInput, JobenvError, JobEnded, one_line
from jobenv.core.numparse import MAX_HOSTS, plural
from jobenv.store.record import JobRecord
from jobenv.stage import outcome
from jobenv.stage.outcome import Fraction
from jobenv.stage.progress import Progress, mb as _mb

if TYPE_CHECKING:
    from jobenv.stage.manifest import Entry, Env


def _say(msg: str) -> None:
    click.echo(one_line(msg))


def _warn(msg: str) -> None:
    sys.stderr.write(f"jobenv: warning: {one_line(msg)}\n")


def source_prefix(rec: JobRecord, environ: Mapping[str, str]) -> str:
    """The recorded environment (software.python.prefix), else the active venv/conda env."""
    software = getattr(rec, "software", None) or {}
    py = software.get("python") if isinstance(software, dict) else None
    py = py if isinstance(py, dict) else {}
    prefix = py.get("prefix")
    if isinstance(prefix, str) and py.get("kind") in ("venv", "conda"):
        return prefix
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        if environ.get(var):
            return environ[var]
    if sys.prefix != sys.base_prefix:
        return sys.prefix
    raise BadInput("no Python environment to stage: none recorded for the job, no VIRTUAL_ENV or "
                   "CONDA_PREFIX; activate one or pass --env PATH")


def copy_name(prefix: str) -> str:
    """Per-environment directory name: the env's name plus a hash of where it lives."""
    import hashlib

    return f"{os.path.basename(prefix.rstrip('/')) or 'env'}-{hashlib.sha1(prefix.encode('utf-8', 'surrogateescape')).hexdigest()[:8]}"


def update_record(path: str, staged: Dict[str, Optional[Dict[str, Any]]]) -> None:
    """Set (or, for None, drop) hosts' `staged` entries under the job's writer lock."""
    from jobenv.store import files as store

    def change(rec: JobRecord) -> None:
        for host, entry in staged.items():
            if entry is None:
                rec.staged.pop(host, None)
            else:
                rec.staged[host] = entry

    store.update(path, change)


def _run_hosts(rec: JobRecord, rec_path: str, spec: Dict[str, Any], python: str, timeout: float,
               progress: Progress) -> Dict[str, Dict[str, Any]]:
    """Run the worker on every host; {record host: report} (missing hosts get an error report)."""
    from jobenv.stage import hosts as hosts_mod

    argv = hosts_mod.per_host_argv(rec, os.environ) + hosts_mod.worker_argv(python, spec)
    env = hosts_mod.launcher_environ(rec, rec_path, os.environ)
    try:
        done, tail, rc = hosts_mod.run(argv, env, timeout, progress.event)
    except OSError as exc:
        raise JobenvError(f"cannot run {argv[0]!r}: {exc.strerror}", 127) from None
    finally:
        progress.stop()
    out: Dict[str, Dict[str, Any]] = {}
    here = rec.scheduler in schedulers.THIS_HOST_ONLY
    for rep in done:
        # such a job's one host is this one, whatever JOBENV_HOSTNAME calls it
        host = rec.hosts[0] if here else hosts_mod.match_host(str(rep.get("host")), rec.hosts)
        if host is None:
            _warn(f"report from {rep.get('host')}, which is not a host of job {rec.jobid}")
        elif host in out:
            _warn(f"{host}: two reports (one process per host expected); keeping the first")
        else:
            out[host] = rep
    for host in rec.hosts:
        if host not in out:
            why = tail or f"launcher exited {rc}"
            out[host] = {"ok": False, "host": host, "error": f"no report (host unreachable or launcher failed: {why})"}
    return out


@click.command("stage")
@click.option("--job", "-j", metavar="ID", help="Job id (default: as for `get`).")
@click.argument("args", nargs=-1, metavar="[ID] [DIR]...")
@click.option("--env", "env_path", metavar="PATH", help="Environment to stage (default: the job's recorded one, else the active venv / conda env).")
@click.option("--to", "to", metavar="DIR", help="Directory for the copy on each host; %h is the host name (default: $JOBENV_STAGE_DIR, else $TMPDIR or /tmp, /jobenv-$USER).")
@click.option("--dry-run", is_flag=True, help="Say what would be packed and where it would go; change nothing.")
@click.option("--min-hosts", type=Count(1, MAX_HOSTS), metavar="N", help="Succeed when at least N hosts have a verified copy (default: all); the others are named and left out of later launches.")
@click.option("--min-fraction", type=Fraction(), metavar="F", help="Succeed when at least this fraction of the hosts (0 < F <= 1) has a verified copy.")
@click.option("--fan-out", type=Count(0, 64), default=2, show_default=True, metavar="K",
              help="Hosts each host relays the archive to (the shared file system is read by one host); "
                   "0: every host reads the shared file system itself.")
@click.option("--peer-timeout", type=Seconds(1), default=60, show_default=True,
              help="Seconds a host waits for its relay parent before it reads the shared file system itself.")
@click.option("--clean", is_flag=True, help="Remove the copies on every host (and the archive).")
@click.option("--base", type=click.Choice(["auto", "yes", "no"]), default="auto", show_default=True,
              help="Stage a venv's base interpreter too: auto = when it lives on a shared file system.")
@click.option("--timeout", type=Seconds(1), default=3600, show_default=True, help="Seconds to wait for all hosts.")
def stage(job: Optional[str], args: Tuple[str, ...], env_path: Optional[str], to: Optional[str], dry_run: bool,
          min_hosts: Optional[int], min_fraction: Optional[float], fan_out: int, peer_timeout: float, clean: bool,
          base: str, timeout: float) -> None:
    """Copy the job's Python environment, or each DIR, to node-local disk on every host.

    A DIR (data sets, checkpoints) is an argument with a `/` in it, like ./data."""
    from jobenv.stage import manifest
    from jobenv.stage.manifest import EnvError

    dirs = [a for a in args if "/" in a]
    ids = list(dict.fromkeys([a for a in args if "/" not in a] + ([job] if job is not None else [])))
    if len(ids) > 1:
        raise click.UsageError(f"two different jobs given ({ids[0]!r} and {ids[1]!r})")
    if dirs and env_path is not None:
        raise click.UsageError("give --env or directories, not both")
    try:
        sources = [manifest.inspect_dir(d) for d in dirs]
    except EnvError as exc:
        raise BadInput(str(exc)) from None
    opts = (to, dry_run, min_hosts, min_fraction, fan_out, peer_timeout, clean, base, timeout)
    todo: List[Optional[Env]] = list(sources) or [None]
    for src in todo:
        _stage_one(ids[0] if ids else None, src, env_path, *opts)


def _stage_one(job: Optional[str], src: Optional[Env], env_path: Optional[str], to: Optional[str], dry_run: bool,
               min_hosts: Optional[int], min_fraction: Optional[float], fan_out: int, peer_timeout: float, clean: bool,
               base: str, timeout: float) -> None:
    """Stage one source: the job's environment (src None; its copies go into the record) or a directory."""
    from jobenv.store import files as store
    from jobenv.store.lookup import which_job
    from jobenv.store.liveness import job_state
    from jobenv.stage import hosts as hosts_mod
    from jobenv.stage import manifest, pack
    from jobenv.stage.manifest import EnvError

    path, rec = which_job(os.environ, job, _warn)
    state, reason = job_state(rec, os.environ)
    if state == "ended":
        raise JobEnded(f"job {rec.jobid} has ended ({reason}); nothing to stage to")
    if to is not None and not os.path.isabs(to):
        raise BadInput(f"--to {to!r}: give an absolute directory (%h for the host name)")
    try:
        env = src or manifest.inspect(os.path.abspath(env_path or source_prefix(rec, os.environ)), dict(os.environ), base)
    except EnvError as exc:
        raise BadInput(str(exc)) from None
    python = hosts_mod.local_python(env.prefix) if src is None else sys.executable
    name = copy_name(env.prefix)
    where = to or manifest_root_hint()
    tty = sys.stderr.isatty()
    sdir = pack.stage_dir(store.home(dict(os.environ)))
    if clean:
        _say(f"removing {name} from {where} on {plural(rec.nhosts, 'host')}")
        spec: Dict[str, Any] = {"clean": True, "to": to, "name": name, "dry_run": dry_run}
        results = _run_hosts(rec, path, spec, python, timeout, Progress(rec.nhosts, 0, False))
        if not dry_run:
            if src is None:
                update_record(path, {h: None for h in rec.hosts if results[h].get("ok")})
            pack.prune(sdir, env.prefix, None)
        outcome.finish(rec, results, outcome.needed(rec.nhosts, min_hosts, min_fraction), False)
        return
    if env.kind == "venv":
        _say_base(env)
    try:
        items = manifest.entries(env)
    except EnvError as exc:
        raise BadInput(str(exc)) from None
    key = manifest.digest(items)
    nfiles, nbytes = manifest.summary(items)
    _say(f"{env.kind} {env.prefix}: {nfiles:,} entries, {_mb(nbytes)}, manifest {key[:12]}")
    if dry_run:
        _say_dry_run(rec, sdir, key, where, name)
        return
    t = time.time()
    archive, side = _pack(env, items, key, sdir, nbytes)
    spec = {"archive": archive, "sidecar": side, "key": key, "to": to, "name": name}
    rdir = None
    if rec.nhosts > 1 and fan_out > 0:  # a broadcast: one host reads the archive, the others get it from a peer
        from jobenv.stage import relaydir

        rdir, secret = relaydir.make_dir(sdir, list(rec.hosts), time.time() + timeout)
        spec["relay"] = {"dir": rdir, "secret": secret, "fanout": fan_out, "wait": peer_timeout}
    try:
        results = _run_hosts(rec, path, spec, python, timeout, Progress(rec.nhosts, nbytes, tty))
    finally:
        if rdir is not None:
            import shutil

            shutil.rmtree(rdir, ignore_errors=True)
    now = time.time()
    if src is None:  # the environment's copies are what `get` restores; a directory's are the user's to use
            update_record(path, {h: ({"prefix": r["prefix"], "manifest": key, "verified_at": now} if r.get("ok") else None)
                             for h, r in results.items()})
    pack.prune(sdir, env.prefix, key)
    copied = [r for r in results.values() if r.get("ok") and not r.get("unchanged")]
    _say(f"{sum(1 for r in results.values() if r.get('ok'))}/{rec.nhosts} hosts verified "
         f"({len(copied)} copied, {sum(1 for r in results.values() if r.get('unchanged'))} unchanged) "
         f"in {time.time() - t:.1f} s")
    line = outcome.shared_read(results, _archive_bytes(side))
    if line:
        _say(line)
    tolerant = min_hosts is not None or min_fraction is not None
    outcome.finish(rec, results, outcome.needed(rec.nhosts, min_hosts, min_fraction), tolerant)


def _say_base(env: Env) -> None:
    """Whether a venv's base interpreter goes along (--base auto: when it is on a shared file system)."""
    where_base = f"{env.base} ({env.base_fs or 'unknown fs'})"
    _say(f"base interpreter {where_base}: " + ("staged too (shared file system)" if env.base_shared
         else "not staged (node-local; --base yes to stage it)"))


def _say_dry_run(rec: JobRecord, sdir: str, key: str, where: str, name: str) -> None:
    """What `stage --dry-run` would do: the archive, each host's copy (the first 8), the launcher."""
    from jobenv.stage import hosts as hosts_mod
    from jobenv.stage.worker import host_path

    exists = os.path.exists(os.path.join(sdir, key[:16] + ".json"))
    _say(f"archive {os.path.join(sdir, key[:16] + '.tar')} ({'exists, reused' if exists else 'would be packed'})")
    for h in rec.hosts[:8]:
        _say(f"{h}: would stage to {os.path.join(host_path(where, h), name)}")
    if rec.nhosts > 8:
        _say(f"... and {rec.nhosts - 8} more hosts")
    argv = hosts_mod.per_host_argv(rec, os.environ, write=False)
    _say("via " + (" ".join(argv) if argv else "this host directly (local job)"))


def _pack(env: Env, items: List[Entry], key: str, sdir: str, nbytes: int) -> Tuple[str, str]:
    """Pack the environment into the shared stage directory (reused when current); (archive, sidecar)."""
    from jobenv.stage import pack
    from jobenv.stage.manifest import EnvError

    from jobenv.core.output import progress

    t = time.time()
    try:
        with progress(f"packing {_mb(nbytes)} of {env.prefix} (once per environment; later stages reuse it)"):
            archive, side, packed = pack.pack(env, items, key, sdir)
    except EnvError as exc:
        raise BadInput(str(exc)) from None
    secs = time.time() - t
    _say(f"packed {_mb(nbytes)} into {archive} in {secs:.1f} s ({_mb(nbytes / max(secs, 1e-6))}/s)" if packed
         else f"archive {archive} is current (no packing)")
    return archive, side


def manifest_root_hint() -> str:
    from jobenv.stage.worker import default_root

    return default_root(os.environ)


def _archive_bytes(side: str) -> int:
    import json

    try:
        with open(side) as f:
            return int(json.load(f).get("archive_bytes") or 0)
    except (OSError, ValueError, AttributeError):
        return 0
