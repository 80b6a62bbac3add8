"""Human output of the CLI: a table as rich on a terminal, as plain columns anywhere else.

Piped output is data a user copies or greps: it is never wrapped, folded or cut (a launch
line cut mid-path cannot be pasted), and carries no trailing spaces or colour.  On a
terminal rich draws the same rows; it honours NO_COLOR.  Cells are made printable first:
host names and job ids come from hostile input and may hold terminal escapes.
"""
from __future__ import annotations

import sys
from typing import IO, List, Optional, Sequence

from .errors import one_line


def plain_table(rows: Sequence[Sequence[str]], header: Optional[Sequence[str]] = None) -> str:
    """Columns separated by two spaces, padded to the widest cell, no trailing spaces."""
    body: List[List[str]] = [[one_line(str(c)) for c in r] for r in rows]
    if header is not None:
        body.insert(0, [str(h) for h in header])
    if not body:
        return ""
    ncols = max(len(r) for r in body)
    widths = [max((len(r[i]) for r in body if i < len(r)), default=0) for i in range(ncols)]
    lines = []
    for r in body:
        cells = [c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def print_table(rows: Sequence[Sequence[str]], header: Optional[Sequence[str]] = None,
                stream: Optional[IO[str]] = None) -> None:
    """Rows to `stream` (stdout): rich on a terminal, plain columns otherwise."""
    out = stream or sys.stdout
    if not out.isatty():
        out.write(plain_table(rows, header))
        out.flush()
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(box=None, show_header=header is not None, pad_edge=False)
    for i, h in enumerate(header or [""] * max((len(r) for r in rows), default=0)):
        t.add_column(h, style="bold cyan" if header is None and i == 0 else None, overflow="fold")
    for r in rows:
        t.add_row(*(one_line(str(c)) for c in r))
    Console(file=out, highlight=False, soft_wrap=True, markup=False, emoji=False).print(t)
