"""`jobenv init`: real bash, zsh, fish and dash from empty environments source its output.

The output must never print on its own and never fail the shell (jobenv missing, a
corrupt store, `set -eu`, zsh's nounset/err_exit), and its opt-in automatic mode must save
a new allocation and restore a saved job in other shells on its hosts.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

import machines
from conftest import REPO, base_env, jobenv, need
from jobenv.restore import init
from jobenv.cli.main import cli
from jobenv.cli.completion import func_name

FLAGS = {"bash": ["--norc", "--noprofile", "-i"], "zsh": ["-f", "-i"], "fish": ["--no-config", "-i"], "dash": ["-i"]}
STRICT = {"bash": "set -eu; ", "zsh": "setopt nounset err_exit; ", "fish": "", "dash": "set -eu; "}
DIALECT = {"bash": "bash", "zsh": "zsh", "fish": "fish", "dash": "sh"}


def wrapper(tmp_path: Path) -> Path:
    """A `jobenv` command for this checkout (the venv's may come from another clone)."""
    exe = tmp_path / "bin" / "jobenv"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m jobenv \"$@\"\n")
    exe.chmod(0o755)
    return exe


def init_file(tmp_path: Path, home: Path, shell: str, auto: bool = True) -> Path:
    p = jobenv(["init", DIALECT[shell]] + (["--auto"] if auto else []), base_env(home), check=True)
    f = tmp_path / f"init.{shell}"
    f.write_text(p.stdout)
    return f


