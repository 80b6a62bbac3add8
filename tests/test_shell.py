"""Round trips through real bash, zsh and fish processes started with an empty environment."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

import machines
from conftest import REPO, base_env, jobenv, need
from test_interpreter import PYTHONS
from jobenv.restore import plan
from jobenv.restore import shell
from jobenv.store.record import JobRecord

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
        envfile = Path(rec["hostfile"]).parent / rec["env_file"]  # the env file this save wrote
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
    # a program that exists first (launch looks for it before the launch), then every hard word
    args = ["echo", "a b", "it's", '"q"', "$(touch pwned)", "*", "[x]", "back\\slash", "", "new\nline", "$HOME"]
    if shell_name == "fish":
        quoted = " ".join(shell.fish_quote(a) for a in args)
    else:
        quoted = " ".join(shell.quote(a) for a in args)
    bare = {"HOME": str(home), "JOBENV_HOME": senv["JOBENV_HOME"], "PYTHONPATH": str(REPO),
            "JOBENV_HOSTNAME": "workstation7", "PATH": f"{bindir}:/usr/bin:/bin"}
    p = fresh(shell_name, f"{source_line(shell_name)}; launch {quoted}", bare, tmp_path)
    assert p.returncode == 0, p.stderr
    from jobenv.rankwrap import wrapper_argv  # jobenv launch puts the per-rank wrapper before the command

    assert json.loads(p.stdout) == ["-n", str(max(1, min(os.cpu_count() or 1, 4))), *wrapper_argv(), *args]
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


# ---- each renderer in its real shell: what the shell ends with == plan.apply -------------

HOSTILE = ["=ls", "=nosuchcmd", "a:=b", "~", "~root", "x:~/y", "a=~", "'", "''", "a'b", '"', "\\", "\\n",
           "$(touch CANARY)", "`touch CANARY`", "${HOME}", "!!", "*", "[a]", "{a,b}", "new\nline", "\n",
           "trail\n", "tab\there", "\r", "ü", "\udcff\udcfe", "#", " lead", "%s", "-n", "--", "", "a b", ";"]
ZSH_HOSTILE = ("setopt CSH_JUNKIE_QUOTES RC_QUOTES MAGIC_EQUAL_SUBST EQUALS KSH_ARRAYS SH_WORD_SPLIT "
               "NO_UNSET ERR_EXIT GLOB_SUBST EXTENDED_GLOB POSIX_IDENTIFIERS RC_EXPAND_PARAM")
BASH_HOSTILE = "set -euk -o noglob -o pipefail; shopt -s failglob nullglob extglob dotglob"
# (dialect, shell program, flags, prologue)
SHELLS = [
    ("bash", "bash", ["--norc", "--noprofile"], "set -eu"),
    ("bash", "bash", ["--norc", "--noprofile"], BASH_HOSTILE),
    ("zsh", "zsh", ["-f"], ""),
    ("zsh", "zsh", ["-f"], ZSH_HOSTILE),
    ("sh", "dash", [], "set -eu"),
    ("sh", "bash", ["--posix", "--norc", "--noprofile"], ""),
    ("sh", "zsh", ["-f"], ZSH_HOSTILE),
    ("bash", "zsh", ["-f"], "setopt CSH_JUNKIE_QUOTES EQUALS MAGIC_EQUAL_SUBST"),
    ("fish", "fish", ["--no-config"], ""),
]
SHELL_IDS = ["bash", "bash-hostile", "zsh", "zsh-hostile", "dash", "bash-posix", "sh-in-zsh-hostile", "bash-dialect-in-zsh", "fish"]
DUMPB = (f"{sys.executable} -c 'import os,sys; sys.stdout.buffer.write(repr(sorted(os.environb.items())).encode())'")


def _rec(env: dict, launch_env: Optional[dict] = None) -> JobRecord:
    return JobRecord(scheduler="slurm", jobid=env.get("SLURM_JOB_ID", "1"), machine="slurm", hosts=["n1"],
                     gpus_per_host=0, ranks_per_host=1, hostfile="/tmp/h f", launch=["srun", "-n", "1"],
                     env=env, created_at="t", created_on="n1", launch_env=launch_env or {})


def run_plan(tmp: Path, dialect: str, program: str, flags: list, prologue: str, p: plan.Plan,
             environ: dict, after: str = "") -> subprocess.CompletedProcess:
    """Source the rendered plan in `env -i PROGRAM` started with `environ`, then dump os.environb."""
    exe = need(program)
    snippet = tmp / "snippet"
    snippet.write_bytes(shell.render(dialect, p).encode("utf-8", "surrogateescape"))
    src = f"source {snippet}" if dialect == "fish" else f". {snippet}"
    script = "; ".join(x for x in (prologue, src, after, DUMPB) if x)
    if program == "fish":
        script = script.replace("; ", "\n")
    argv = ["env", "-i", *[f"{k}={v}" for k, v in environ.items()], exe, *flags, "-c", script]
    return subprocess.run([a.encode("utf-8", "surrogateescape") for a in argv], capture_output=True,
                          cwd=tmp, timeout=60)


def shell_env(out: bytes) -> dict:
    got = dict(eval(out.decode()))
    for noise in (b"PWD", b"OLDPWD", b"SHLVL", b"_", b"LINES", b"COLUMNS", b"LC_CTYPE", b"LOGNAME", b"USER"):
        got.pop(noise, None)
    return {k.decode("utf-8", "surrogateescape"): v.decode("utf-8", "surrogateescape") for k, v in got.items()}


@pytest.mark.parametrize("dialect,program,flags,prologue", SHELLS, ids=SHELL_IDS)
def test_renderer_carries_out_the_plan(tmp_path, dialect, program, flags, prologue):
    """Every byte of every value comes back, whatever the shell and its options;
    variables of another job go, site configuration stays, the result is plan.apply."""
    canary = tmp_path / "CANARY"
    values = {f"SLURM_V{i}": v.replace("CANARY", str(canary)) for i, v in enumerate(HOSTILE)}
    rec = _rec({"SLURM_JOB_ID": "100", **values}, {"MPICH_GPU_SUPPORT_ENABLED": "=1"})
    environ = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SLURM_JOB_ID": "99", "SLURM_STEP_ID": "4",
               "SLURM_CONF": "/site/slurm.conf", "PBS_JOBID": "7.x"}
    p = plan.build(rec, "/x/rec =ls.json", environ, jobenv_argv=["=echo", "~"],
                   extra=[({"VIRTUAL_ENV": "=venv"}, ["/opt/=v/bin", "/p q"], [])])
    r = run_plan(tmp_path, dialect, program, flags, prologue, p, environ)
    assert r.returncode == 0, r.stderr
    assert shell_env(r.stdout) == plan.apply(p, environ)
    assert not canary.exists()


# PATHs that hold the plan's directories already (an activated venv), empty entries, and names
# a pattern would misread; (the shell's PATH, the PATH after the plan)
PATHS = [
    ("/v/b:/usr/bin:/bin", "/s/bin:/v/b:/usr/bin:/bin"),
    ("/usr/bin:/v/b:/s/bin:/v/b", "/s/bin:/v/b:/usr/bin"),
    ("/v/b*:/v/[b]:/v/b/:/p q", "/s/bin:/v/b:/v/b*:/v/[b]:/v/b/:/p q"),
    (":/usr/bin::/v/b:", "/s/bin:/v/b::/usr/bin::"),
    ("/v/b", "/s/bin:/v/b"),
    ("", "/s/bin:/v/b"),
]


@pytest.mark.parametrize("dialect,program,flags,prologue", SHELLS, ids=SHELL_IDS)
def test_path_holds_each_directory_of_the_plan_once(tmp_path, dialect, program, flags, prologue):
    """The ranks' PATH was store/bin:venv/bin:venv/bin:... when the shell had the venv already:
    each renderer, like plan.apply, drops PATH's own copies of the directories it puts first."""
    for before, after in PATHS:
        if program == "fish" and "" in before.split(":"):  # fish's PATH list keeps no empty entry
            continue
        if program == "zsh" and not before:  # zsh starts with its own PATH when it is empty
            continue
        environ = {"PATH": before, "HOME": str(tmp_path)}
        p = plan.build(_rec({"SLURM_JOB_ID": "100"}), "/x/r.json", environ, jobenv_argv=["jobenv"],
                       extra=[({}, ["/v/b"], []), ({}, ["/s/bin"], [])])
        assert plan.apply(p, environ)["PATH"] == after
        # the dump runs by absolute path: the PATH under test need not find env or python
        r = run_plan(tmp_path, dialect, program, flags, prologue, p, environ)
        assert r.returncode == 0, r.stderr
        assert shell_env(r.stdout)["PATH"] == after, (before, r.stdout[-300:])


