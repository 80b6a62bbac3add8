"""What a launch chose, in words: which hosts (and which ranks go where), the GPU each local
rank gets with --gpu-bind, and the CPU binding the launcher line carries.  `jobenv launch
--dry-run` prints it on stderr under the command line, so that `--nhosts`, `--hosts`,
`--exclude` and `--gpu-bind` can be checked before an allocation's minutes are spent.

Nothing is decided here: the hosts are sizing's `Size`, the GPU of a local rank is
rankwrap.gpu_bind_value (the rule the per-rank wrapper applies), the CPU binding flags are the
launcher family's row (families.py).
"""
from __future__ import annotations

from jobenv.core.numparse import plural

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import List, Sequence

    from jobenv.runtime.families import Family
    from jobenv.launch.plan.sizing import Size

SHOWN = 8  # hosts and local ranks listed one by one; the rest are counted


def _ranks(first: int, last: int) -> str:
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def hosts_line(size: Size) -> str:
    """`hosts: a (ranks 0-3), b (ranks 4-7)`: block placement, as mpiexec -ppn and srun place them."""
    parts = []
    for i, host in enumerate(size.hosts[:SHOWN]):
        first = i * size.ppn
        if first >= size.nranks:
            break
        parts.append(f"{host} ({_ranks(first, min(first + size.ppn, size.nranks) - 1)})")
    more = len(size.hosts) - len(parts)
    tail = f", and {more} more" if more > 0 else ""
    return (f"hosts: {len(size.hosts)}, {plural(size.nranks, 'rank')}, {size.ppn} per host: "
            f"{', '.join(parts)}{tail}")


def gpu_line(mode: str, ppn: int) -> str:
    """`GPU binding: local rank 0 -> CUDA_VISIBLE_DEVICES=3, 1 -> 2, ...` on every host."""
    from jobenv.rankwrap import gpu_bind_value

    shown = []
    for local in range(min(ppn, SHOWN)):
        var, value = gpu_bind_value(mode, local)
        shown.append(f"local rank {local} -> {var}={value}" if local == 0 else f"{local} -> {value}")
    more = f", ... ({ppn} local ranks)" if ppn > SHOWN else ""
    return f"GPU binding on each host: {', '.join(shown)}{more}"


def _flags(launcher: Sequence[str], names: Sequence[str]) -> str:
    """The flags of `names` (each takes a value) as the line carries them."""
    found: List[str] = []
    for i, word in enumerate(launcher):
        if word.split("=", 1)[0] in names:
            found.append(word if "=" in word or i + 1 >= len(launcher) else f"{word} {launcher[i + 1]}")
    return " ".join(found)


def cpu_line(launcher: Sequence[str], row: Family) -> str:
    """The launcher's CPU binding flags as the line carries them, or that it sets none, and
    the CPUs each rank gets (srun's `-c 7`, PALS's `-d 16`): what the binding binds to."""
    bind, cpus = _flags(launcher, row.cpu_bind), _flags(launcher, row.cpus)
    per_rank = f"CPUs per rank: {cpus}" if cpus else ""
    if not bind:
        return f"CPU binding: none on the {row.title} line (the launcher's default{'; ' + per_rank if cpus else ''})"
    return f"CPU binding: {bind}" + (f" ({per_rank})" if cpus else "")


def describe(size: Size, gpu_bind: str, launcher: Sequence[str], row: Family) -> List[str]:
    """The lines `--dry-run` prints under the command."""
    lines = [hosts_line(size)]
    if gpu_bind:
        lines.append(gpu_line(gpu_bind, size.ppn))
    lines.append(cpu_line(launcher, row))
    return lines
