"""Round trips through real bash, zsh and fish processes started with an empty environment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import machines
from conftest import REPO, base_env, jobenv, need
from jobenv import shell
from jobenv.record import JobRecord

DUMP = f"{sys.executable} -c 'import os,json,sys; sys.stdout.buffer.write(json.dumps(dict(os.environ)).encode())'"


def fresh(shell_name: str, script: str, env_vars: dict, tmp: Path) -> subprocess.CompletedProcess:
    """`env -i` + SHELL -c SCRIPT: a shell with nothing inherited but what we pass."""
    exe = need(shell_name)
    flags = {"bash": ["--norc", "--noprofile"], "zsh": ["-f"], "fish": ["--no-config"]}[shell_name]
    cmd = ["env", "-i", *[f"{k}={v}" for k, v in env_vars.items()], exe, *flags, "-c", script]
    return subprocess.run(cmd, capture_output=True, cwd=tmp, timeout=120)


def get_cmd(shell_name: str) -> str:
    return f"{sys.executable} -m jobenv get" + (" --shell fish" if shell_name == "fish" else "")


def source_line(shell_name: str) -> str:
    return f"{get_cmd(shell_name)} | source" if shell_name == "fish" else f"source <({get_cmd(shell_name)})"


@pytest.mark.parametrize("shell_name", ["bash", "zsh", "fish"])
def test_restore_in_fresh_shell(tmp_path, home, shell_name):
    senv = base_env(home, machines.perlmutter(tmp_path))
    rec = json.loads(jobenv(["save", "--json"], senv, check=True).stdout)
    bare = {"HOME": str(home), "JOBENV_HOME": senv["JOBENV_HOME"], "PYTHONPATH": str(REPO),
            "JOBENV_HOSTNAME": "nid001235", "PATH": "/usr/bin:/bin"}
    p = fresh(shell_name, f"{source_line(shell_name)}; {DUMP}", bare, tmp_path)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    for k, v in rec["env"].items():
        assert got[k] == v
    assert got["NHOSTS"] == "2" and got["NGPU_PER_HOST"] == "4" and got["NGPUS"] == "8"
    assert got["HOSTFILE"] == rec["hostfile"] and got["JOBENV_JOBID"] == "12345678"
    assert got["DIST_LAUNCH"] == shell.join(rec["launch"])
    assert Path(got["JOBENV_RECORD"]).name == "slurm-12345678.json"
    assert "SLURM_PROCID" not in got and "_jobenv_keep" not in got
    t = fresh(shell_name, f"{source_line(shell_name)}; type launch", bare, tmp_path)
    assert b"function" in t.stdout, t.stdout
    if shell_name != "fish":  # the env file is sourceable on its own too
        envfile = Path(rec["hostfile"]).with_suffix(".env")
        q = fresh(shell_name, f". {envfile}; {DUMP}", bare, tmp_path)
        assert json.loads(q.stdout)["NGPUS"] == "8"


@pytest.mark.parametrize("shell_name", ["bash", "zsh", "fish"])
def test_launch_passes_arguments_unchanged(tmp_path, home, shell_name):
    """The only launcher stub: it prints its argv so quoting can be checked exactly."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    stub = bindir / "mpiexec"
    stub.write_text(f"#!{sys.executable}\nimport sys, json\nprint(json.dumps(sys.argv[1:]))\n")
    stub.chmod(0o755)
    senv = base_env(home, machines.local(tmp_path), path=f"{bindir}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], senv, check=True)
    args = ["a b", "it's", '"q"', "$(touch pwned)", "*", "[x]", "back\\slash", "", "new\nline", "$HOME"]
    if shell_name == "fish":
        quoted = " ".join(shell.fish_quote(a) for a in args)
    else:
        quoted = " ".join(shell.quote(a) for a in args)
    bare = {"HOME": str(home), "JOBENV_HOME": senv["JOBENV_HOME"], "PYTHONPATH": str(REPO),
            "JOBENV_HOSTNAME": "workstation7", "PATH": f"{bindir}:/usr/bin:/bin"}
    p = fresh(shell_name, f"{source_line(shell_name)}; launch {quoted}", bare, tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == ["-n", str(max(1, min(os.cpu_count() or 1, 4))), *args]
    assert not (tmp_path / "pwned").exists()


def test_launch_works_in_a_bash_script(tmp_path, home):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpiexec").write_text("#!/bin/sh\necho \"ran: $*\"\n")
    (bindir / "mpiexec").chmod(0o755)
    senv = base_env(home, machines.local(tmp_path), path=f"{bindir}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], senv, check=True)
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\nset -e\nsource <({get_cmd('bash')})\nlaunch hostname\n")
    p = subprocess.run(["bash", str(script)], env=senv, capture_output=True, text=True)
    assert p.returncode == 0 and "ran: -n" in p.stdout and "hostname" in p.stdout


def _record(values: dict, hosts=("n1",)) -> JobRecord:
    return JobRecord(scheduler="slurm", jobid=values.get("SLURM_JOB_ID", "1"), machine="slurm",
                     hosts=list(hosts), gpus_per_host=0, ranks_per_host=1, hostfile="/tmp/h f",
                     launch=["srun", "-n", "1"], env=values, created_at="t", created_on="h")


# any bytes allowed in an environment value: everything but NUL, as text via surrogateescape
env_bytes = st.binary(max_size=40).map(lambda b: b.replace(b"\0", b"")).map(
    lambda b: b.decode("utf-8", "surrogateescape"))


@pytest.mark.parametrize("shell_name", ["bash", "zsh"])
@settings(max_examples=int(os.environ.get("JOBENV_FUZZ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(env_bytes, min_size=1, max_size=4))
def test_quoting_round_trips_bytes(tmp_path, shell_name, values):
    exe = need(shell_name)
    canary = tmp_path / "canary"
    vals = [v.replace("CANARY", str(canary)) for v in values]
    env = {f"SLURM_V{i}": v for i, v in enumerate(vals)}
    text = shell.render_sh(_record(env), "/x/rec.json")
    out = tmp_path / "dump"
    script = text + f"\nfor v in {' '.join(env)}; do eval 'printf %s\\\\0 \"${{'$v'}}\"'; done > {out}\n"
    flags = ["--norc", "--noprofile"] if shell_name == "bash" else ["-f"]
    p = subprocess.run(["env", "-i", exe, *flags, "-c", script.encode("utf-8", "surrogateescape")],
                       capture_output=True, timeout=30, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = out.read_bytes().split(b"\0")[:-1]
    assert got == [v.encode("utf-8", "surrogateescape") for v in vals]
    assert not canary.exists()


@pytest.mark.parametrize("value", ["a'b", "$(touch /tmp/x)", "`id`", "a\\b", "new\nline", "", "x y", "ü", "!!", "${HOME}"])
def test_quote_is_inert(value):
    for q in (shell.quote(value),):
        p = subprocess.run(["bash", "--norc", "-c", f"printf %s {q}"], capture_output=True)
        assert p.stdout.decode() == value