@pytest.mark.parametrize("dialect,program,flags,prologue", SHELLS, ids=SHELL_IDS)
def test_launch_function_passes_arguments_unchanged(tmp_path, dialect, program, flags, prologue):
    stub = tmp_path / "stub"
    stub.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.buffer.write(repr([a.encode('utf-8', "
                    "'surrogateescape') for a in sys.argv[1:]]).encode())\n")
    stub.chmod(0o755)
    p = plan.build(_rec({"SLURM_JOB_ID": "5"}), "/x/r.json", {}, jobenv_argv=[str(stub), "=x"])
    args = ["a b", "=ls", "it's", "$(touch pwned)", "*", "", "new\nline", "~"]
    quoted = " ".join((shell.fish_quote if dialect == "fish" else shell.quote_bash if dialect != "sh"
                       else shell.quote)(a) for a in args)
    exe = need(program)
    snippet = tmp_path / "snippet"
    snippet.write_text(shell.render(dialect, p))
    src = f"source {snippet}" if dialect == "fish" else f". {snippet}"
    sep = "\n" if program == "fish" else "; "
    script = sep.join(x for x in (prologue if "CSH" not in prologue else "", src, f"launch {quoted}") if x)
    r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", exe, *flags, "-c", script], capture_output=True,
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert eval(r.stdout.decode()) == [a.encode() for a in ["=x", "launch", "--job", "5", "--", *args]]
    assert not (tmp_path / "pwned").exists()


def test_sh_dialect_has_no_bashisms(tmp_path):
    """`--shell sh` output runs in dash and busybox-style shells."""
    p = plan.build(_rec({"SLURM_JOB_ID": "5", "SLURM_X": "a\nb"}), "/x/r.json", {}, jobenv_argv=["true"])
    text = shell.render("sh", p)
    assert "function" not in text and "local " not in text and "$'" not in text and "launch() {" in text
    assert "$'" not in shell.env_file(_rec({"SLURM_JOB_ID": "5", "SLURM_X": "a\nb"}), "/r", ["jobenv"])


@pytest.mark.parametrize("value", ["a'b", "$(touch /tmp/x)", "`id`", "a\\b", "new\nline", "", "x y", "ü", "!!", "${HOME}"])
def test_quote_is_inert(value):
    for q in (shell.quote(value), shell.quote_bash(value)):
        p = subprocess.run(["bash", "--norc", "-c", f"printf %s {q}"], capture_output=True)
        assert p.stdout.decode() == value


def test_zsh_values_come_back_through_the_cli(tmp_path, home):
    """`PBS_O_WORKDIR='=ls'` came back as /usr/bin/ls, and `=nosuchcmd` left `launch` undefined."""
    exe = need("zsh")
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("x1\n")
    senv = base_env(home, {"PBS_JOBID": "7.s", "PBS_NODEFILE": str(nodefile), "PBS_O_WORKDIR": "=ls",
                           "PBS_O_X": "=nosuchcmd", "PBS_O_Y": "a:=~", "PBS_O_Z": "x\ny"})
    jobenv(["save", "--quiet"], senv, check=True)
    bare = {"HOME": str(home), "JOBENV_HOME": senv["JOBENV_HOME"], "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
            "JOBENV_HOSTNAME": "x1"}
    script = (f"setopt CSH_JUNKIE_QUOTES MAGIC_EQUAL_SUBST; source <({sys.executable} -m jobenv get --shell zsh); "
              'printf "%s|" "$PBS_O_WORKDIR" "$PBS_O_X" "$PBS_O_Y" "$PBS_O_Z"; whence -w launch')
    r = fresh("zsh", script, bare, tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == "=ls|=nosuchcmd|a:=~|x\ny|launch: function\n"
    assert exe


@pytest.mark.parametrize("python", PYTHONS)
def test_launch_function_never_runs_the_working_directory(tmp_path, home, other_user, shared_tmp, python):
    """The restored `launch`, called in a shared directory where another user planted a jobenv/
    package, runs this jobenv, also on Pythons without `-P` (3.9, 3.10)."""
    from test_interpreter import plant, ran

    bindir, lib = tmp_path / "bin", tmp_path / "lib"
    bindir.mkdir()
    lib.mkdir()
    (bindir / "mpiexec").write_text("#!/bin/sh\necho \"ran: $*\"\n")
    (bindir / "mpiexec").chmod(0o755)
    import click
    (lib / "click").symlink_to(os.path.dirname(click.__file__))  # pure Python: any 3.9+ imports it
    senv = base_env(home, {**machines.local(tmp_path), "PYTHONPATH": f"{REPO}:{lib}"}, path=f"{bindir}:/usr/bin:/bin")
    jobenv(["save", "--quiet"], senv, check=True)
    plant(other_user, shared_tmp)
    script = f"set -e\nsource <({python} -m jobenv get)\ncd {shared_tmp}\nlaunch hostname\n"
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], cwd=tmp_path, env=senv, capture_output=True,
                       text=True)
    assert ran(shared_tmp) == [], p.stdout + p.stderr
    # this jobenv ran: to the end, or (click needs 3.10+) up to importing click from REPO's cli/main.py
    assert (p.returncode == 0 and "ran: -n" in p.stdout) or f"{REPO}/jobenv/cli/main.py" in p.stderr, p.stderr