def run(shell: str, script: str, env: Dict[str, str]) -> subprocess.CompletedProcess:
    exe = need(shell)
    return subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], exe, *FLAGS[shell], "-c", script],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def bare(home: Path, path: str, **extra: str) -> Dict[str, str]:
    return {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PATH": path, **extra}


def test_parse_mirrors_click():
    cmd = cli.commands["init"]
    opts = {o: p.name for p in cmd.params for o in p.opts if o.startswith("-")}
    assert opts == {**init.OPTIONS, "--install": "install"}  # --install writes a file: click's path
    assert init.parse(["bash", "--install"]) is None
    assert set(next(p for p in cmd.params if p.name == "shell").type.choices) == set(init.SHELLS)
    assert init.parse(["bash", "--auto"]) == {"shell": "bash", "auto": True}
    for bad in ([], ["tcsh"], ["bash", "zsh"], ["--help"], ["bash", "--auto=1"]):
        assert init.parse(bad) is None


def test_click_function_name_is_what_init_calls():
    for shell in ("bash", "zsh", "fish"):
        assert func_name(shell, cli) == init.CLICK_FUNC


def test_init_prints_the_shell_functions(home):
    p = jobenv(["init", "bash"], base_env(home), check=True)
    assert "getjobenv()" in p.stdout and "savejobenv()" in p.stdout


def test_init_emits_shell_jobenv_sh_verbatim(home):
    text = jobenv(["init", "bash"], base_env(home), check=True).stdout
    assert (REPO / "shell" / "jobenv.sh").read_text().rstrip("\n") in text


def test_usage_errors_go_to_click(home):
    p = jobenv(["init", "tcsh"], base_env(home))
    assert p.returncode == 2 and "tcsh" in p.stderr and not p.stdout


def _store(home: Path, kind: str, host: str) -> None:
    d = home / ".jobenv" / "jobs"
    d.mkdir(parents=True, mode=0o700)
    (home / ".jobenv").chmod(0o700)
    if kind == "corrupt":  # a truncated record that names this host, and no env file
        (d / "slurm-1.json").write_text('{"schema_version": 2, "jobid": "1", "hos')
        (d / "slurm-1.hosts").write_text(host + "\n")
        (d / "pbs-2.json").write_text("\x00\xff not json")
        (d / "pbs-2.env").write_text("this is not shell code (\n")
        (d / "pbs-2.hosts").write_text(host + ".example.org\n")
        for f in d.iterdir():
            f.chmod(0o600)


@pytest.mark.parametrize("case", ["no-store", "jobenv-missing", "store-corrupt", "store-unreadable"])
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "dash"])
def test_never_prints_never_breaks(tmp_path, home, shell, case):
    exe = wrapper(tmp_path)
    f = init_file(tmp_path, home, shell)
    env = bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_HOSTNAME="nid001234", JOBENV_EXE=str(exe))
    if case == "jobenv-missing":
        env.update(PATH="/usr/bin:/bin", JOBENV_EXE=str(tmp_path / "gone" / "jobenv"))
        _store(home, "corrupt", "nid001234")
    elif case == "store-corrupt":
        _store(home, "corrupt", "nid001234")
    elif case == "store-unreadable":
        env["JOBENV_HOME"] = str(f)  # a file, not a directory
    want = run(shell, f"{STRICT[shell]}echo OK", env)
    got = run(shell, f"{STRICT[shell]}. {f}; echo OK; type getjobenv >/dev/null && echo DEFINED", env)
    assert (got.returncode, got.stdout, got.stderr) == (0, want.stdout + "DEFINED\n", want.stderr)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_auto_restores_a_saved_job_on_its_host(tmp_path, home, shell):
    exe = wrapper(tmp_path)
    jobenv(["save", "--quiet"], base_env(home, machines.perlmutter(tmp_path)), check=True)
    f = init_file(tmp_path, home, shell)
    env = bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_HOSTNAME="nid001235", JOBENV_EXE=str(exe))
    p = run(shell, f"{STRICT[shell]}. {f}; echo $NHOSTS $JOBENV_JOBID; type launch >/dev/null && echo LAUNCH", env)
    assert p.returncode == 0 and p.stdout.endswith("2 12345678\nLAUNCH\n"), p.stdout + p.stderr
    # another host, JOBENV_AUTO=0, a non-interactive shell: left alone
    for extra, flags in (({"JOBENV_HOSTNAME": "login31"}, None), ({"JOBENV_AUTO": "0"}, None), ({}, "-c")):
        e = {**env, **extra}
        argv = [need(shell), *[x for x in FLAGS[shell] if x != "-i"], "-c"] if flags else None
        script = f". {f}; echo \"[$NHOSTS]\"" if shell == "fish" else f". {f}; echo \"[${{NHOSTS-}}]\""
        q = (subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in e.items()], *argv, script], capture_output=True,
                            text=True, timeout=120) if argv else run(shell, script, e))
        assert q.stdout.endswith("[]\n"), (extra, flags, q.stdout, q.stderr)


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_auto_saves_the_first_shell_of_an_allocation(tmp_path, home, shell):
    exe = wrapper(tmp_path)
    f = init_file(tmp_path, home, shell)
    env = {**bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_EXE=str(exe), PYTHONPATH=str(REPO)),
           **machines.perlmutter(tmp_path), "SLURM_CONF": "/nonexistent/slurm.conf"}
    record = home / ".jobenv" / "jobs" / "slurm-12345678.json"
    p = run(shell, f". {f}; echo $NHOSTS; type launch >/dev/null && echo LAUNCH", env)
    assert p.returncode == 0 and p.stdout.endswith("2\nLAUNCH\n") and record.exists(), p.stdout + p.stderr
    before = record.stat().st_mtime_ns
    p = run(shell, f". {f}; echo $NHOSTS", env)  # a second shell of the job: restored, not saved again
    assert p.stdout.endswith("2\n") and record.stat().st_mtime_ns == before, p.stdout + p.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_auto_finds_this_host_in_a_big_host_file(tmp_path, home, shell):
    """Host files of 4 KiB and more go to grep instead of the shell's own read."""
    exe = wrapper(tmp_path)
    jobenv(["save", "--quiet"], base_env(home, machines.polaris(tmp_path, nodes=200)), check=True)
    hosts = next((home / ".jobenv" / "jobs").glob("*.hosts")).read_text().split()
    assert len("\n".join(hosts)) > 4096
    f = init_file(tmp_path, home, shell)
    env = bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_HOSTNAME=hosts[-1].split(".")[0], JOBENV_EXE=str(exe))
    p = run(shell, f"{STRICT[shell]}. {f}; echo $NHOSTS", env)
    assert p.returncode == 0 and p.stdout.endswith("200\n"), p.stdout + p.stderr


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash", "fish"])
def test_auto_does_not_save_again_a_job_whose_key_is_hashed(tmp_path, home, shell):
    """A PBS array subjob's id (`123[3].srv`) is hashed into its record's key by
    store.key_for: every later shell of the job restores the user's own save, never
    re-saves over it (it asks `jobenv get`, which names the record by that one rule)."""
    exe = wrapper(tmp_path)
    f = init_file(tmp_path, home, shell)
    job = machines.pbs_array(tmp_path)
    jobenv(["save", "--quiet", "--ranks-per-host", "7"], base_env(home, job), check=True)
    rec = next((home / ".jobenv" / "jobs").glob("pbs-*.json"))
    assert "[" not in rec.name  # the key is not the id: the shell cannot rebuild it by pasting
    before = (rec.read_bytes(), rec.stat().st_mtime_ns)
    env = {**bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_EXE=str(exe), PYTHONPATH=str(REPO)), **job}
    show = "echo \"[$JOBENV_JOBID]\"" if shell == "fish" else "echo \"[${JOBENV_JOBID-}]\""
    p = run(shell, f". {f}; {show}", env)
    assert p.stdout.endswith(f"[{job['PBS_JOBID']}]\n"), p.stdout + p.stderr
    assert (rec.read_bytes(), rec.stat().st_mtime_ns) == before
    assert '"ranks_per_host": 7,' in rec.read_text()


