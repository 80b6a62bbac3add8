"""Human output of the CLI: a table as rich on a terminal, as plain columns anywhere else.

Piped output is data a user copies or greps: it is never wrapped, folded or cut (a launch
line cut mid-path cannot be pasted), and carries no trailing spaces or colour.  On a
terminal rich draws the same rows.  Styling (colour, bold) follows one rule, `styled`:
`--color never|always|auto` (JOBENV_COLOR), then NO_COLOR (no-color.org: any non-empty
value turns every style off, bold included) and FORCE_COLOR, then whether the stream is a
terminal other than TERM=dumb.  Cells are made printable first: host names and job ids
come from hostile input and may hold terminal escapes.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import IO, Any, Iterator, List, Mapping, Optional, Sequence

from jobenv.core.errors import one_line

COLOR_MODES = ("auto", "always", "never")


def color_mode(environ: Optional[Mapping[str, str]] = None) -> str:
    """never | always | auto, from --color (JOBENV_COLOR), NO_COLOR and FORCE_COLOR."""
    env = os.environ if environ is None else environ
    mode = env.get("JOBENV_COLOR", "")
    if mode in ("always", "never"):
        return mode
    if env.get("NO_COLOR"):
        return "never"
    if env.get("FORCE_COLOR"):
        return "always"
    return "auto"


def styled(stream: IO[str], environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether output to `stream` may carry styles (colour, bold): the one rule."""
    mode = color_mode(environ)
    if mode != "auto":
        return mode == "always"
    env = os.environ if environ is None else environ
    try:
        return stream.isatty() and env.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        return False


def console(stream: IO[str]) -> Any:
    """A rich Console for `stream` that draws styles only when `styled` allows them."""
    from rich.console import Console

    on = styled(stream)
    return Console(file=stream, highlight=False, soft_wrap=True, markup=False, emoji=False,
                   color_system="auto" if on else None, force_terminal=on or None)


@contextmanager
def progress(message: str, stream: Optional[IO[str]] = None) -> Iterator[None]:
    """A spinner with `message` while a long step runs, on a terminal (piped output, a log,
    gets the step's result lines only: a spinner's frames are noise there)."""
    out = stream or sys.stderr
    try:
        live = out is not None and out.isatty() and os.environ.get("TERM", "") != "dumb"
    except (AttributeError, ValueError):
        live = False
    if not live:
        yield
        return
    with console(out).status(one_line(message)):
        yield



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
    from rich.table import Table

    t = Table(box=None, show_header=header is not None, pad_edge=False)
    for i, h in enumerate(header or [""] * max((len(r) for r in rows), default=0)):
        t.add_column(h, style="bold cyan" if header is None and i == 0 else None, overflow="fold")
    for r in rows:
        t.add_row(*(one_line(str(c)) for c in r))
    console(out).print(t)
