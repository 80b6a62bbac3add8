"""Click's `\\b` paragraphs, which `--help` prints line by line, as code blocks in the command reference.

mkdocs-click writes a command's help into the page as markdown and drops the `\\b` marker, so
the lines of such a paragraph (`jobenv --help`'s three moves, the exit codes of
`jobenv launch --help`) would run together into one.  This hook fences them instead, where
mkdocs-click reads a command's description (`_docs._make_description`, a private name: with
a mkdocs-click that lacks it the hook does nothing and the lines run together again).
MkDocs calls `on_config` (mkdocs.yml `hooks:`).
"""
from __future__ import annotations

from typing import Any, Iterator, List

MARK = "\b"


def fence(lines: List[str]) -> List[str]:
    """Each `\\b` paragraph (from a line holding only `\\b` to the next blank line) fenced as text."""
    out: List[str] = []
    inside = False
    for line in lines:
        if line.strip() == MARK:
            out += ["```text"]
            inside = True
        elif inside and not line.strip():
            out += ["```", ""]
            inside = False
        else:
            out.append(line)
    return out + (["```"] if inside else [])


def on_config(config: Any) -> Any:
    """MkDocs hook: mkdocs-click's description lines go through `fence` (once per process)."""
    try:
        from mkdocs_click import _docs
        original = _docs._make_description
    except (ImportError, AttributeError):
        return config
    if getattr(original, "fenced", False):
        return config

    def described(ctx: Any, remove_ascii_art: bool = False) -> Iterator[str]:
        return iter(fence(list(original(ctx, remove_ascii_art=remove_ascii_art))))

    described.fenced = True  # type: ignore[attr-defined]
    _docs._make_description = described
    return config
