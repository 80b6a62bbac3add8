"""`jobenv remote ...` and `--remote NAME` against a real sshd playing the login node
(tests/cluster/sshd.py), in a network namespace of its own (tests/cluster/netns.py) on a
private bridge: the laptop is this (root) namespace.  No scheduler here: the Slurm flow is
tests/test_remote_slurm.py.  Needs root (namespaces) and openssh-server."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cluster.netns import Hosts
from cluster.sshd import Sshd
from conftest import REPO, base_env, jobenv


def _why_not() -> str:
    if os.geteuid() != 0:
        return "needs root (a network namespace for the login node)"
    for prog in ("/usr/sbin/sshd", shutil.which("ssh") or "/nonexistent/ssh", shutil.which("nsenter") or "/x"):
        if not os.path.exists(prog):
            return f"{prog} is not installed (apt-get install openssh-server openssh-client)"
    return ""


@pytest.fixture(scope="module")
def login(tmp_path_factory):
    why = _why_not()
    if why:
        if os.environ.get("CI"):
            raise AssertionError(f"CI must run the --remote tests: {why}")
        pytest.skip(why)
    hosts = Hosts(["sshlogin"], "ssh").start()
    d = tmp_path_factory.mktemp("sshd")
    server = Sshd(d, hosts.enter("sshlogin"), hosts.addr["sshlogin"])
    try:
        server.start()
        # the login node's jobenv: this checkout, with a store of its own
        remote_home = d / "remote-jobenv"
        prog = d / "bin" / "jobenv"
        prog.parent.mkdir()
        prog.write_text(f"#!/bin/sh\nJOBENV_HOME={remote_home} PYTHONPATH={REPO} exec {sys.executable} -m jobenv "
                        "\"$@\"\n")
        prog.chmod(0o755)
        server.jobenv = str(prog)
        yield server
    finally:
        server.stop()
        hosts.stop()


@pytest.fixture
def laptop(login, tmp_path):
    env = base_env(tmp_path / "home", login.env())
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    yield env
    for name in ("login", "nokey", "changed", "prompt", "down", "unknown", "nojobenv"):
        jobenv(["remote", "logout", name], env, stdin=subprocess.DEVNULL)
    assert login.sessions() == [], "a session was left open on the login node"
    left = subprocess.run(["pgrep", "-f", login.env()["XDG_RUNTIME_DIR"]], capture_output=True, text=True).stdout
    assert not left.strip(), f"an ssh master was left running: {left}"


def run(env, *args, **kw):
    return jobenv(list(args), env, stdin=subprocess.DEVNULL, **kw)


def add(env, login, name, dest=None, jobenv_path=None):
    p = run(env, "remote", "add", name, dest or name, "--jobenv", jobenv_path or login.jobenv)
    assert p.returncode == 0, p.stderr


def test_add_list_check_rm(login, laptop):
    p = run(laptop, "remote", "add", "evil", "--", "-oProxyCommand=touch /tmp/x")
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "not starting with '-'" in p.stderr, p.stderr
    p = run(laptop, "remote", "add", "x", "login", "--jobenv", "/opt/my venv/bin/jobenv")
    assert p.returncode == 5 and "--jobenv" in p.stderr, p.stderr
    add(laptop, login, "login")
    conf = Path(laptop["XDG_CONFIG_HOME"]) / "jobenv" / "remotes.json"
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    assert stat.S_IMODE(conf.parent.stat().st_mode) == 0o700
    p = run(laptop, "remote", "list")
    assert "login" in p.stdout and login.jobenv in p.stdout, p.stdout
    p = run(laptop, "remote", "check", "login")
    version = run(laptop, "--version").stdout.split()[-1]
    assert p.returncode == 0 and p.stdout.strip() == f"remote login (login): jobenv {version} at {login.jobenv}", \
        p.stdout + p.stderr
    # one master for the session: the check's connection is still up, and later calls ride on it
    socks = os.listdir(Path(laptop["XDG_RUNTIME_DIR"]) / f"jobenv-ssh-{os.getuid()}")
    assert len(socks) == 1, socks
    assert stat.S_IMODE((Path(laptop["XDG_RUNTIME_DIR"]) / f"jobenv-ssh-{os.getuid()}").stat().st_mode) == 0o700
    p = run(laptop, "remote", "rm", "login")
    assert p.returncode == 0 and "login" not in run(laptop, "remote", "list").stdout
    p = run(laptop, "status", "--remote", "login")
    assert p.returncode == 3 and "no remote named 'login'" in p.stderr, p.stderr


def test_words_go_exactly_and_the_code_comes_back(login, laptop):
    add(laptop, login, "login")
    odd = "it's $HOME `id` \\ \"q\" ~ * ;|& é"
    p = run(laptop, "runs", "--remote", "login", "show", odd)
    here = run(laptop, "runs", "show", odd)
    assert here.returncode not in (0, 7)
    there = here.stderr.replace(laptop["JOBENV_HOME"], str(login.dir / "remote-jobenv"))
    assert (p.returncode, p.stderr) == (here.returncode, there), (p.stderr, here.stderr)
    p = run(laptop, "status", "--remote=login", "-j", "12345")  # the remote store has no job 12345
    assert p.returncode == 3 and p.stderr.startswith("jobenv: error:") and "12345" in p.stderr, p.stderr
    p = run(laptop, "runs", "list", "--remote", "login", "--json")
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr
    p = run(laptop, "status", "--sync", ".")
    assert p.returncode == 2, p.stderr  # a laptop option status does not have


@pytest.mark.parametrize("alias,says", [
    ("down", "cannot reach remote down (down): ssh: connect to host"),
    ("nokey", "remote nokey (nokey) refused the login (Permission denied (publickey))"),
    ("changed", "remote changed (changed): its host key has CHANGED"),
    ("unknown", "remote unknown (unknown): its host key is not known to your ssh yet: run `jobenv remote login "
                "unknown` in a terminal"),
    ("prompt", "remote prompt (prompt) needs a login first (a password or MFA prompt, and no terminal here): "
               "run `jobenv remote login prompt` in a terminal"),
])
def test_ssh_failures_are_one_line(login, laptop, alias, says):
    add(laptop, login, alias)
    for args in (["status", "--remote", alias], ["remote", "check", alias]):
        p = run(laptop, *args)
        assert p.returncode == 7, (p.returncode, p.stderr)
        assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"jobenv: error: {says}"), p.stderr
        assert p.stdout == ""


def test_no_jobenv_there(login, laptop):
    add(laptop, login, "nojobenv", "login", "/nonexistent/bin/jobenv")
    p = run(laptop, "runs", "--remote", "nojobenv")
    assert p.returncode == 7 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("jobenv: error: remote nojobenv: no jobenv at /nonexistent/bin/jobenv there ("), \
        p.stderr


@pytest.mark.slow  # every doctor check, over ssh: ~12 s
def test_doctor_runs_there(login, laptop):
    add(laptop, login, "login")
    p = run(laptop, "doctor", "--remote", "login", "--json", "--timeout", "30")
    checks = json.loads(p.stdout)["checks"]
    assert p.returncode == (1 if any(c["status"] == "fail" for c in checks) else 0), p.stderr
    assert any(str(login.dir / "remote-jobenv") in json.dumps(c) for c in checks), p.stdout[:2000]


def test_only_the_laptop_options_tokens_are_left_out(login, laptop):
    """`--remote` as another option's value, and after `--`, goes on as typed; only the
    tokens click read as --remote (either spelling) stay here."""
    add(laptop, login, "login")
    argv = ["--profile", "slurm", "--dry-run", "--launcher-args", "--remote", "--", "echo", "--remote", "login",
            "--remote=x"]
    here = run(laptop, "submit", *argv)
    for spelling in (["--remote", "login"], ["--remote=login"]):
        p = run(laptop, "submit", *spelling, *argv)
        assert p.returncode == 0 == here.returncode, p.stderr + here.stderr
        assert "'--launcher-args=--remote' -- 'echo' '--remote' 'login' '--remote=x'" in p.stdout, p.stdout
        launch = [ln for ln in p.stdout.splitlines() if ln.startswith("jobenv launch")]
        assert launch == [ln.replace(laptop["JOBENV_HOME"], str(login.dir / "remote-jobenv"))
                          for ln in here.stdout.splitlines() if ln.startswith("jobenv launch")], p.stdout
