"""Machine profiles: per-machine launch templates in YAML.

Shipped profiles live in `jobenv/profiles/*.yaml`; users add or override them (same
`name`) in `$XDG_CONFIG_HOME/jobenv/profiles/` (default `~/.config/jobenv/profiles/`) or
in the files and directories listed in JOBENV_PROFILES.  Only `jobenv save` and
`jobenv profiles` read them, so yaml stays off the `get` path.

A profile::

    name: polaris
    description: ALCF Polaris (PBS Pro, 4 A100 per node, Cray PALS mpiexec)
    scheduler: pbs
    match: {jobid: '\\.polaris-pbs-', hosts: '^x3\\d{3}c'}   # any one matching selects it
    gpus_per_host: 4
    vars: {depth: 16}
    launchers:                        # the first whose `requires` is on PATH wins
      - argv: [mpiexec, -n, '{nranks}', -ppn, '{ppn}', --hostfile, '{hostfile}']
    env: {MPICH_GPU_SUPPORT_ENABLED: '1'}   # exported with the job's variables
    gpu_bind: {var: CUDA_VISIBLE_DEVICES, map: reverse}   # opt-in: `jobenv launch --gpu-bind`
    submit: {directives: ['-l select={nodes}:system=polaris'], defaults: {queue: debug}}   # `jobenv submit`
    fabric: {nccl: {network: ofi, load: '...', env: {NCCL_NET: AWS Libfabric}, min_busbw: 5, source: URL}}

`gpu_bind` gives each local rank one device through the per-rank wrapper: `var` is one of
jobenv.rankwrap.GPU_VARS; `map` is identity (device = local rank % devices), reverse
(devices - 1 - that: Polaris's NUMA order), tile (`gpu.tile`, Aurora's
ZE_AFFINITY_MASK, with `tiles` per device) or order (device = order[local rank %
len(order)], `order` a list of 1 to 64 device numbers: Frontier's GCDs closest to each
core group); `devices` defaults to gpus_per_host (divided by `tiles` for tile).  `gpu_bind_mode` renders it as `VAR:MAP:DEVICES[:TILES]`, which `jobenv.rankwrap.gpu_bind_cycle` makes the wrapper's JOBENV_GPU_BIND.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from jobenv.profiles import check
from jobenv.profiles import submit as submit_keys
from jobenv.core.errors import JobenvError
from jobenv.core.numparse import MAX_PER_HOST
from jobenv.profiles.check import MAX_BYTES, ProfileError
from jobenv.schedulers import NAMES as SCHEDULERS
from jobenv.schedulers import PROFILES as DEFAULT_PROFILES

# Values every launch template may use; profiles add their own through `vars`.
CONTEXT_KEYS = ("nhosts", "nranks", "ppn", "ngpus", "gpus_per_host", "hostfile", "jobid")


@dataclass
class Profile:
    name: str
    scheduler: str
    launchers: List[Dict[str, Any]]
    description: str = ""
    match: Dict[str, Any] = field(default_factory=dict)
    gpus_per_host: Optional[int] = None
    vars: Dict[str, str] = field(default_factory=dict)
    env: Dict[str, str] = field(default_factory=dict)
    source: str = ""
    gpu_bind: Dict[str, Any] = field(default_factory=dict)
    submit: Dict[str, Any] = field(default_factory=dict)  # batch-script directives (profiles.submit.submit)
    fabric: Dict[str, Any] = field(default_factory=dict)  # per backend: what the selftest expects (profiles.check.fabric)
    container: Dict[str, Any] = field(default_factory=dict)  # the site's container runtimes (profiles.check.container)

    @property
    def generic(self) -> bool:
        return not self.match

    def matches(self, jobid: str, hosts: List[str], env: Mapping[str, str]) -> bool:
        m = self.match
        if "jobid" in m and re.search(m["jobid"], jobid):
            return True
        if "hosts" in m and hosts and re.search(m["hosts"], hosts[0]):
            return True
        for var, pattern in (m.get("env") or {}).items():
            if var in env and re.search(pattern, env[var]):
                return True
        return False


def package_dir() -> Path:
    return Path(__file__).parent  # the YAML files sit beside this module


def search_paths(env: Mapping[str, str]) -> List[Path]:
    """Profile locations, lowest precedence first."""
    config = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    paths = [package_dir(), Path(config) / "jobenv" / "profiles"]
    paths += [Path(p) for p in env.get("JOBENV_PROFILES", "").split(os.pathsep) if p]
    return paths


def parse(text: str, source: str) -> Profile:
    """Parse and validate one profile; errors name the file and line (jobenv.profiles.check)."""
    data = check.load_yaml(text, source)
    lines = check.key_lines(text)

    def fail(key: str, why: str) -> ProfileError:
        at = f" line {lines[key]}" if key in lines else ""
        return ProfileError(f"profile {source}{at}: {key}: {why}")

    if not isinstance(data, dict):
        raise ProfileError(f"profile {source}: expected a mapping of keys (name, scheduler, launchers)")
    unknown = check.first_unknown(data, check.KEYS)
    if unknown:
        raise fail(unknown, "unknown key")
    name = data.get("name")
    if not check.is_word(name, r"[A-Za-z0-9_.-]+"):
        raise fail("name", "must be a word of letters, digits, '.', '_' or '-'")
    if data.get("scheduler") not in SCHEDULERS:
        raise fail("scheduler", f"must be one of {', '.join(SCHEDULERS)}")
    if not isinstance(data.get("description") or "", str):
        raise fail("description", "must be a string")
    match = check.match(data.get("match") or {}, fail)
    gpus = data.get("gpus_per_host")
    if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or not 0 <= gpus <= MAX_PER_HOST):
        raise fail("gpus_per_host", f"must be a whole number from 0 to {MAX_PER_HOST}")
    variables = data.get("vars") or {}
    envs = data.get("env") or {}
    for key, val in (("vars", variables), ("env", envs)):
        if not isinstance(val, dict) or not all(isinstance(v, (str, int, float)) for v in val.values()):
            raise fail(key, "must map names to strings or numbers")
    if not all(check.is_word(k) for k in variables):
        raise fail("vars", "names must be words (letters, digits, '_')")
    if not all(check.is_word(k, r"[A-Za-z_]\w*") for k in envs):
        raise fail("env", "variable names must be shell identifiers")
    launchers = check.launchers(data.get("launchers"), set(CONTEXT_KEYS) | set(variables), fail)
    bind = check.gpu_bind(data.get("gpu_bind"), gpus, fail)
    batch = submit_keys.submit(data.get("submit"), variables, fail)
    fabric = check.fabric(data.get("fabric"), fail)
    box = check.container(data.get("container"), fail)
    return Profile(
        name=str(name), scheduler=data["scheduler"], launchers=launchers,
        description=data.get("description") or "", match=match, gpus_per_host=gpus,
        vars={k: str(v) for k, v in variables.items()}, env={k: str(v) for k, v in envs.items()},
        source=source, gpu_bind=bind, submit=batch, fabric=fabric, container=box,
    )


def gpu_bind_mode(profile: Profile) -> str:
    """The profile's binding as `VAR:MAP:DEVICES[:TILES]` (empty: none; `rankwrap.gpu_bind_cycle`
    expands it into the per-rank wrapper's JOBENV_GPU_BIND)."""
    b = profile.gpu_bind
    if not b:
        return ""
    if b.get("order"):
        return f"{b['var']}:order:{','.join(str(d) for d in b['order'])}"
    return ":".join([b["var"], b["map"], str(b["devices"])] + ([str(b["tiles"])] if b["tiles"] else []))


