"""A program the ranks cannot start is one line naming it and the host (exit 127, or 126),
said before the launch: never the per-rank wrapper's path and line, once per rank."""
from __future__ import annotations

import socket

import pytest

from conftest import mpich
from launchkit import RESTORE, fresh_env, save, shell, tools


@pytest.mark.parametrize("cmd,rc,words", [
    ("pyhton3 x.py", 127, "jobenv: error: pyhton3: command not found on "),
    ("/nonexistent/prog", 127, "jobenv: error: /nonexistent/prog: command not found on "),
    ("./data.txt", 126, "jobenv: error: ./data.txt: permission denied on "),
    ("/tmp", 126, "jobenv: error: /tmp: is a directory on "),
])
def test_missing_program_is_named(tmp_path, cmd, rc, words):
    mpich()
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    save(env, "--ranks-per-host", "2")
    (tmp_path / "data.txt").write_text("not a program\n")
    p = shell(env, f"{RESTORE} && launch {cmd}", cwd=tmp_path)
    assert p.returncode == rc, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(words), p.stderr
    assert "rankwrap" not in p.stderr and socket.gethostname() in p.stderr
