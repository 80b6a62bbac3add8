"""The docs' console examples that a local job can run, run as written: they must print what the page shows.

An example opts in by naming this file in the paragraph just before it.  Each `$ ` line (with its `> `
continuation lines) runs in a fresh bash that restored a local job saved with 2 slots (the
MPICH wheel's mpiexec), in ~/project, stdout and stderr together, and must print exactly the
lines under it, this host's name read as `vm` and the paths as user alice's (`as_shown`).  An example whose output drifted (a reworded error, a new
line) fails here instead of misleading a reader.
"""
from __future__ import annotations

import os
import re
import sys
import socket
from pathlib import Path
from typing import List, Tuple

import pytest

import machines
from conftest import BASE_PATH, REPO, base_env, jobenv
from launchkit import RESTORE, local_job, shell
from test_docs import blocks

HERE = "tests/test_docs_examples.py"


def examples() -> List[Tuple[str, str]]:
    """(page, console block) for every block whose preceding paragraph names this file."""
    found = []
    for page in sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]:
        before = ""
        for kind, lang, body in blocks(page.read_text()):
            if kind == "prose":
                paras = [p for p in re.split(r"\n\s*\n", body) if p.strip()]
                before = paras[-1] if paras else ""
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
    project = tmp_path / "home" / "project"
    project.mkdir()
    for command, expected in transcript(block):
        p = shell(env, f"{RESTORE} && {{ {command}\n}} 2>&1", cwd=project)
        got = as_shown(p.stdout, tmp_path).rstrip("\n").split("\n") if p.stdout else []
        assert got == expected, f"{page}: `{command}` printed:\n{p.stdout}{p.stderr}"


def as_shown(text: str, tmp_path: Path) -> str:
    """This run's host and paths as the pages show them: host vm, user alice's home, venv and clone."""
    text = re.sub(rf"\b{re.escape(socket.gethostname().split('.')[0])}\b", "vm", text)
    # the interpreter a batch script names: this venv's, by whichever of its names ran jobenv
    text = re.sub(r"'/[^']*/bin/python[0-9.]*'", "'/home/alice/venvs/train/bin/python'", text)
    venv_bin = os.path.dirname(sys.executable)
    pairs = [(str(REPO), "/home/alice/jobenv"), (str(tmp_path / "home"), "/home/alice"),
             (str(tmp_path / "bin"), "/home/alice/bin"), (venv_bin, "/home/alice/venvs/train/bin")]
    for path, shown in sorted(pairs, key=lambda pair: -len(pair[0])):  # longest first: a venv inside the clone
        text = text.replace(path, shown)
    return text


def save_examples() -> List[Tuple[str, List[str]]]:
    """(machine profile, the lines `jobenv save` prints) for each `host$ jobenv save` of schedulers.md."""
    found = []
    for kind, _, body in blocks((REPO / "docs" / "schedulers.md").read_text()):
        lines = body.split("\n")
        for i, line in enumerate(lines):
            if kind == "code" and re.fullmatch(r"[\w.-]+\$ jobenv save", line):
                out = []
                for after in lines[i + 1:]:
                    if not after or after.startswith(("#", "$")):
                        break
                    out.append(after)
                profile = re.search(r"^scheduler +\S+, profile (\S+)$", "\n".join(out), re.M)
                assert profile, out
                found.append((profile.group(1), out))
    return found


def test_every_scheduler_has_a_save_example():
    assert sorted(p for p, _ in save_examples()) == ["elcapitan", "lassen", "perlmutter", "polaris", "thetagpu"]


@pytest.mark.parametrize("profile,shown", save_examples(), ids=lambda v: v if isinstance(v, str) else "")
def test_save_on_a_machine_prints_what_the_page_shows(tmp_path: Path, profile: str, shown: List[str]):
    home = tmp_path / "home"
    home.mkdir()
    env = base_env(home, getattr(machines, profile)(tmp_path), path=f"{tmp_path / 'bin'}:{BASE_PATH}")
    p = jobenv(["save"], env)
    assert p.returncode == 0, p.stderr
    got = [line for line in p.stdout.replace(str(home), "~").rstrip("\n").split("\n") if not line.startswith("saved ")]
    assert got == shown, p.stdout
