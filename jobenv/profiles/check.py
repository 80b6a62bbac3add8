"""A profile's text made into checked data: YAML without aliases, then each key's rules.

A profile is input from whoever wrote the file, and it chooses the commands `launch` runs,
so it is read like any hostile input: every failure is one ProfileError line naming the
file (and the line where one is known), and the cost is bounded by the file's size.  YAML
aliases (`*name`) break that bound: nine levels of nine aliased lists (a 423-byte file)
stand for 9**9 items, which validation or an error message would walk or turn into text;
profiles are a few lines of launch templates with nothing worth sharing, so an alias is
refused while composing, before any object is built.  Error messages never show a whole
value from the file: a key or item is named by its type, or cut to a few characters
before it is turned into text (errors.visible then escapes what a terminal acts on).

Split from jobenv.profiles.load (which parses, finds, trusts and chooses profiles) to keep each
module to one concern.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Set

from jobenv.core.errors import BadInput, visible

MAX_BYTES = 1 << 20  # a profile is a few hundred bytes; a larger file is not one
KEYS = ("name", "description", "scheduler", "match", "gpus_per_host", "vars", "launchers", "env", "gpu_bind",
        "submit", "fabric", "container")
PLACEHOLDER = re.compile(r"\{(\w+)\}")

Fail = Callable[[str, str], "ProfileError"]


class ProfileError(BadInput):
    pass


def shown(value: Any, width: int = 40) -> str:
    """A scalar from a profile as a short printable text: cut before it is converted (an int
    of 5000 digits cannot even be converted), never a container's whole contents."""
    if isinstance(value, str):
        return visible(repr(value[:width]) + ("..." if len(value) > width else ""))
    if isinstance(value, (bool, float, type(None))) or (isinstance(value, int) and abs(value) < 10 ** width):
        return repr(value)
    return f"a {type(value).__name__}"


def _loader() -> Any:
    """yaml.SafeLoader whose composer refuses an alias event (see the module docstring)."""
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.events.AliasEvent):
                raise yaml.composer.ComposerError(
                    None, None, "aliases (*name) are not allowed in a profile: write the value out",
                    self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)

    return NoAliasLoader


def load_yaml(text: str, source: str) -> Any:
    """The profile's data, every failure as one ProfileError line (nesting deep enough to
    exhaust Python's recursion is not a YAMLError, nor is an integer too long for int())."""
    import yaml

    if len(text) > MAX_BYTES:
        raise ProfileError(f"profile {source}: larger than {MAX_BYTES:,} bytes")
    try:
        return yaml.load(text, Loader=_loader())  # a SafeLoader subclass: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ProfileError(f"profile {source}{line}: YAML error: {problem}") from None
    except RecursionError:
        raise ProfileError(f"profile {source}: YAML error: nested too deeply") from None
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise ProfileError(f"profile {source}: YAML error: a number too long") from None


def is_word(key: Any, pattern: str = r"\w+") -> bool:
    return isinstance(key, str) and re.fullmatch(pattern, key) is not None


def key_lines(text: str) -> Dict[str, int]:
    return {m.group(1): text.count("\n", 0, m.start()) + 1
            for m in re.finditer(r"^([A-Za-z_]\w*)\s*:", text, re.M)}


def first_unknown(keys: Any, allowed: Any) -> Optional[str]:
    """The first key of a mapping that is not allowed, as text (a short word as it is, so
    error lines can find its line; anything else through shown); None when all are."""
    unknown = [k for k in keys if k not in allowed]
    return min(k if is_word(k) and len(k) <= 40 else shown(k) for k in unknown) if unknown else None


def match(spec: Any, fail: Fail) -> Dict[str, Any]:
    """`match`: jobid and hosts regular expressions, env a mapping of variable -> expression."""
    if not isinstance(spec, dict) or first_unknown(spec, ("jobid", "hosts", "env")):
        raise fail("match", "must be a mapping with jobid, hosts and/or env")
    env = spec.get("env") or {}
    if not isinstance(env, dict) or not all(is_word(k, r"[A-Za-z_]\w*") for k in env):
        raise fail("match", "env must map variable names to regular expressions")
    patterns = [spec[k] for k in ("jobid", "hosts") if k in spec] + list(env.values())
    if not all(isinstance(p, str) for p in patterns):
        raise fail("match", "patterns must be strings (regular expressions)")
    try:
        for pattern in patterns:
            re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise fail("match", f"bad regular expression: {visible(str(exc)[:200])}") from None
    return spec


