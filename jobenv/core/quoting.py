"""The shell quoting rules, each once: POSIX single quotes, a command line for `eval`, fish.

Every module that writes a value into shell text (the restore snippet, the env file, the
per-rank wrapper, `jobenv init`'s functions, DIST_LAUNCH) quotes through here, so that one
rule reads every byte back exactly in every shell.  A leaf module: the `get` path imports
it, so it imports nothing.
"""
from __future__ import annotations

TYPE_CHECKING = False  # `import typing` costs ~5 ms per shell; type checkers still read the block below
if TYPE_CHECKING:
    from typing import List, Sequence

# Words left bare in DIST_LAUNCH, so that `$DIST_LAUNCH python3 x.py` (word splitting, as
# ezpz users write it) keeps working; `=`, `:` and `~` are not here (zsh expands them).
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+,./-")


def quote(s: str) -> str:
    """POSIX single-quote one word (always quoted: no character is 'safe' in every shell)."""
    return "'" + s.replace("'", "'\\''") + "'"


def join_argv(argv: Sequence[str]) -> str:
    """One command line for `eval` in bash, zsh or sh (DIST_LAUNCH): plain words bare."""
    return " ".join(a if a and _BARE.issuperset(a) else quote(a) for a in argv)


def fish_quote(s: str) -> str:
    """fish: printable ASCII single-quoted, every other byte as \\xHH (exact bytes back)."""
    out: List[str] = []
    run: List[str] = []
    for ch in s:
        if " " <= ch <= "~":
            run.append("\\\\" if ch == "\\" else "\\'" if ch == "'" else ch)
            continue
        if run:
            out.append("'" + "".join(run) + "'")
            run = []
        out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
    if run or not out:
        out.append("'" + "".join(run) + "'")
    return "".join(out)
