"""The docs' console examples that a local job can run, run as written: they must print what the page shows.

An example opts in by naming this file in the prose just before it.  Each `$ ` line (with its `> `
continuation lines) runs in a fresh bash that restored a local job saved with 2 slots (the
MPICH wheel's mpiexec), stdout and stderr together, and must print exactly the lines under it,
this host's name read as `vm`.  An example whose output drifted (a reworded error, a new
line) fails here instead of misleading a reader.
"""
from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import List, Tuple

import pytest

from conftest import REPO
from launchkit import RESTORE, local_job, shell
from test_docs import blocks

HERE = "tests/test_docs_examples.py"


def examples() -> List[Tuple[str, str]]:
    """(page, console block) for every block whose preceding prose names this file."""
    found = []
    for page in sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]:
        before = ""
        for kind, lang, body in blocks(page.read_text()):
            if kind == "prose":
                before = body
            elif lang == "console" and HERE in before:
                found.append((page.name, body))
    return found


def transcript(block: str) -> List[Tuple[str, List[str]]]:
    """The block as (command, the lines it prints) pairs."""
    steps: List[Tuple[str, List[str]]] = []
    for line in block.split("\n"):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.startswith("> ") and steps and not steps[-1][1]:
            steps[-1] = (steps[-1][0] + "\n" + line[2:], [])
        else:
            assert steps, f"output before any command: {line!r}"
            steps[-1][1].append(line)
    return steps


def test_transcript_reads_commands_and_their_output():
    block = "$ for i in 1 2; do\n>   echo $i\n> done\n1\n2\n$ true"
    assert transcript(block) == [("for i in 1 2; do\n  echo $i\ndone", ["1", "2"]), ("true", [])]


def test_some_examples_opt_in():
    assert examples(), f"no console example names {HERE}"


@pytest.mark.e2e
@pytest.mark.parametrize("page,block", examples(), ids=lambda v: v if v.endswith(".md") else "")
def test_example_prints_what_the_page_shows(tmp_path: Path, page: str, block: str):
    env = local_job(tmp_path, 2)
    host = re.escape(socket.gethostname().split(".")[0])
    for command, expected in transcript(block):
        p = shell(env, f"{RESTORE} && {{ {command}\n}} 2>&1", cwd=tmp_path)
        got = re.sub(rf"\b{host}\b", "vm", p.stdout).rstrip("\n").split("\n") if p.stdout else []
        assert got == expected, f"{page}: `{command}` printed:\n{p.stdout}{p.stderr}"
