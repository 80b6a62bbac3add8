"""`--launcher-args` replaces a flag the profile's line already sets, instead of doubling it.

`--launcher-args=--cpu-bind=none` on Polaris must leave one --cpu-bind (PALS and srun take the
last, Hydra refuses a repeated flag, and a reader cannot tell which wins).  A flag is the same
when its name matches (`--cpu-bind none` and `--cpu-bind=none` alike) or when the launcher
family's row spells it both ways (`-n`/`--np`, `-ppn`/`--ppn`).  Flags that add one more item
each time they are given (`-x VAR`, `-genv K V`, `--mca K V`, `--env K=V`) are kept: the
user's is one more.  In a profile's line a word that does not start with '-' is the value of
the flag before it (a launcher line has no operands before the program).
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms on every `launch`
if TYPE_CHECKING:
    from typing import List, Sequence, Set

    from jobenv.runtime.families import Family

# Flags that accumulate (each use adds an item): Open MPI's -x/--mca, Hydra's -genv/-env and
# their list forms, PALS's --env, flux's -o/--setattr/--env, srun's --export is one list
# (replaced like any other flag).
REPEATABLE = frozenset(("-x", "--mca", "-mca", "--gmca", "-gmca", "-genv", "-env", "-genvlist", "-envlist",
                        "--env", "-o", "--setopt", "-S", "--setattr", "--env-remove"))


def _name(word: str) -> str:
    return word.split("=", 1)[0]


def _spellings(row: Family, name: str) -> Set[str]:
    """Every spelling the family's row gives the flag `name` (srun's -x is --exclude: one
    value); a flag the row does not name is itself, or nothing when it accumulates."""
    for group in (row.nranks, row.ppn, row.nhosts, row.hostfile, row.hosts, row.exclude, row.cpu_bind):
        names = {_name(g) for g in group}
        if name in names:
            return names
    return set() if name in REPEATABLE else {name}


def override(argv: Sequence[str], row: Family, extra: Sequence[str]) -> List[str]:
    """`argv` (the launcher's words, then its flags) without the flags `extra` sets again,
    then `extra`."""
    replaced: Set[str] = set()
    for word in extra:
        if word.startswith("-"):
            replaced |= _spellings(row, _name(word))
    out = list(argv[:row.words])
    rest = list(argv[row.words:])
    i = 0
    while i < len(rest):
        word = rest[i]
        takes_next = "=" not in word and i + 1 < len(rest) and not rest[i + 1].startswith("-")
        if word.startswith("-") and _name(word) in replaced:
            i += 2 if takes_next else 1
            continue
        out.append(word)
        i += 1
    return out + list(extra)
