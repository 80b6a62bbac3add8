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

`gpu_bind` gives each local rank one device through the per-rank wrapper: `var` is one of
jobenv.rankwrap.GPU_VARS; `map` is identity (device = local rank % devices), reverse
(devices - 1 - that: Polaris's NUMA order) or tile (`gpu.tile`, Aurora's
ZE_AFFINITY_MASK, with `tiles` per device); `devices` defaults to gpus_per_host (divided
by `tiles` for tile).  `gpu_bind_mode` renders it as the wrapper's JOBENV_GPU_BIND.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from .errors import BadInput
from .numbers import MAX_PER_HOST
from .schedulers import NAMES as SCHEDULERS

# Values every launch template may use; profiles add their own through `vars`.
CONTEXT_KEYS = ("nhosts", "nranks", "ppn", "ngpus", "gpus_per_host", "hostfile", "jobid")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


class ProfileError(BadInput):
    pass


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
    return Path(__file__).with_name("profiles")


def search_paths(env: Mapping[str, str]) -> List[Path]:
    """Profile locations, lowest precedence first."""
    config = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    paths = [package_dir(), Path(config) / "jobenv" / "profiles"]
    paths += [Path(p) for p in env.get("JOBENV_PROFILES", "").split(os.pathsep) if p]
    return paths


def _key_lines(text: str) -> Dict[str, int]:
    return {m.group(1): text.count("\n", 0, m.start()) + 1
            for m in re.finditer(r"^([A-Za-z_]\w*)\s*:", text, re.M)}


MAX_BYTES = 1 << 20  # a profile is a few hundred bytes; a larger file is not one


def _load_yaml(text: str, source: str) -> Any:
    """safe_load, every failure as one ProfileError line (nesting deep enough to exhaust
    Python's recursion is not a YAMLError)."""
    import yaml

    if len(text) > MAX_BYTES:
        raise ProfileError(f"profile {source}: larger than {MAX_BYTES:,} bytes")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProfileError(f"profile {source}{line}: YAML error: {problem}") from None
    except RecursionError:
        raise ProfileError(f"profile {source}: YAML error: nested too deeply") from None


def _is_word(key: Any, pattern: str = r"\w+") -> bool:
    return isinstance(key, str) and re.fullmatch(pattern, key) is not None


def parse(text: str, source: str) -> Profile:
    """Parse and validate one profile; errors name the file and line."""
    data = _load_yaml(text, source)
    lines = _key_lines(text)

    def fail(key: str, why: str) -> "ProfileError":
        at = f" line {lines[key]}" if key in lines else ""
        return ProfileError(f"profile {source}{at}: {key}: {why}")

    if not isinstance(data, dict):
        raise ProfileError(f"profile {source}: expected a mapping of keys (name, scheduler, launchers)")
    unknown = set(data) - {"name", "description", "scheduler", "match", "gpus_per_host", "vars", "launchers", "env",
                           "gpu_bind"}
    if unknown:
        raise fail(sorted(map(str, unknown))[0], "unknown key")
    name = data.get("name")
    if not _is_word(name, r"[A-Za-z0-9_.-]+"):
        raise fail("name", "must be a word of letters, digits, '.', '_' or '-'")
    if data.get("scheduler") not in SCHEDULERS:
        raise fail("scheduler", f"must be one of {', '.join(SCHEDULERS)}")
    if not isinstance(data.get("description") or "", str):
        raise fail("description", "must be a string")
    match = _match(data.get("match") or {}, fail)
    gpus = data.get("gpus_per_host")
    if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or not 0 <= gpus <= MAX_PER_HOST):
        raise fail("gpus_per_host", f"must be a whole number from 0 to {MAX_PER_HOST}")
    variables = data.get("vars") or {}
    envs = data.get("env") or {}
    for key, val in (("vars", variables), ("env", envs)):
        if not isinstance(val, dict) or not all(isinstance(v, (str, int, float)) for v in val.values()):
            raise fail(key, "must map names to strings or numbers")
    if not all(_is_word(k) for k in variables):
        raise fail("vars", "names must be words (letters, digits, '_')")
    if not all(_is_word(k, r"[A-Za-z_]\w*") for k in envs):
        raise fail("env", "variable names must be shell identifiers")
    launchers = _launchers(data.get("launchers"), set(CONTEXT_KEYS) | set(variables), fail)
    bind = _gpu_bind(data.get("gpu_bind"), gpus, fail)
    return Profile(
        name=str(name), scheduler=data["scheduler"], launchers=launchers,
        description=data.get("description") or "", match=match, gpus_per_host=gpus,
        vars={k: str(v) for k, v in variables.items()}, env={k: str(v) for k, v in envs.items()},
        source=source, gpu_bind=bind,
    )


def _match(match: Any, fail) -> Dict[str, Any]:
    """`match`: jobid and hosts regular expressions, env a mapping of variable -> expression."""
    if not isinstance(match, dict) or set(match) - {"jobid", "hosts", "env"}:
        raise fail("match", "must be a mapping with jobid, hosts and/or env")
    env = match.get("env") or {}
    if not isinstance(env, dict) or not all(_is_word(k, r"[A-Za-z_]\w*") for k in env):
        raise fail("match", "env must map variable names to regular expressions")
    patterns = [match[k] for k in ("jobid", "hosts") if k in match] + list(env.values())
    if not all(isinstance(p, str) for p in patterns):
        raise fail("match", "patterns must be strings (regular expressions)")
    try:
        for pattern in patterns:
            re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise fail("match", f"bad regular expression: {exc}") from None
    return match