def launchers(cands: Any, known: Set[str], fail: Fail) -> List[Dict[str, Any]]:
    """Each candidate is {argv: [...], requires: program}; argv items are strings, numbers or
    {when: name, args: [...]}, and every placeholder names a known value."""
    if not isinstance(cands, list) or not cands:
        raise fail("launchers", "must be a non-empty list of {argv: [...], requires: cmd}")
    for cand in cands:
        if not isinstance(cand, dict) or not isinstance(cand.get("argv"), list) or not cand["argv"]:
            raise fail("launchers", "each entry needs a non-empty argv list")
        if first_unknown(cand, ("argv", "requires", "family")) or not isinstance(cand.get("requires", ""), str):
            raise fail("launchers", "an entry is {argv: [...], requires: program name, family: launcher family}")
        if "family" in cand:
            from jobenv.runtime.families import BY_NAME

            fams = cand["family"] if isinstance(cand["family"], list) and cand["family"] else [cand["family"]]
            for fam in fams:
                if not isinstance(fam, str) or fam not in BY_NAME:
                    raise fail("launchers", f"family {shown(fam)} is not one of {', '.join(BY_NAME)} (or a list of them)")
        for item in cand["argv"]:
            parts = item.get("args") if isinstance(item, dict) else [item]
            if isinstance(item, dict) and (set(item) != {"when", "args"} or not isinstance(parts, list)
                                           or not isinstance(item["when"], str)):
                raise fail("launchers", "a conditional argv entry is {when: name, args: [...]}")
            for part in parts or ():
                if not isinstance(part, (str, int)) or isinstance(part, bool):
                    raise fail("launchers", f"argv entries must be strings or numbers, not {shown(part)}")
                for ph in PLACEHOLDER.findall(part if isinstance(part, str) else ""):
                    if ph not in known:
                        raise fail("launchers", f"unknown placeholder {{{ph[:40]}}}")
    return cands


def gpu_bind(spec: Any, gpus: Optional[int], fail: Fail) -> Dict[str, Any]:
    """Validate a profile's `gpu_bind` into {var, map, devices, tiles, order}; {} when absent."""
    from jobenv.rankwrap import GPU_MAPS, GPU_VARS

    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise fail("gpu_bind", "must be a mapping {var: ..., map: ...}")
    unknown = first_unknown(spec, ("var", "map", "devices", "tiles", "order"))
    if unknown:
        raise fail("gpu_bind", f"unknown key {unknown}")
    if spec.get("var") not in GPU_VARS:
        raise fail("gpu_bind", f"var must be one of {', '.join(GPU_VARS)}")
    how = spec.get("map")
    if how not in GPU_MAPS:
        raise fail("gpu_bind", f"map must be one of {', '.join(GPU_MAPS)}")
    if how == "order":
        order = _gpu_order(spec, gpus, fail)
        return {"var": spec["var"], "map": how, "devices": len(order), "tiles": None, "order": order}
    tiles = spec.get("tiles")
    if (how == "tile") != (tiles is not None):
        raise fail("gpu_bind", "tiles is required for map: tile, and only for it")
    if "order" in spec:
        raise fail("gpu_bind", "order is for map: order only")
    for key, val in (("tiles", tiles), ("devices", spec.get("devices"))):
        if val is not None and not _small(val, 1):
            raise fail("gpu_bind", f"{key} must be a whole number from 1 to 9999")
    devices = spec.get("devices")
    if devices is None:
        if not gpus:
            raise fail("gpu_bind", "devices is required when the profile has no gpus_per_host")
        devices = gpus // (tiles or 1)
        if devices < 1 or devices * (tiles or 1) != gpus:
            raise fail("gpu_bind", f"gpus_per_host {gpus} is not a multiple of tiles {tiles}")
    return {"var": spec["var"], "map": how, "devices": devices, "tiles": tiles, "order": None}


def _small(val: Any, low: int) -> bool:
    """A whole number from `low` to the wrapper's largest device number (not a bool)."""
    from jobenv.rankwrap import MAX_DEVICE

    return isinstance(val, int) and not isinstance(val, bool) and low <= val <= MAX_DEVICE


