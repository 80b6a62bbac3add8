"""From a laptop to the Slurm test cluster (tests/cluster/slurm.py) with `--remote`: a real
sshd plays the login node inside node1's namespace (tests/cluster/sshd.py); the laptop is
this (root) namespace, with a store and config of its own.  One test, since the cluster is
slow: submit --sync, logs -f to the end, status, runs, report --html, and ^C of a follower
and cancel of a second job, with nothing left running on either side.
The cluster is the session's (one cluster at a time on a machine, under its lock)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.sshd import Sshd
from conftest import REPO, base_env
from test_remote_ssh import _why_not

pytestmark = pytest.mark.e2e
PYBIN = str(Path(sys.executable).parent)


@pytest.fixture
def site(tmp_path_factory, slurm_cluster):
    """The session's Slurm cluster (tests/conftest.py: started once, under the machine's cluster lock;
    a cluster of its own here, started beside it, swept the other's nodes away as stale), with
    an sshd in node1's namespace as the login node."""
    why = _why_not()
    if why:
        if os.environ.get("CI"):
            raise AssertionError(f"CI must run the --remote Slurm test: {why}")
        pytest.skip(why)
    c = slurm_cluster
    d = tmp_path_factory.mktemp("login")
    server = Sshd(d / "sshd", c.on_node("node1", []), c.addr["node1"])
    try:
        server.start()
        prog = d / "bin" / "jobenv"  # the login node's jobenv, as a site's module would set it up
        prog.parent.mkdir()
        prog.write_text(f"#!/bin/sh\nexport SLURM_CONF={c.conf} JOBENV_HOME={d}/remote-jobenv PYTHONPATH={REPO} "
                        f"PATH={PYBIN}:/usr/bin:/bin OMP_NUM_THREADS=1\nexec {sys.executable} -m jobenv \"$@\"\n")
        prog.chmod(0o755)
        server.jobenv, server.work = str(prog), str(d / "work")
        yield c, server
    finally:
        server.stop()


def _jobenv(env, *args, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "jobenv", *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout, **kw)


def _remote_procs(cluster, word: str):
    """Processes in node1's namespace (the login node) whose command line holds `word`."""
    out = []
    for pid in subprocess.run(["ip", "netns", "pids", cluster.ns["node1"]], capture_output=True,
                              text=True).stdout.split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if word in cmd:
            out.append(cmd)
    return out


def test_laptop_session(site, tmp_path):
    cluster, login = site
    env = base_env(tmp_path / "home", login.env())
    env["PATH"] = f"{PYBIN}:{env['PATH']}"
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "big.bin").write_bytes(b"x" * 1000)
    (project / ".venv").mkdir()
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / ".gitignore").write_text("data/\n")
    (project / "train.sh").write_text('echo "hello from rank $RANK of $WORLD_SIZE on $(hostname) in $(pwd)"\n')
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    jobs = []
    try:
        p = _jobenv(env, "remote", "add", "hpc", "login", "--jobenv", login.jobenv, "--workdir", login.work)
        assert p.returncode == 0, p.stderr
        p = _jobenv(env, "submit", "--remote", "hpc", "--sync", str(project), "--profile", "slurm", "--nodes", "2",
                    "--time", "5", "--timeout", "120", "--", "sh", "train.sh")
        assert p.returncode == 0, p.stderr
        jobid = p.stdout.strip()
        assert jobid.isdigit(), p.stdout
        jobs.append(jobid)
        copy = re.search(r"copied \S+ to hpc:(\S+)\n", p.stderr).group(1)  # type: ignore[union-attr]
        assert copy.startswith(login.work + "/project-"), p.stderr
        assert sorted(os.listdir(copy)) == [".gitignore", "train.sh"], os.listdir(copy)
        follow = _jobenv(env, "logs", "-f", "--remote", "hpc", "-j", jobid, timeout=240)
        assert follow.returncode == 0, follow.stderr
        for rank, host in ((0, "node1"), (1, "node2")):
            assert f"hello from rank {rank} of 2 on {host} in {copy}" in follow.stdout, follow.stdout
        st = _jobenv(env, "status", "--remote", "hpc", "-j", jobid)
        assert st.returncode == 0 and re.search(r"state\s+ended", st.stdout), st.stdout + st.stderr
        runs = _jobenv(env, "runs", "--remote", "hpc")
        assert runs.returncode == 0 and "sh train.sh" in runs.stdout, runs.stdout + runs.stderr
        page = tmp_path / "report.html"
        rep = _jobenv(env, "report", "--remote", "hpc", "--html", str(page))
        assert rep.returncode == 0 and rep.stdout.startswith(f"wrote {page} (1 run)"), rep.stdout + rep.stderr
        assert "<html" in page.read_text() and "train.sh" in page.read_text()

        # a second job: ^C of its follower ends the follower there too; cancel ends the job
        p = _jobenv(env, "submit", "--remote", "hpc", "--profile", "slurm", "--time", "5", "--", "sleep", "300")
        assert p.returncode == 0, p.stderr
        second = p.stdout.strip()
        jobs.append(second)
        cluster.wait_state(second, {"RUNNING"})
        f = subprocess.Popen([sys.executable, "-m", "jobenv", "logs", "-f", "--remote", "hpc", "-j", second],
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
        deadline = time.time() + 60
        while not _remote_procs(cluster, "logs"):
            assert time.time() < deadline and f.poll() is None, "the remote follower did not start"
            time.sleep(0.2)
        os.killpg(f.pid, signal.SIGINT)  # what ^C on the laptop's terminal does
        f.communicate(timeout=30)
        assert f.returncode == 130, f.returncode
        deadline = time.time() + 15
        while _remote_procs(cluster, "logs"):
            assert time.time() < deadline, f"the remote follower outlived ^C: {_remote_procs(cluster, 'logs')}"
            time.sleep(0.2)
        c = _jobenv(env, "cancel", "--remote", "hpc", "-j", second)
        assert c.returncode == 0 and c.stdout == f"cancelled slurm job {second}\n", c.stdout + c.stderr
        cluster.wait_settled(second)
    finally:
        _jobenv(env, "remote", "logout", "hpc")
        for j in jobs:
            cluster.run(["scancel", j], check=False)
    assert login.sessions() == [], "a session was left open on the login node"
    assert not _remote_procs(cluster, "jobenv"), _remote_procs(cluster, "jobenv")
    left = subprocess.run(["pgrep", "-f", login.env()["XDG_RUNTIME_DIR"]], capture_output=True, text=True).stdout
    assert not left.strip(), f"an ssh master was left running: {left}"
