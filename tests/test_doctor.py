"""`jobenv doctor`: pure judges on recorded banners, then the real command on this machine.

On this machine (MPICH wheel mpiexec, mpi4py built against it, CPU torch) doctor exits 0
after a local save; each failure mode then gets its own fail line and exit 1: a store made
group-writable, a record whose hosts do not include this one, a launcher missing from PATH,
a launcher of another MPI than mpi4py's (Debian Open MPI mpirun), a busy MASTER_PORT.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

import machines
from conftest import base_env, jobenv, jobenv_program
from jobenv.doctor.checks import render_json, render_text
from jobenv.doctor.judges import Check, judge_launcher, judge_mpi4py

# each `jobenv doctor` imports torch and the frameworks it probes (~11 s of CPU): the full tier
pytestmark = pytest.mark.slow

VENV_BIN = os.path.dirname(sys.executable)


def test_render_counts_agree_with_their_nouns():
    assert render_text([Check("a", "warn", "hm")]).endswith("1 check: 0 failed, 1 warning\n")


def test_render():
    checks = [Check("a", "ok", "fine", "never shown"), Check("bb", "fail", "broken", "do this")]
    assert render_text(checks) == ("ok    a   fine\nfail  bb  broken -> fix: do this\n"
                                   "2 checks: 1 failed, 0 warnings\n")
    data = json.loads(render_json(checks))
    assert data["ok"] is False and data["checks"][1] == {"name": "bb", "status": "fail", "detail": "broken",
                                                         "fix": "do this"}


def doctor(env, *args):
    p = jobenv(["doctor", "--json", *args], env)
    assert p.returncode in (0, 1) and not p.stderr.strip(), p.stderr
    data = json.loads(p.stdout)
    assert data["ok"] == (p.returncode == 0)
    return p.returncode, {c["name"]: c for c in data["checks"]}


@pytest.fixture
def local_env(tmp_path, home):
    env = base_env(home, machines.local(tmp_path), path=f"{VENV_BIN}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], env, check=True)
    subprocess.run([str(jobenv_program(tmp_path)), "init", "bash", "--install"], env=env, check=True,
                   capture_output=True, timeout=60)  # the README's set-up: jobenv in every new shell
    return env


def test_doctor_warns_when_a_new_shell_would_not_find_jobenv(tmp_path, home):
    """No rc line: a brand-new bash (no venv) has no jobenv; doctor warns (a healthy job still
    passes: exit 0) and names the fix."""
    env = base_env(home, machines.local(tmp_path), path=f"{VENV_BIN}:/usr/bin:/bin") | {"SHELL": "/bin/bash"}
    (home / ".bashrc").write_text("alias jobenv=true  # an alias is no program\n")
    jobenv(["save", "--quiet"], env, check=True)
    rc, c = doctor(env)
    assert rc == 0 and c["shell"]["status"] == "warn", c["shell"]
    assert "init bash --install" in c["shell"]["fix"] and "~/.bashrc" in c["shell"]["fix"], c["shell"]
    exe = jobenv_program(tmp_path)
    subprocess.run([str(exe), "init", "bash", "--install"], env=env, check=True, capture_output=True, timeout=60)
    rc, c = doctor(env)
    assert c["shell"]["status"] == "ok" and str(exe) in c["shell"]["detail"], c["shell"]
    assert "a login bash too, from ~/.profile" in c["shell"]["detail"], c["shell"]
    profile = (home / ".profile").read_text()
    (home / ".profile").write_text("# the line of an install from before login shells were covered: gone\n")
    rc, c = doctor(env)  # issue 33: an interactive bash finds jobenv, a login bash (`bash -l -c`) does not
    assert rc == 0 and c["shell"]["status"] == "warn" and "a new login bash" in c["shell"]["detail"], c["shell"]
    assert "init bash --install" in c["shell"]["fix"] and "~/.profile" in c["shell"]["fix"], c["shell"]
    (home / ".profile").write_text(profile)
    exe.unlink()  # the line names a jobenv that is gone: that one is broken, a failure
    rc, c = doctor(env)
    assert rc == 1 and c["shell"]["status"] == "fail" and "the jobenv it names is gone" in c["shell"]["detail"], c["shell"]


def test_doctor_passes_after_a_local_save(local_env):
    p = jobenv(["doctor"], local_env)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    names = [ln.split()[1] for ln in lines[:-1]]
    for name in ("scheduler", "store", "record", "host", "launcher", "torch", "mpi4py", "gpus", "rendezvous",
                 "port", "shell"):
        assert name in names, p.stdout
    assert all(ln.split()[0] in ("ok", "warn") for ln in lines[:-1]) and "0 failed" in lines[-1], p.stdout
    assert "MPICH" in next(ln for ln in lines if " launcher " in ln)


def test_group_writable_store_fails(local_env, home):
    (home / ".jobenv" / "jobs").chmod(0o770)
    rc, c = doctor(local_env)
    assert rc == 1 and c["store"]["status"] == "fail" and "chmod go-w" in c["store"]["fix"]


def test_launcher_missing_from_path_fails(tmp_path, home):
    """The recorded launcher is gone (a module unloaded, a venv deleted) and PATH has none."""
    gone = tmp_path / "mpi"
    gone.mkdir()
    (gone / "mpiexec").symlink_to(os.path.join(VENV_BIN, "mpiexec"))
    env = base_env(home, machines.local(tmp_path), path=f"{gone}:{VENV_BIN}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], env, check=True)
    (gone / "mpiexec").unlink()
    rc, c = doctor({**env, "PATH": "/nonexistent"})
    assert rc == 1 and c["launcher"]["status"] == "fail" and "not on PATH" in c["launcher"]["detail"]


def test_recorded_launcher_is_found_without_path(local_env):
    """launch runs the launcher recorded at save by absolute path, so doctor checks that one."""
    rc, c = doctor({**local_env, "PATH": "/nonexistent"})
    assert c["launcher"]["status"] == "ok" and c["launcher"]["detail"].startswith(VENV_BIN), c["launcher"]


def test_staged_copy_is_reported(local_env):
    rc, c = doctor(local_env)
    assert c["staged"]["status"] == "ok" and "no staged environment" in c["staged"]["detail"]


def test_other_hosts_and_another_mpi_fail(tmp_path, home):
    # a Cobalt record: Open MPI mpirun (Debian), while mpi4py here is built against MPICH
    # saved with Debian's mpirun first on PATH: the record names /usr/bin/mpirun, which launch runs
    env = base_env(home, machines.thetagpu(tmp_path), path=f"/usr/bin:{VENV_BIN}:/bin")
    jobenv(["save", "--quiet"], env, check=True)
    shell = base_env(home, {"JOBENV_HOSTNAME": "login1"}, path=f"{VENV_BIN}:/usr/bin:/bin")  # the wheel's first now
    rc, c = doctor(shell)
    assert rc == 1
    assert c["host"]["status"] == "fail" and "login1 is not a host of job 10446" in c["host"]["detail"]
    assert c["launcher"]["status"] == "ok" and "Open MPI" in c["launcher"]["detail"]
    assert c["mpi4py"]["status"] == "fail" and "MPICH" in c["mpi4py"]["detail"], c["mpi4py"]
    # the fix names what was found: the record's Open MPI came first when it was saved, and
    # this venv's own MPICH mpiexec matches mpi4py (not "rebuild mpi4py")
    assert os.path.join(VENV_BIN, "mpiexec") in c["mpi4py"]["fix"] and "jobenv save" in c["mpi4py"]["fix"], c["mpi4py"]
    assert c["rendezvous"]["status"] == "fail"  # thetagpu13 does not resolve here
    assert c["gpus"]["status"] == "warn"  # record says 8, no GPU tool answers


def test_busy_master_port_fails(local_env):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        rc, c = doctor({**local_env, "MASTER_PORT": str(s.getsockname()[1])})
    finally:
        s.close()
    assert rc == 1 and c["port"]["status"] == "fail" and "in use" in c["port"]["detail"]


def test_deep_runs_a_two_rank_allreduce(local_env):
    rc, c = doctor({**local_env, "OMP_NUM_THREADS": "1"}, "--deep")
    assert rc == 0 and c["selftest"]["status"] == "ok", c.get("selftest")
    # the selftest's --bandwidth verdict: gloo on this host, and the local profile expects nothing of it
    assert c["fabric"]["status"] == "ok" and c["fabric"]["detail"].startswith("gloo uses tcp"), c.get("fabric")


def test_fabric_line_becomes_a_check():
    from jobenv.doctor.checks import fabric_check

    c = fabric_check("fabric FAIL: NCCL is using sockets (TCP fallback)", "  fix: module load x; export NCCL_NET=y")
    assert c == Check("fabric", "fail", "NCCL is using sockets (TCP fallback)", "module load x; export NCCL_NET=y")
    assert fabric_check("fabric UNKNOWN: no log", "jobenv selftest PASSED").status == "warn"


def test_doctor_never_imports_from_the_working_directory(local_env, other_user, shared_tmp):
    """Run from a shared directory where another user planted json.py and a jobenv/ package:
    neither the framework probes nor --deep's `jobenv launch` and selftest ranks import them."""
    from test_interpreter import plant, ran

    plant(other_user, shared_tmp)
    # `python -P -m jobenv` is how the `jobenv` console script starts: its own bin/ first, never the cwd
    p = subprocess.run([sys.executable, "-P", "-m", "jobenv", "doctor", "--json", "--deep"], cwd=shared_tmp,
                       env={**local_env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    c = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert ran(shared_tmp) == [], p.stdout
    assert c["torch"]["status"] == "ok" and c["selftest"]["status"] == "ok", (c["torch"], c.get("selftest"))


def test_control_bytes_in_banners_are_escaped(tmp_path, home):
    """Open MPI's library version string ends in a NUL; a launcher banner may hold ESC: the
    text output shows them as escapes (JSON escapes them itself)."""
    c = judge_launcher("/x/mpirun", "mpirun (Open MPI) 4.1.4\x00\x1b[2J\x9b")
    assert c.detail.startswith("/x/mpirun: Open MPI")
    text = render_text([c, judge_mpi4py("Open MPI", "Open MPI", "Open MPI v4.1.4\x00")])
    assert not any(ch in text for ch in "\x00\x1b\x9b"), repr(text)
    assert "\\x00\\x1b[2J\\x9b" in text
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpiexec").write_text("#!/bin/sh\nprintf 'HYDRA build details:\\n Version: 5\\000\\033]0;owned\\007\\n'\n")
    (bindir / "mpiexec").chmod(0o755)
    env = base_env(home, machines.local(tmp_path), path=f"{bindir}:{VENV_BIN}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], env, check=True)
    p = jobenv(["doctor"], env)
    line = next(ln for ln in p.stdout.splitlines() if " launcher " in ln)
    assert "\\x00\\x1b]0;owned\\x07" in line and "\x00" not in p.stdout and "\x1b" not in p.stdout, repr(line)


def test_relative_pythonpath_entry_warns(local_env):
    """`export PYTHONPATH=$PYTHONPATH:/x` with PYTHONPATH unset leaves an empty entry: the cwd."""
    rc, c = doctor({**local_env, "PYTHONPATH": local_env["PYTHONPATH"] + ":"})
    assert c["pythonpath"]["status"] == "warn" and "''" in c["pythonpath"]["detail"], c["pythonpath"]
    rc, c = doctor(local_env)
    assert c["pythonpath"]["status"] == "ok"


@pytest.mark.parametrize("text", ["1", "29500", "65535", "65536", "0", "\u00b2", "08080", " 80", "1_0", "123456"])
def test_port_rule_is_the_runtimes(text):
    """doctor refuses exactly the MASTER_PORT values detect() refuses, one line, no traceback."""
    from jobenv.doctor.checks import check_master_port
    from jobenv.runtime.discovery import master_port
    from jobenv.runtime.info import DetectError

    try:
        master_port({"MASTER_PORT": text}, 2, "1")
        accepted = True
    except DetectError:
        accepted = False
    c = check_master_port(text, "10.255.255.1", "node1")  # another host: nothing is bound
    assert (c.status == "ok") == accepted, (text, c)


@pytest.mark.parametrize("port,status", [("65535", "ok"), ("\u00b2", "fail")])
def test_doctor_reads_master_port_as_the_runtime_does(local_env, port, status):
    rc, c = doctor({**local_env, "MASTER_PORT": port})
    assert c["port"]["status"] == status, c["port"]
    assert status == "fail" or "65535 and 65534 are free" in c["port"]["detail"]


def test_doctor_does_not_import_the_cli():
    """The CLI imports doctor for its command; doctor reading the CLI back made a circle."""
    import ast

    import jobenv.doctor.checks

    tree = ast.parse(open(jobenv.doctor.checks.__file__, encoding="utf-8").read())
    names = {(n.level, n.module) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert (1, "cli") not in names and not any(m and m.startswith("jobenv.cli") for _, m in names)
