"""How jobenv reads what a scheduler hands a job: its nodefile (bounded, every line checked
before the next is read) and its variables (by prefix, minus secrets and per-task ones), and the
rows of a `qstat` table.  Pure functions of text, shared by the scheduler files; apart from
base.py's types so that each file holds one kind of thing.
"""
from __future__ import annotations

from jobenv.core.errors import BadInput
from .tables import SHELL_ONLY, is_secret

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import Dict, Iterator, List, Mapping, Sequence, Tuple


def read_text(path: str) -> str:
    """A scheduler's nodefile: a regular file of bounded size (jobenv.core.readfile), or one
    BadInput line."""
    from jobenv.core.readfile import MAX_HOSTFILE_BYTES, read_regular

    return read_regular(path, MAX_HOSTFILE_BYTES, "hostfile", " (has the job ended?)")


def pick_env(env: Mapping[str, str], prefixes: Sequence[str], drop: Sequence[str] = ()) -> Dict[str, str]:
    """The scheduler's job variables: by prefix, minus secrets, per-step/task ones and those
    a restore never sets (SHELL_ONLY: they choose programs)."""
    out = {}
    for k, v in env.items():
        if not k.startswith(tuple(prefixes)) or not (k.isidentifier() and k.isascii()):
            continue
        if is_secret(k) or k in drop or k in SHELL_ONLY:
            continue
        out[k] = v
    return dict(sorted(out.items()))


def _lines(text: str) -> Iterator[str]:
    """The lines of `text`, one at a time: splitlines() would build a list of all of them
    at once (64 MiB of newlines is 67 million entries, 600 MB)."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start)
        stop = end if stop < 0 else stop
        yield text[start:stop]
        start = stop + 1


def parse_nodefile(text: str, path: str) -> Tuple[List[str], List[int]]:
    """Hosts in first-seen order and slot counts per host from a one-line-per-slot file.

    Every limit is checked before the next line is read, and the line count before the
    first one, so a hostile file of many millions of lines (blank or all one host) is one
    error in a fraction of a second, never a MemoryError or minutes of work."""
    from jobenv.core.hostlist import check_host, unique
    from jobenv.core.numparse import MAX_NODEFILE_LINES, MAX_PER_HOST, check_hosts

    nlines = text.count("\n") + (not text.endswith("\n"))
    if nlines > MAX_NODEFILE_LINES:
        raise BadInput(f"hostfile {path!r} has {nlines:,} lines, more than jobenv's limit of "
                       f"{MAX_NODEFILE_LINES:,} (one line per MPI slot)")
    counts: Dict[str, int] = {}
    for lineno, line in enumerate(_lines(text), 1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        n = counts.get(name)
        if n is None:
            check_host(name, f"host name on line {lineno} of {path}:")
            n = counts[name] = 0
            check_hosts(len(counts), f"hostfile {path!r}")
        elif n == MAX_PER_HOST:
            raise BadInput(f"hostfile {path!r} lists {name} {n + 1:,} times, more than jobenv's limit "
                           f"of {MAX_PER_HOST:,} ranks per host")
        counts[name] = n + 1
    if not counts:
        raise BadInput(f"hostfile {path!r} is empty: no hosts to run on")
    hosts = unique(counts)
    return hosts, [counts[h] for h in hosts]


def table_rows(out: str, rule: str, min_cols: int) -> List[List[str]]:
    """The whitespace-split rows under the first line starting with `rule` (the `---` or
    `===` line of `qstat`'s tables), those with at least `min_cols` columns."""
    rows: List[List[str]] = []
    body = False
    for line in out.splitlines():
        if line.startswith(rule):
            body = True
            continue
        cols = line.split()
        if body and len(cols) >= min_cols:
            rows.append(cols)
    return rows