TRUST_HINT = "keep profiles in a directory of your own"


def _files(path: Path, own: bool) -> List[Path]:
    """The profile files at `path` (a directory's *.yaml and *.yml in name order, or the file
    itself).  A directory's entries choose which files are profiles, with which names and in
    which override order, so outside jobenv's own directory one that others may write to is
    refused even when sticky (the directories above it are judged per file, in _judged)."""
    import stat

    try:
        if not path.is_dir():
            return [path] if path.is_file() else []
        st = path.stat()
        if not own and stat.S_IMODE(st.st_mode) & 0o022:
            raise ProfileError(f"profiles {path}: writable by others (mode {stat.S_IMODE(st.st_mode):o}), so "
                               f"another user could add profiles to it; refusing it: chmod go-w, or {TRUST_HINT}")
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError as exc:
        raise ProfileError(f"profiles {path}: cannot read: {exc}") from None


def _judged(path: Path) -> str:
    """The file a profile path reaches, after judging each step by store.paths' rule: every
    directory above (as written and as resolved) yours or root's and not writable by others
    unless sticky, and each symbolic link on the way as the link itself (yours or root's: in
    a sticky directory another user's link would choose which of your files is read)."""
    import stat

    from jobenv.core.trust import check_ancestors

    p, uid = str(path), os.getuid()
    for _ in range(40):
        try:
            check_ancestors(p, "the profile", TRUST_HINT)
        except JobenvError as exc:
            raise ProfileError(exc.message) from None
        st = os.lstat(p)
        if not stat.S_ISLNK(st.st_mode):
            return p
        if st.st_uid not in (uid, 0):
            raise ProfileError(f"profile {path}: {p} is a symbolic link owned by uid {st.st_uid}; refusing it")
        p = os.path.join(os.path.dirname(p), os.readlink(p))
    raise ProfileError(f"profile {path}: too many levels of symbolic links")