def _gpu_order(spec: Dict[str, Any], gpus: Optional[int], fail: Fail) -> List[int]:
    """map: order's `order`: the device of local rank L is order[L % len(order)]."""
    from jobenv.rankwrap import GPU_ORDER_MAX, MAX_DEVICE

    if "devices" in spec or "tiles" in spec:
        raise fail("gpu_bind", "map: order takes `order` only: its length is the device count")
    order = spec.get("order")
    if not isinstance(order, list) or not 0 < len(order) <= GPU_ORDER_MAX or not all(_small(d, 0) for d in order):
        raise fail("gpu_bind", f"order must be a list of 1 to {GPU_ORDER_MAX} device numbers, each 0 to {MAX_DEVICE}")
    if gpus and max(order) >= gpus:
        raise fail("gpu_bind", f"order names device {max(order)}, beyond gpus_per_host {gpus} (0 to {gpus - 1})")
    return order


FABRIC_EXPECT = {"nccl": ("network", ("ofi", "ib", "socket")), "ccl": ("transport", ("mpi", "ofi")), "gloo": ("", ())}


def fabric(spec: Any, fail: Fail) -> Dict[str, Any]:
    """`fabric`: {nccl|ccl|gloo: {network|transport, load, env, min_busbw, source}}: the
    network expected (NCCL: ofi, ib or socket; oneCCL's ATL transport: mpi or ofi), what to
    load when it is missing (one line of text), the settings the site documents, the least
    inter-host all-reduce bus bandwidth per GPU in GB/s, and the page that says so."""
    if spec is None:
        return {}
    if not isinstance(spec, dict) or first_unknown(spec, FABRIC_EXPECT):
        raise fail("fabric", f"must map {', '.join(FABRIC_EXPECT)} to expectations")
    out: Dict[str, Any] = {}
    for backend, entry in spec.items():
        key, allowed = FABRIC_EXPECT[backend]
        if not isinstance(entry, dict) or first_unknown(entry, (key, "load", "env", "min_busbw", "source")):
            raise fail("fabric", f"{backend} takes {key + ', ' if key else ''}load, env, min_busbw and source")
        if key in entry and entry[key] not in allowed:
            raise fail("fabric", f"{backend}: {key} must be one of {', '.join(allowed)}")
        for text in ("load", "source"):
            val = entry.get(text, "")
            if not isinstance(val, str) or len(val) > 300 or not val.isprintable():
                raise fail("fabric", f"{backend}: {text} must be one line of at most 300 characters")
        env = entry.get("env") or {}
        if not isinstance(env, dict) or not all(is_word(k, r"[A-Za-z_]\w*") and isinstance(v, (str, int))
                                                and not isinstance(v, bool) and str(v).isprintable()
                                                for k, v in env.items()):
            raise fail("fabric", f"{backend}: env must map variable names to printable strings or numbers")
        floor = entry.get("min_busbw")
        if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not floor > 0):
            raise fail("fabric", f"{backend}: min_busbw must be a positive number (GB/s per GPU)")
        out[backend] = {**entry, "env": {k: str(v) for k, v in env.items()}}
    return out


def container(spec: Any, fail: Fail) -> Dict[str, Any]:
    """`container`: {runtimes: [NAME, ...] (the site's, the default first), gpu: nvidia|amd|intel,
    flags: {NAME: [FLAG, ...]}} (jobenv/runtime/containers.py names the runtimes)."""
    from jobenv.runtime.containers import NAMES

    if spec is None:
        return {}
    if not isinstance(spec, dict) or first_unknown(spec, ("runtimes", "gpu", "flags")):
        raise fail("container", "must map runtimes, gpu and flags")
    runtimes = spec.get("runtimes") or []
    if not isinstance(runtimes, list) or not runtimes or any(r not in NAMES for r in runtimes):
        raise fail("container", f"runtimes must be a list of {', '.join(NAMES)}")
    gpu = spec.get("gpu") or ""
    if gpu not in ("", "nvidia", "amd", "intel"):
        raise fail("container", "gpu must be nvidia, amd or intel")
    flags = spec.get("flags") or {}
    if not isinstance(flags, dict) or any(k not in NAMES or not isinstance(v, list) or
                                          not all(isinstance(w, str) and w.startswith("-") for w in v)
                                          for k, v in flags.items()):
        raise fail("container", "flags must map a runtime to a list of its flags (each starting with '-')")
    return {"runtimes": list(runtimes), "gpu": gpu, "flags": {k: list(v) for k, v in flags.items()}}
