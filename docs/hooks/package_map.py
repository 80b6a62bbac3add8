"""The package map of docs/architecture.md, drawn from the code at every `mkdocs build`.

Each package of `jobenv/` becomes a section, each module a row with the first sentence of its
docstring, so the map cannot drift from the tree: a module added, moved or renamed shows up
on the next build.  The modules are parsed (`ast`), never imported.  MkDocs calls
`on_page_markdown` (mkdocs.yml `hooks:`); `python docs/hooks/package_map.py` prints the map.
"""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any, List, Tuple

MARKER = "<!-- package-map -->"
ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "jobenv"


def first_sentence(doc: str) -> str:
    """The docstring's first sentence, on one line: the map's one-line summary."""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    return re.split(r"(?<=\.)\s+(?=[A-Z`(])", para, maxsplit=1)[0]


def summary(path: Path) -> str:
    """The first sentence of a module's docstring ('' when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return first_sentence(doc) if doc else ""


def modules(package: Path = PACKAGE) -> List[Tuple[str, str]]:
    """(dotted module name, summary) for every module under the package, in tree order."""
    rows = []
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(package.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        rows.append((".".join(parts), summary(path)))
    return rows


def render(package: Path = PACKAGE) -> str:
    """The map as markdown: one table per package, its own summary first."""
    rows = modules(package)
    own = dict(rows)
    is_package = {n for n in own if (package.parent / n.replace(".", "/") / "__init__.py").exists()}
    # a directory of modules without __init__ (rankhook/) is a group of its own as well
    groups = sorted(is_package | {n.rsplit(".", 1)[0] for n in own if "." in n})
    out = [f"{len(rows)} modules in {len(groups)} folders (generated from the docstrings at build time)."]
    for pkg in groups:
        children = [(n, s) for n, s in rows if n.rsplit(".", 1)[0] == pkg and n not in is_package]
        out += ["", f"### `{pkg}`", ""]
        out += [own[pkg], ""] if own.get(pkg) else []
        if children:
            out += ["| module | what it is for |", "| --- | --- |"]
            out += [f"| `{n.rsplit('.', 1)[1]}` | {s.replace('|', chr(92) + '|')} |" for n, s in children]
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: put the map where the page holds the marker."""
    return markdown.replace(MARKER, render()) if MARKER in markdown else markdown


if __name__ == "__main__":
    sys.stdout.write(render())