def _read(path: Path, own: bool) -> str:
    """A profile's text: a regular file of at most MAX_BYTES (never a FIFO or /dev/zero) and,
    outside jobenv's own directory, one reached through _judged that only you or root can
    write: a profile chooses the commands `launch` runs, so another user's file (or their
    choice of your files) would run their command as you."""
    import stat

    from jobenv.core.readfile import NotRegular, Refused, open_regular, read_open

    try:
        fd, st = open_regular(str(path)) if own else open_regular(_judged(path), nofollow=True)
        try:
            if not own and (st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022):
                raise ProfileError(f"profile {path}: owned by uid {st.st_uid} or writable by others "
                                   f"(mode {stat.S_IMODE(st.st_mode):o}); refusing it: keep profiles in a "
                                   f"file of your own, chmod go-w")
            data = read_open(fd, st, MAX_BYTES)
        finally:
            os.close(fd)
        return data.decode("utf-8")
    except NotRegular:
        raise ProfileError(f"profile {path}: not a regular file") from None
    except Refused:
        raise ProfileError(f"profile {path}: larger than {MAX_BYTES:,} bytes") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path}: cannot read: {exc}") from None


def load_all(env: Mapping[str, str]) -> Dict[str, Profile]:
    """All profiles by name; later search paths override earlier ones.  jobenv's own
    directory is part of the installed code and trusted as that code is."""
    out: Dict[str, Profile] = {}
    for base in search_paths(env):
        own = base == package_dir()
        for f in _files(base, own):
            prof = parse(_read(f, own), str(f))
            out[prof.name] = prof
    return out


def for_job(profiles: Dict[str, Profile], scheduler: str, jobid: str, hosts: List[str],
            env: Mapping[str, str], name: Optional[str] = None) -> Profile:
    """`name` when given; else the first specific profile that matches; else the generic one."""
    if name:
        if name not in profiles:
            raise ProfileError(f"unknown profile {name!r}; `jobenv profiles` lists them")
        return profiles[name]
    for prof in profiles.values():
        if prof.scheduler == scheduler and not prof.generic and prof.matches(jobid, hosts, env):
            return prof
    default = DEFAULT_PROFILES.get(scheduler, scheduler)  # the scheduler file's `profile`
    if default in profiles:
        return profiles[default]
    for prof in profiles.values():
        if prof.scheduler == scheduler and prof.generic:
            return prof
    raise ProfileError(f"no profile for scheduler {scheduler!r}; add one or pass --profile")
