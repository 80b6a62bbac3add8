"""`jobenv init --auto` under every bash `shopt`/`set -o`, zsh and dash option a user may set.

Each option is flipped from its interactive default, one at a time, in the rc file of a
real interactive shell (`bash --rcfile RC -i`, `zsh -i` with ZDOTDIR, `dash -i` with ENV), before the init
code is sourced.  The shell must then print exactly what it prints with that option and
no init (no "no match", no parse error, no early exit) and have restored the saved job of
its host (`JOBENV_JOBID`, `launch`).  The options are listed by the shells themselves,
so a new shell version's options are tried too.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from conftest import REPO, base_env, jobenv, need
from jobenv.store import cache as getcache

# Options that cannot be set from an rc file, or whose whole point is to print or to stop
# running commands: the user asked for that output, in every shell, with or without jobenv.
SKIP = {
    "bash": {"login_shell", "restricted_shell",  # read-only
             "xtrace", "verbose",  # print each command by design
             "noexec", "onecmd"},  # run nothing / one command
    "zsh": {"interactive", "shinstdin", "login", "privileged", "restricted", "singlecommand",  # fixed at start
            "xtrace", "verbose", "exec", "rcs", "globalrcs",  # trace by design; run nothing; rc files
            "printexitvalue", "sourcetrace"},
    "dash": {"interactive", "stdin", "privileged", "noexec", "xtrace", "verbose"},  # prints on any failing command of the user's own, by design
}
SCRIPT = 'echo "[${JOBENV_JOBID-}]"; if type launch >/dev/null 2>&1; then echo LAUNCH; fi; echo END'


def _listing(shell: str) -> List[str]:
    """Commands that flip each option from what an interactive shell starts with."""
    if shell in ("bash", "dash"):
        listing = "shopt -p; set +o" if shell == "bash" else "set +o"
        argv = [need(shell), "--norc", "--noprofile"] if shell == "bash" else [need(shell)]
        out = subprocess.run([*argv, "-i", "-c", listing], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, check=True, env={"PATH": "/usr/bin:/bin"}).stdout
        flips = []
        for line in out.splitlines():
            cmd, flag, name = line.split()
            if name in SKIP[shell]:
                continue
            other = {"-s": "-u", "-u": "-s", "-o": "+o", "+o": "-o"}[flag]
            flips.append(f"{cmd} {other} {name}")
        return flips
    out = subprocess.run([need("zsh"), "-f", "-i", "-c", 'for o in ${(ok)options}; do print $o $options[$o]; done'],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, check=True).stdout
    flips = []
    for line in out.splitlines():
        name, state = line.split()
        if name not in SKIP["zsh"]:
            flips.append(f"{'unsetopt' if state == 'on' else 'setopt'} {name}")
    return flips


def _shell(shell: str, tmp: Path, rc: str, env: Dict[str, str], script: str) -> Tuple[int, str, str]:
    d = Path(tempfile.mkdtemp(dir=tmp))
    if shell == "bash":
        (d / "rc").write_text(rc)
        argv = [need("bash"), "--rcfile", str(d / "rc"), "-i", "-c", script]
    elif shell == "dash":  # an interactive dash reads $ENV
        (d / "rc").write_text(rc)
        env = {**env, "ENV": str(d / "rc")}
        argv = [need("dash"), "-i", "-c", script]
    else:
        (d / ".zshrc").write_text(rc)
        env = {**env, "ZDOTDIR": str(d)}
        argv = [need("zsh"), "-i", "-c", script]
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], *argv], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=d)
    return p.returncode, p.stdout.replace(str(d), "RCDIR"), p.stderr.replace(str(d), "RCDIR")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A store with this host's job saved and getjobenv's snippet primed, a `jobenv`, init files."""
    tmp = tmp_path_factory.mktemp("opts")
    home = tmp / "home"
    home.mkdir()
    exe = tmp / "bin" / "jobenv"
    exe.parent.mkdir()
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m jobenv \"$@\"\n")
    exe.chmod(0o755)
    env = {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PATH": f"{exe.parent}:/usr/bin:/bin",
           "JOBENV_EXE": str(exe), "JOBENV_HOSTNAME": "n1", "LANG": "C.UTF-8", "TERM": "dumb"}
    jobenv(["save", "--quiet"], {**base_env(home), "JOBENV_HOSTNAME": "n1"}, check=True)
    Path(env["JOBENV_HOME"], "cache").mkdir(mode=0o700)
    time.sleep(getcache.RACY + 0.3)
    jobenv(["get"], {**base_env(home), "JOBENV_HOSTNAME": "n1"}, check=True)
    inits = {}
    for shell, dialect in (("bash", "bash"), ("zsh", "zsh"), ("dash", "sh")):
        inits[shell] = tmp / f"init.{shell}"
        inits[shell].write_text(jobenv(["init", dialect, "--auto"], base_env(home), check=True).stdout)
    return tmp, env, inits


# where the shell starts: (environment changes, what it then has)
PLACES = {
    "host-of-a-saved-job": ({}, "[n1]\nLAUNCH"),
    "another-host": ({"JOBENV_HOSTNAME": "n2"}, "[]"),
    "empty-store": ({"JOBENV_HOME": "{tmp}/empty/.jobenv"}, "[]"),
    "no-store": ({"JOBENV_HOME": "{tmp}/none/.jobenv"}, "[]"),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("shell", ["bash", "zsh", "dash"])
def test_init_under_every_option(saved, shell, place):
    tmp, env, inits = saved
    flips = _listing(shell)
    assert len(flips) > {"bash": 60, "zsh": 150, "dash": 10}[shell]
    extra, after = PLACES[place]
    env = {**env, **{k: v.replace("{tmp}", str(tmp)) for k, v in extra.items()}}
    if place == "empty-store":
        Path(env["JOBENV_HOME"], "jobs").mkdir(parents=True, mode=0o700, exist_ok=True)
        Path(env["JOBENV_HOME"]).chmod(0o700)

    def one(flip: str):
        want = _shell(shell, tmp, f"{flip}\n", env, "; ".join(f"echo '{x}'" for x in (after + "\nEND").split("\n")))
        got = _shell(shell, tmp, f"{flip}\n. {inits[shell]}\n", env, SCRIPT)
        return flip, want, got

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, flips))
    bad = [(flip, got) for flip, want, got in results if got != want]
    assert not bad, "\n".join(f"{flip}: {got}" for flip, got in bad)
