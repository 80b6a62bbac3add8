"""The README and the docs site (docs/, MkDocs): what keeps them short, single and true.

The README stays a front door (at most 250 lines); the rest lives once in docs/.  A paragraph
written twice drifts (the old README said a failover cost 0.17 s in one place and 0.33 s in
another), a development machine's path tells a reader nothing, and a console example nobody
can trace back to a test or a real system cannot be trusted.  The site itself is built by
`mkdocs build --strict` in .ci/run (broken links and anchors fail it); the command reference
and the package map are generated, so they are checked here only for completeness.
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
import yaml

from conftest import REPO

DOCS = REPO / "docs"
README_MAX_LINES = 250
FENCE = re.compile(r"^\s*```(\S*)\s*$")
# paths of the machines jobenv was developed and measured on
MACHINE_PATHS = re.compile(r"/root/|/work/|/tmp/s\d|/tmp/ci\d|\.pyenv/versions|/home/runner")
TRACED = re.compile(r"real output|output from", re.I)
TEST_FILE = re.compile(r"tests/[\w/]+\.py")


def pages() -> List[Path]:
    return [REPO / "README.md"] + sorted(DOCS.glob("*.md"))


def blocks(text: str) -> Iterator[Tuple[str, str, str]]:
    """(kind, language, text) pieces of a markdown file: 'prose' or 'code', in order."""
    lines, prose, code, lang = text.split("\n"), [], [], None
    for line in lines:
        m = FENCE.match(line)
        if lang is None and m:
            yield "prose", "", "\n".join(prose)
            prose, code, lang = [], [], m.group(1)
        elif lang is not None and m and not m.group(1):
            yield "code", lang, "\n".join(code)
            lang = None
        elif lang is None:
            prose.append(line)
        else:
            code.append(line)
    assert lang is None, "a code fence is never closed"
    yield "prose", "", "\n".join(prose)


def paragraphs(text: str) -> Iterator[str]:
    """The prose paragraphs worth comparing: not headings, table rows, list markers alone."""
    for kind, _, body in blocks(text):
        if kind != "prose":
            continue
        for para in re.split(r"\n\s*\n", body):
            words = " ".join(para.split())
            if len(words) >= 80 and not words.startswith(("#", "|", "!!!")):
                yield words


def repeated(texts: Dict[str, str]) -> Dict[str, List[str]]:
    """Each paragraph that more than one place holds, with the places (file names)."""
    seen: Dict[str, List[str]] = {}
    for name, text in texts.items():
        for para in paragraphs(text):
            seen.setdefault(para, []).append(name)
    return {para: where for para, where in seen.items() if len(where) > 1}


def test_readme_is_short():
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move the detail into docs/"


def test_no_paragraph_is_written_twice():
    texts = {p.name: p.read_text() for p in pages()}
    dups = repeated(texts)
    assert not dups, "\n\n".join(f"{where}: {para[:200]}" for para, where in dups.items())


def test_repeated_finds_a_paragraph_written_twice():
    para = "A paragraph long enough to count, written in two places that will drift apart one day."
    assert repeated({"a.md": f"# A\n\n{para}\n", "b.md": f"intro\n\n{para}\n"}) == {para: ["a.md", "b.md"]}
    assert repeated({"a.md": f"```text\n{para}\n```\n", "b.md": para}) == {}  # code is not prose


def test_no_development_machine_paths():
    found = [f"{p.name}:{n}: {line.strip()[:120]}" for p in pages()
             for n, line in enumerate(p.read_text().split("\n"), 1) if MACHINE_PATHS.search(line)]
    assert not found, "\n".join(found)


def untraced(text: str) -> List[str]:
    """Console and text examples with no test file or real system named in their section.

    An example is traced when the prose of its section (since the last `#`/`##` heading) names
    an existing `tests/...py` or says "real output" / "output from" (naming the system)."""
    out, section = [], ""
    for kind, lang, body in blocks(text):
        if kind == "prose":
            heads = list(re.finditer(r"^#{1,2} .*$", body, re.M))
            section = body[heads[-1].end():] if heads else section + "\n" + body
            continue
        if not lang:
            out.append(f"a code block without a language: {body[:80]!r}")
        elif lang in ("console", "text"):
            tests = [t for t in TEST_FILE.findall(section) if (REPO / t).is_file()]
            if not tests and not TRACED.search(section):
                out.append(body.split("\n")[0][:100])
    return out


def test_every_console_example_is_traced():
    bad = [f"{p.name}: {b}" for p in pages() for b in untraced(p.read_text())]
    assert not bad, "\n".join(bad)


def test_untraced_finds_an_example_without_a_source():
    assert untraced("## A\n\nSomething prints:\n\n```console\n$ jobenv list\n```\n") == ["$ jobenv list"]
    assert untraced("## A\n\nReal output on Polaris:\n\n```console\n$ jobenv list\n```\n") == []
    assert untraced("## A\n\nAs `tests/test_docs.py` runs it:\n\n```text\nok\n```\n") == []
    assert untraced("## A\n\n```\nno language\n```\n") == ["a code block without a language: 'no language'"]


def nav_files(nav: object) -> List[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, dict):
        return [f for v in nav.values() for f in nav_files(v)]
    if isinstance(nav, list):
        return [f for v in nav for f in nav_files(v)]
    return []


def test_every_page_is_in_the_navigation():
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    listed = nav_files(config["nav"])
    assert sorted(listed) == sorted(p.name for p in DOCS.glob("*.md"))
    assert len(listed) == len(set(listed))


def test_readme_links_reach_pages_that_exist():
    links = re.findall(r"\]\((docs/[^)#]+)", (REPO / "README.md").read_text())
    assert links and all((REPO / link).is_file() for link in links), links


def test_the_quickstart_stays_in_the_readme():
    readme = (REPO / "README.md").read_text()
    assert "## Quickstart" in readme and "**1. Install" in readme  # tests/test_quickstart.py reads them


@pytest.fixture(scope="module")
def package_map():
    spec = importlib.util.spec_from_file_location("package_map", DOCS / "hooks" / "package_map.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_package_map_lists_every_module_with_its_summary(package_map):
    rows = dict(package_map.modules())
    files = [p for p in (REPO / "jobenv").rglob("*.py") if "__pycache__" not in p.parts]
    assert len(rows) == len(files)
    assert not [name for name, summary in rows.items() if not summary], "modules without a docstring"
    page = package_map.render()
    for name in rows:
        assert f"`{name.rsplit('.', 1)[-1]}`" in page or f"### `{name}`" in page, name
    folders = {p.parent.relative_to(REPO) for p in files}  # every folder of modules, __init__ or not
    assert all(f"### `{'.'.join(f.parts)}`" in page for f in folders), folders


def test_package_map_goes_where_the_marker_is(package_map):
    assert package_map.MARKER in (DOCS / "architecture.md").read_text()
    assert package_map.on_page_markdown(f"x\n{package_map.MARKER}\n", None, None, None).count("| `atomic` |") == 1
    assert package_map.first_sentence("One line. Then more.\n\nAnd a paragraph.") == "One line."


def test_click_blocks_keep_help_lines_as_written():
    spec = importlib.util.spec_from_file_location("click_blocks", DOCS / "hooks" / "click_blocks.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    help_lines = ["Run it.", "", "\b", "exit 0:   done", "exit 124: timed out", "", "More prose."]
    assert mod.fence(help_lines) == ["Run it.", "", "```text", "exit 0:   done", "exit 124: timed out", "```", "",
                                     "More prose."]
    assert mod.fence(["\b", "last"]) == ["```text", "last", "```"]


def missing_paths(text: str, root: Path) -> List[str]:
    """Repository paths the text names (jobenv/..., tests/..., benchmarks/..., shell/..., .ci/...)
    that do not exist: a moved or renamed file the docs still send readers to.  A name followed
    by `<`, `*` or `{`, or ending in `_`/`-`, is a pattern (`tests/test_<module>.py`), not a path."""
    bad = []
    for m in re.finditer(r"(?<![\w/.])((?:jobenv|tests|benchmarks|shell|\.ci)/[\w./-]*)(.?)", text):
        path, after = m.group(1).rstrip("."), m.group(2)
        if after in ("<", "*", "{") or path.endswith(("_", "-")):
            continue
        if not (root / path).exists():
            bad.append(path)
    return bad


def test_the_files_the_docs_name_exist():
    bad = [f"{p.name}: {path}" for p in pages() for path in missing_paths(p.read_text(), REPO)]
    assert not bad, "\n".join(bad)


def test_missing_paths_finds_a_moved_file(tmp_path):
    (tmp_path / "jobenv").mkdir()
    (tmp_path / "jobenv" / "store.py").write_text("")
    text = "see `jobenv/store.py`, `jobenv/fastget.py`, `tests/test_<module>.py`, `benchmarks/results/bench-<day>.txt`"
    assert missing_paths(text, tmp_path) == ["jobenv/fastget.py"]


def test_every_command_summary_is_a_whole_sentence():
    """The command reference lists each command by its help's first line (mkdocs-click's
    subcommand list; `jobenv --help` likewise): a first paragraph that runs on to a second line
    was cut mid-sentence there (issue 33: report, rm, stage)."""
    from jobenv.cli.main import cli

    def walk(group, prefix=""):
        for name, cmd in group.commands.items():
            yield prefix + name, cmd
            if hasattr(cmd, "commands"):
                yield from walk(cmd, prefix + name + " ")

    cut = [name for name, cmd in walk(cli) if not cmd.short_help and cmd.help
           and len(lines := cmd.help.strip().splitlines()) > 1 and lines[1].strip()]
    assert cut == [], f"first help paragraph runs past its first line: {cut}"


def test_report_html_is_shown_with_its_file():
    """`jobenv report --html` requires FILE; the README and the docs show it with one."""
    texts = [(REPO / "README.md").read_text()] + [p.read_text() for p in (REPO / "docs").rglob("*.md")]
    bare = [m.group(0) for t in texts for m in re.finditer(r"report --html(?![ =]\S)[^\n]{0,20}", t)]
    assert bare == [], bare


def test_no_help_block_holds_wrapped_prose():
    """A `\\b` paragraph of a command's help is kept line for line, which the command reference
    (mkdocs-click, docs/hooks/click_blocks.py) shows as a preformatted block: for rows and
    examples, not for sentences wrapped over lines (issue 33: launch's description read as code).
    A line that goes on with a lowercase word, a backquote or a parenthesis is such a wrap."""
    from jobenv.cli.main import cli

    def walk(group, prefix=""):
        for name, cmd in group.commands.items():
            yield prefix + name, cmd
            if hasattr(cmd, "commands"):
                yield from walk(cmd, prefix + name + " ")

    wrapped = []
    for name, cmd in walk(cli):
        for para in re.split(r"\n\s*\n", cmd.help or ""):
            lines = [ln.strip() for ln in para.strip("\n").splitlines()]
            if lines[:1] == ["\b"]:
                wrapped += [f"{name}: {a!r} / {b!r}" for a, b in zip(lines[1:], lines[2:])
                            if b and (b[0].islower() or b[0] in "`(-")]
    assert wrapped == [], "\n".join(wrapped)