HOSTILE_IDS = ["123[3].pbs01.cluster.edu", ".55.srv.", "12/3.srv", "4 5;6.srv", "9" * 40 + "." + "x" * 180, "123.srv"]


@pytest.mark.parametrize("jobid", HOSTILE_IDS)
def test_auto_saves_an_allocation_once_whatever_its_id(tmp_path, home, jobid):
    """The first interactive shell of a job saves it (under the user's strict options), and
    the record is the one store.key_for names; a later save of the user's own is kept."""
    from jobenv.store import files as store

    exe = wrapper(tmp_path)
    f = init_file(tmp_path, home, "bash")
    job = machines.pbs_common(jobid, machines._nodefile(tmp_path, "nodefile", ["cn010", "cn011"]))
    env = {**bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_EXE=str(exe), PYTHONPATH=str(REPO)), **job}
    strict = "set -euk; set -o pipefail; shopt -s failglob nullglob; set -f; "
    p = run("bash", f"{strict}. {f}; echo \"[$NHOSTS]\"", env)
    jobs = home / ".jobenv" / "jobs"
    assert p.stdout.endswith("[2]\n"), p.stdout + p.stderr
    assert [r.name for r in jobs.glob("*.json")] == [store.key_for("pbs", jobid) + ".json"]
    jobenv(["save", "--quiet", "--ranks-per-host", "7"], base_env(home, job), check=True)
    rec = next(jobs.glob("*.json"))
    before = (rec.read_bytes(), rec.stat().st_mtime_ns)
    p = run("bash", f"{strict}. {f}; echo \"[$NRANKS]\"", env)
    assert p.stdout.endswith("[14]\n") and (rec.read_bytes(), rec.stat().st_mtime_ns) == before, p.stdout + p.stderr


OLD_ALIASES = {  # what users wrote before `jobenv init` existed
    "bash": "alias getjobenv='source <(jobenv get)'; alias savejobenv='jobenv save'",
    "zsh": "alias getjobenv='source <(jobenv get)'; alias savejobenv='jobenv save'",
    "dash": "alias getjobenv='eval \"$(jobenv get)\"'; alias savejobenv='jobenv save'",
    "fish": "alias getjobenv 'jobenv get | source'; alias savejobenv 'jobenv save'",
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "dash", "fish"])
def test_init_after_an_old_getjobenv_alias(tmp_path, home, shell):
    """An alias of a name the init code defines is expanded inside its definition (bash: a
    syntax error, zsh: a parse error, and nothing after it defined); the init code clears
    such aliases first, so it still defines getjobenv and restores the job, silently."""
    exe = wrapper(tmp_path)
    jobenv(["save", "--quiet"], base_env(home, machines.perlmutter(tmp_path)), check=True)
    f = init_file(tmp_path, home, shell)
    env = bare(home, f"{exe.parent}:/usr/bin:/bin", JOBENV_HOSTNAME="nid001235", JOBENV_EXE=str(exe))
    p = run(shell, f"{OLD_ALIASES[shell]}\n. {f}\necho $NHOSTS $JOBENV_JOBID; type launch >/dev/null && echo LAUNCH\n"
            "getjobenv && echo AGAIN", env)
    quiet = run(shell, f"{OLD_ALIASES[shell]}\ntrue", env).stderr  # an interactive shell's own job-control notes
    assert (p.returncode, p.stdout, p.stderr) == (0, "2 12345678\nLAUNCH\nAGAIN\n", quiet), (p.stdout, p.stderr)


def test_init_clears_an_alias_of_every_name_it_defines(home):
    """Every function the bash, zsh and sh init code defines is unaliased before its definition."""
    import re

    for dialect in ("bash", "zsh", "sh"):
        text = jobenv(["init", dialect, "--auto"], base_env(home), check=True).stdout
        for m in re.finditer(r"^ *(\w+)\(\) \{", text, re.M):
            cleared = re.findall(r"^unalias ([\w ]+?) >/dev/null", text[:m.start()], re.M)
            assert m.group(1) in " ".join(cleared).split(), (dialect, m.group(1))
