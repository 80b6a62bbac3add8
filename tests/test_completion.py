"""Completion by behaviour: real interactive bash, zsh and fish in a pseudo-terminal press TAB.

Each case types `jobenv sh<TAB>`, `jobenv get --job <TAB>` (saved job ids) and
`jobenv save --profile pol<TAB>` (profile names), then runs what the line became through
`echo`, so the test reads what the shell itself completed.  Scripts come from the installed
click at run time (`jobenv completion SHELL`), loaded four ways: sourced, zsh's `_jobenv`
on fpath, zsh sourced before compinit, and through `jobenv init` (loaded on the first TAB).
"""
from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

import machines
from conftest import REPO, base_env, jobenv, need
from jobenv.cli.main import cli
from jobenv.cli.completion import complete_job_ids, complete_profiles

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07|\r")
CASES = [("jobenv sh", "jobenv show"), ("jobenv get --job ", "jobenv get --job 12345678"),
         ("jobenv save --profile pol", "jobenv save --profile polaris")]
SETUP = {
    "bash": 'eval "$(jobenv completion bash)"',
    "bash-init": 'eval "$(jobenv init bash)"',
    "zsh": 'autoload -Uz compinit && compinit -u -D; eval "$(jobenv completion zsh)"',
    "zsh-fpath": "fpath=({fdir} $fpath); autoload -Uz compinit && compinit -u -D",
    "zsh-before-compinit": 'eval "$(jobenv completion zsh)"; autoload -Uz compinit && compinit -u -D',
    "zsh-init": 'eval "$(jobenv init zsh)"; autoload -Uz compinit && compinit -u -D',
    "fish": "jobenv completion fish | source",
    "fish-init": "jobenv init fish | source",
}
ARGV = {"bash": ["--norc", "--noprofile", "-i"], "zsh": ["-f", "-i"], "fish": ["--no-config", "-i"]}


def _own_tty() -> None:
    """In the child: a new session whose controlling terminal is the pty (fish insists)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Term:
    """An interactive shell on a pseudo-terminal."""

    def __init__(self, argv, env):
        self.fd, slave = pty.openpty()
        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, preexec_fn=_own_tty)
        os.close(slave)
        self.out = ""

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, pattern: str, timeout: float = 60.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(pattern, ANSI.sub("", self.out)):
                return True
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    self.out += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    break
        return False

    def close(self) -> None:
        self.p.kill()
        self.p.wait()
        os.close(self.fd)


@pytest.mark.parametrize("variant", list(SETUP))
def test_tab_completes(tmp_path, home, variant):
    shell = variant.split("-")[0]
    exe = need(shell)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "jobenv").write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m jobenv \"$@\"\n")
    (bindir / "jobenv").chmod(0o755)
    jobenv(["save", "--quiet"], base_env(home, machines.perlmutter(tmp_path)), check=True)
    fdir = tmp_path / "zfunc"
    fdir.mkdir()
    (fdir / "_jobenv").write_text(jobenv(["completion", "zsh"], base_env(home), check=True).stdout)
    env = {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "TERM": "xterm", "LANG": "C.UTF-8",
           "PATH": f"{bindir}:/usr/bin:/bin", "JOBENV_EXE": str(bindir / "jobenv"),
           "XDG_CONFIG_HOME": str(home / ".config"), "fish_greeting": ""}
    t = Term([exe, *ARGV[shell]], env)
    try:
        t.send(SETUP[variant].replace("{fdir}", str(fdir)) + "; echo READY\"\"1\r")
        assert t.expect(r"(?m)^READY1"), t.out[-2000:]
        for i, (typed, want) in enumerate(CASES):
            t.send(typed + "\t")
            time.sleep(0.5)
            assert t.expect(re.escape(want), 60), (typed, ANSI.sub("", t.out)[-1500:])
            t.send(f"\x01echo @{i}@\r")  # Ctrl-A: run what the line became through echo
            assert t.expect(rf"(?m)^@{i}@{re.escape(want)}\s*$"), (typed, ANSI.sub("", t.out)[-1500:])
    finally:
        t.close()


def test_dynamic_completers_never_fail_on_a_bad_store(tmp_path, monkeypatch):
    monkeypatch.setenv("JOBENV_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("not a directory")
    assert complete_job_ids(None, None, "") == []  # type: ignore[arg-type]
    assert "polaris" in [c.value for c in complete_profiles(None, None, "pol")]  # type: ignore[arg-type]


def test_profile_completion_of_an_alias_bomb_is_empty_and_fast(tmp_path):
    """TAB after --profile loads every profile: a 423-byte alias bomb among them made it
    spin for most of a minute and end in an uncaught MemoryError; now: no candidates."""
    from test_profiles import _limited, bomb

    (tmp_path / "bomb.yaml").write_text(bomb())
    code = "from jobenv.cli.completion import complete_profiles\nprint(complete_profiles(None, None, ''))\n"
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JOBENV_PROFILES": str(tmp_path)}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                       preexec_fn=_limited)
    assert (p.returncode, p.stdout, p.stderr) == (0, "[]\n", ""), (p.returncode, p.stderr[-300:])


def test_every_job_and_profile_parameter_completes():
    for name, cmd in cli.commands.items():
        for p in cmd.params:
            if p.name in ("job", "profile"):
                assert getattr(p, "_custom_shell_complete", None) is not None, (name, p.name)


def test_no_committed_completion_files():
    assert not list((REPO / "completions").glob("jobenv.*")) if (REPO / "completions").exists() else True


def test_zsh_script_is_an_fpath_function(home):
    text = jobenv(["completion", "zsh"], base_env(home), check=True).stdout
    assert text.startswith("#compdef jobenv\n")
    p = subprocess.run([need("zsh"), "-f", "-c", "setopt err_exit nounset; eval \"$(cat)\"; echo OK"], input=text,
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "HOME": str(home)})
    assert (p.returncode, p.stdout, p.stderr) == (0, "OK\n", ""), p.stderr
    assert Path(REPO / "jobenv" / "cli" / "completion.py").exists()


@pytest.mark.parametrize("shell_name", ["zsh", "fish"])
def test_candidates_carry_no_control_bytes(tmp_path, home, shell_name):
    """A profile description (or a record) with ESC and a newline: click writes candidates and
    their help raw, one per line, so they would reach the terminal or split into new ones."""
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True)
    (d / "mine.yaml").write_text('name: mine\nscheduler: local\ndescription: "evil\\e]0;owned\\a\\nx"\n'
                                 "launchers: [{argv: [a]}]\n")
    env = base_env(home, {"_JOBENV_COMPLETE": f"{shell_name}_complete", "COMP_WORDS": "jobenv save --profile mi",
                          "COMP_CWORD": "3" if shell_name == "zsh" else "mi"})
    p = subprocess.run([sys.executable, "-m", "jobenv"], env=env, capture_output=True, text=True, timeout=60)
    assert "mine" in p.stdout and "\x1b" not in p.stdout and "\x07" not in p.stdout, repr(p.stdout)
    assert "evil\\x1b]0;owned\\x07\\nx" in p.stdout, repr(p.stdout)
