"""One styling rule (jobenv.core.output.styled): --color, NO_COLOR, FORCE_COLOR, then the terminal.
The terminal cases run the real CLI on a pseudo-terminal: a pipe would hide what a user sees."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

import pytest

from conftest import base_env
from jobenv.core import output

ESC = "\x1b["


def on_a_terminal(argv, env, timeout=60.0) -> str:
    """Everything `argv` writes to a terminal (stdout and stderr on one pty)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("env,tty,want", [
    ({}, True, True),
    ({}, False, False),
    ({"TERM": "dumb"}, True, False),
    ({"NO_COLOR": "1"}, True, False),
    ({"NO_COLOR": ""}, True, True),  # no-color.org: only a non-empty value counts
    ({"FORCE_COLOR": "1"}, False, True),
    ({"NO_COLOR": "1", "JOBENV_COLOR": "always"}, False, True),  # --color beats the environment
    ({"FORCE_COLOR": "1", "JOBENV_COLOR": "never"}, True, False),
])
def test_one_rule_for_styles(env, tty, want):
    stream = Tty() if tty else io.StringIO()
    assert output.styled(stream, {"TERM": "xterm", **env}) is want


@pytest.mark.parametrize("extra,args,bold", [
    ({}, [], True),
    ({"NO_COLOR": "1"}, [], False),
    ({}, ["--color", "never"], False),
])
def test_tables_on_a_terminal_honour_no_color_and_color(home, extra, args, bold):
    env = base_env(home, {"TERM": "xterm", "COLUMNS": "200", **extra})
    out = on_a_terminal([sys.executable, "-m", "jobenv", *args, "profiles"], env)
    assert "polaris" in out, out
    assert (ESC in out) is bold, repr(out[:400])


def test_color_always_styles_a_pipe(home):
    p = subprocess.run([sys.executable, "-m", "jobenv", "--color", "always", "profiles"],
                       env=base_env(home, {"TERM": "xterm"}), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "polaris" in p.stdout
    # piped output stays plain columns (data to copy or grep): --color always styles terminals only
    assert ESC not in p.stdout


def test_progress_spins_on_a_terminal_only(home, tmp_path):
    script = ("import time\nfrom jobenv.core.output import progress\n"
              "with progress('packing 12 MB of /x'):\n    time.sleep(0.6)\nprint('done')\n")
    env = base_env(home, {"TERM": "xterm"})
    seen = on_a_terminal([sys.executable, "-c", script], env)
    assert "packing 12 MB of /x" in seen and "done" in seen, repr(seen)
    piped = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert piped.stdout == "done\n" and piped.stderr == "", piped
