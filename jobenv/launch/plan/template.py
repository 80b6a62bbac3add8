"""The one renderer of launch commands: record numbers + profile template -> argv.

The CLI, the env file, the `launch` shell function and `jobenv launch` all use its
output, so a path with spaces, quotes, `$()` or `[]` stays one exact argv element.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import Any, Callable, Dict, List, Mapping, Optional

    from jobenv.profiles.load import Profile


def context(nhosts: int, ppn: int, gpus_per_host: int, hostfile: Optional[str], jobid: str,
            extra: Mapping[str, str]) -> Dict[str, str]:
    ctx = {k: str(v) for k, v in extra.items()}
    ctx.update(nhosts=str(nhosts), nranks=str(nhosts * ppn), ppn=str(ppn),
               ngpus=str(nhosts * gpus_per_host), gpus_per_host=str(gpus_per_host),
               hostfile=hostfile or "", jobid=jobid)
    return ctx


def _fill(template: Any, ctx: Mapping[str, str]) -> str:
    from jobenv.profiles.check import PLACEHOLDER  # not at import: `launch` starts without re/pathlib when unsized

    return PLACEHOLDER.sub(lambda m: ctx[m.group(1)], str(template))


def pick_launcher(profile: Profile, which: Optional[Callable[[str], Optional[str]]] = None) -> Dict[str, Any]:
    """The first candidate whose required program is on PATH (absolute directories only:
    schedulers.base.command_path), else the last one."""
    if which is None:
        from jobenv.schedulers.base import command_path

        which = command_path
    for cand in profile.launchers:
        req = cand.get("requires")
        if req is None or which(str(req)):
            return cand
    return profile.launchers[-1]


def render(argv_template: List[Any], ctx: Mapping[str, str]) -> List[str]:
    """Fill placeholders element by element; `{when: key, args: [...]}` needs ctx[key] != 0/''."""
    out: List[str] = []
    for item in argv_template:
        if isinstance(item, dict):
            if ctx.get(item["when"], "") not in ("", "0"):
                out.extend(_fill(a, ctx) for a in item["args"])
        else:
            out.append(_fill(item, ctx))
    return out