def _launchers(launchers: Any, known: set, fail) -> List[Dict[str, Any]]:
    """Each candidate is {argv: [...], requires: program}; argv items are strings, numbers or
    {when: name, args: [...]}, and every placeholder names a known value."""
    if not isinstance(launchers, list) or not launchers:
        raise fail("launchers", "must be a non-empty list of {argv: [...], requires: cmd}")
    for cand in launchers:
        if not isinstance(cand, dict) or not isinstance(cand.get("argv"), list) or not cand["argv"]:
            raise fail("launchers", "each entry needs a non-empty argv list")
        if set(cand) - {"argv", "requires"} or not isinstance(cand.get("requires", ""), str):
            raise fail("launchers", "an entry is {argv: [...], requires: program name}")
        for item in cand["argv"]:
            parts = item.get("args") if isinstance(item, dict) else [item]
            if isinstance(item, dict) and (set(item) != {"when", "args"} or not isinstance(parts, list)
                                           or not isinstance(item["when"], str)):
                raise fail("launchers", "a conditional argv entry is {when: name, args: [...]}")
            for part in parts or ():
                if not isinstance(part, (str, int)) or isinstance(part, bool):
                    raise fail("launchers", f"argv entries must be strings, not {part!r}"[:200])
                for ph in _PLACEHOLDER.findall(str(part)):
                    if ph not in known:
                        raise fail("launchers", f"unknown placeholder {{{ph}}}")
    return launchers


def _gpu_bind(spec: Any, gpus: Optional[int], fail) -> Dict[str, Any]:
    """Validate a profile's `gpu_bind` into {var, map, devices, tiles}; {} when absent."""
    from .rankwrap import GPU_MAPS, GPU_VARS

    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise fail("gpu_bind", "must be a mapping {var: ..., map: ...}")
    unknown = set(spec) - {"var", "map", "devices", "tiles"}
    if unknown:
        raise fail("gpu_bind", f"unknown key {sorted(unknown)[0]!r}")
    if spec.get("var") not in GPU_VARS:
        raise fail("gpu_bind", f"var must be one of {', '.join(GPU_VARS)}")
    how = spec.get("map")
    if how not in GPU_MAPS:
        raise fail("gpu_bind", f"map must be one of {', '.join(GPU_MAPS)}")
    tiles = spec.get("tiles")
    if (how == "tile") != (tiles is not None):
        raise fail("gpu_bind", "tiles is required for map: tile, and only for it")
    for key, val in (("tiles", tiles), ("devices", spec.get("devices"))):
        if val is not None and (not isinstance(val, int) or isinstance(val, bool) or not 0 < val < 10000):
            raise fail("gpu_bind", f"{key} must be a whole number from 1 to 9999")
    devices = spec.get("devices")
    if devices is None:
        if not gpus:
            raise fail("gpu_bind", "devices is required when the profile has no gpus_per_host")
        devices = gpus // (tiles or 1)
        if devices < 1 or devices * (tiles or 1) != gpus:
            raise fail("gpu_bind", f"gpus_per_host {gpus} is not a multiple of tiles {tiles}")
    return {"var": spec["var"], "map": how, "devices": devices, "tiles": tiles}


def gpu_bind_mode(profile: Profile) -> str:
    """The profile's binding as the per-rank wrapper's JOBENV_GPU_BIND (empty: none)."""
    b = profile.gpu_bind
    if not b:
        return ""
    return ":".join([b["var"], b["map"], str(b["devices"])] + ([str(b["tiles"])] if b["tiles"] else []))


def _files(path: Path) -> List[Path]:
    try:
        if path.is_dir():
            return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml"))
        return [path] if path.is_file() else []
    except OSError as exc:
        raise ProfileError(f"profiles {path}: cannot read: {exc}") from None


def _read(path: Path, own: bool) -> str:
    """A profile's text: a regular file of at most MAX_BYTES (never a FIFO or /dev/zero) and,
    outside jobenv's own directory, one that only you or root can write: a profile chooses
    the commands `launch` runs, so another user's file would run their command as you."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ProfileError(f"profile {path}: not a regular file")
            if not own and (st.st_uid not in (os.getuid(), 0) or st.st_mode & 0o022):
                raise ProfileError(f"profile {path}: owned by uid {st.st_uid} or writable by others "
                                   f"(mode {stat.S_IMODE(st.st_mode):o}); refusing it: keep profiles in a "
                                   f"file of your own, chmod go-w")
            data = f.read(MAX_BYTES + 1)
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"profile {path}: cannot read: {exc}") from None


def load_all(env: Mapping[str, str]) -> Dict[str, Profile]:
    """All profiles by name; later search paths override earlier ones."""
    out: Dict[str, Profile] = {}
    for base in search_paths(env):
        for f in _files(base):
            prof = parse(_read(f, own=base == package_dir()), str(f))
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
    if scheduler in profiles:
        return profiles[scheduler]
    for prof in profiles.values():
        if prof.scheduler == scheduler and prof.generic:
            return prof
    raise ProfileError(f"no profile for scheduler {scheduler!r}; add one or pass --profile")
