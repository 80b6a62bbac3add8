"""CLI surface: the fast `get` path mirrors click, completions are current, shell/jobenv.sh works."""
from __future__ import annotations

import subprocess
import sys

import pytest

import machines
from conftest import REPO, base_env, jobenv, need
from jobenv import fastget
from jobenv.cli import cli, completion_source


def test_fast_get_options_mirror_click():
    params = {p.name: p for p in cli.commands["get"].params}
    opts = {o: p.name for p in params.values() for o in p.opts}
    assert set(opts) == set(fastget.OPTIONS)
    for opt, dest in fastget.OPTIONS.items():
        param = params[opts[opt]]
        assert (dest is None) == param.is_flag, opt
        if dest is not None:
            assert dest == param.name
    assert set(params["shell_name"].type.choices) == set(fastget.SHELLS)


@pytest.mark.parametrize("args,expect", [
    ([], {"job": None, "shell_name": None, "allow_stale": False}),
    (["--job", "7", "--shell=zsh", "--allow-stale"], {"job": "7", "shell_name": "zsh", "allow_stale": True}),
    (["-j", "7"], {"job": "7", "shell_name": None, "allow_stale": False}),
    (["--help"], None), (["--job"], None), (["--shell", "tcsh"], None), (["--allow-stale=1"], None), (["x"], None),
])
def test_fast_get_parse(args, expect):
    assert fastget.parse(args) == expect


def test_get_help_still_comes_from_click(home):
    p = jobenv(["get", "--help"], base_env(home))
    assert p.returncode == 0 and "--allow-stale" in p.stdout and "--shell" in p.stdout


def test_fast_get_does_not_import_click(tmp_path, home):
    env = base_env(home, machines.local(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    code = ("import sys; sys.argv=['jobenv','get']; from jobenv.__main__ import main; rc=main();"
            "bad=[m for m in ('click','rich','yaml','filelock') if m in sys.modules];"
            "sys.stderr.write('LOADED:'+','.join(bad))")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode == 0 and p.stderr.strip().endswith("LOADED:"), p.stderr


@pytest.mark.parametrize("shell_name", ["bash", "zsh", "fish"])
def test_committed_completions_are_current(shell_name):
    committed = (REPO / "completions" / f"jobenv.{shell_name}").read_text()
    assert committed == completion_source(shell_name), (
        f"completions/jobenv.{shell_name} is stale: run `jobenv completion {shell_name} > completions/jobenv.{shell_name}`")


def test_bash_completion_completes_commands(tmp_path):
    need("bash")
    script = (f"source {REPO}/completions/jobenv.bash; COMP_WORDS=(jobenv sa); COMP_CWORD=1; "
              "_jobenv_completion jobenv; printf '%s\\n' \"${COMPREPLY[@]}\"")
    wrapper = tmp_path / "jobenv"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m jobenv \"$@\"\n")
    wrapper.chmod(0o755)
    p = subprocess.run(["bash", "--norc", "-c", script], capture_output=True, text=True,
                       env={"PATH": f"{tmp_path}:/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert "save" in p.stdout.split(), p.stdout + p.stderr


@pytest.mark.parametrize("shell_name", ["bash", "zsh"])
def test_shell_functions(tmp_path, home, shell_name):
    exe = need(shell_name)
    wrapper = tmp_path / "bin" / "jobenv"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m jobenv \"$@\"\n")
    wrapper.chmod(0o755)
    env = base_env(home, machines.perlmutter(tmp_path), path=f"{wrapper.parent}:/usr/bin:/bin")
    flags = ["--norc", "--noprofile"] if shell_name == "bash" else ["-f"]
    subprocess.run([exe, *flags, "-c", f"source {REPO}/shell/jobenv.sh; savejobenv --quiet"], env=env, check=True)
    bare = {"HOME": str(home), "JOBENV_HOME": env["JOBENV_HOME"], "PYTHONPATH": str(REPO),
            "PATH": f"{wrapper.parent}:/usr/bin:/bin"}
    for args in ("", "--job 12345678"):  # fast path (env file), then the `jobenv get` path
        script = f"source {REPO}/shell/jobenv.sh; getjobenv {args} && echo $NHOSTS $SLURM_JOB_ID && type launch"
        p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in bare.items()], exe, *flags, "-c", script],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("2 12345678\n") and "function" in p.stdout
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in bare.items()], exe, *flags, "-c",
                        f"source {REPO}/shell/jobenv.sh; getjobenv --job nope"], capture_output=True, text=True)
    assert p.returncode == 3 and "no record for job 'nope'" in p.stderr
