"""A program the ranks cannot start is one line naming it and the host (exit 127, or 126),
said before the launch: never the per-rank wrapper's path and line, once per rank."""
from __future__ import annotations

import socket

import pytest

from conftest import mpich
from launchkit import RESTORE, fresh_env, local_job, save, shell, tools


@pytest.mark.parametrize("cmd,rc,words", [
    ("pyhton3 x.py", 127, "jobenv: error: pyhton3: command not found on "),
    ("/nonexistent/prog", 127, "jobenv: error: /nonexistent/prog: command not found on "),
    ("./data.txt", 126, "jobenv: error: ./data.txt: permission denied on "),
    ("/tmp", 126, "jobenv: error: /tmp: is a directory on "),
])
def test_missing_program_is_named(tmp_path, cmd, rc, words):
    mpich()
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    save(env, "--ranks-per-host", "2")
    (tmp_path / "data.txt").write_text("not a program\n")
    p = shell(env, f"{RESTORE} && launch {cmd}", cwd=tmp_path)
    assert p.returncode == rc, (p.returncode, p.stderr)
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(words), p.stderr
    assert "rankwrap" not in p.stderr and socket.gethostname() in p.stderr


# A program written for DeepSpeed's launcher: it insists on its --local_rank=N (DeepSpeed's
# engine asserts that it equals LOCAL_RANK), and takes it where that launcher puts it.
DS_STYLE = '''import argparse, os, sys
p = argparse.ArgumentParser()
p.add_argument("--local_rank", type=int, required=True)
p.add_argument("rest", nargs="*")
a = p.parse_args()
assert a.local_rank == int(os.environ["LOCAL_RANK"]), (a.local_rank, os.environ["LOCAL_RANK"])
# one write per line: under `python3 -u` print() writes each of its pieces apart, and two
# ranks' pieces interleaved on the launcher's shared output ("ARGVARGV 1 ...")
sys.stdout.write(f"ARGV {os.environ['RANK']} {sys.executable} {sys.argv[1:]}\\n")
sys.stdout.flush()
'''


@pytest.fixture
def job2(tmp_path):
    env = local_job(tmp_path, 2)
    (tmp_path / "train.py").write_text(DS_STYLE)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text(DS_STYLE)
    return env


def _argvs(out: str) -> list:
    return sorted(line.split(" ", 3)[1:] for line in out.splitlines() if line.startswith("ARGV "))


def test_a_script_and_a_module_run_with_the_jobs_python_as_torchrun_does(job2, tmp_path):
    """The issue: `launch --nproc-per-node 2 train.py` said `train.py: command not found`;
    torchrun runs a script (and -m, a module) with its Python.  Here the job's: the venv's
    interpreter the job was saved with.  Each rank gets its own --local_rank=N after the script."""
    import sys

    p = shell(job2, f"{RESTORE} && launch --nproc-per-node 2 --local-rank-arg train.py a b && "
                    "launch --local-rank-arg -m pkg.train c", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    exe = {line.split()[2] for line in p.stdout.splitlines() if line.startswith("ARGV ")}
    assert exe == {sys.executable}, p.stdout
    got = _argvs(p.stdout)
    assert got == sorted([["0", sys.executable, "['--local_rank=0', 'a', 'b']"],
                          ["1", sys.executable, "['--local_rank=1', 'a', 'b']"],
                          ["0", sys.executable, "['--local_rank=0', 'c']"],
                          ["1", sys.executable, "['--local_rank=1', 'c']"]]), p.stdout


def test_local_rank_arg_goes_after_the_script_of_a_python_command_and_only_when_asked(job2, tmp_path):
    p = shell(job2, f"{RESTORE} && launch --local-rank-arg python3 -u -W ignore train.py x && "
                    "launch --dry-run --local-rank-arg train.py; launch python3 train.py y", cwd=tmp_path)
    assert [a[2] for a in _argvs(p.stdout)] == ["['--local_rank=0', 'x']", "['--local_rank=1', 'x']"], p.stdout
    assert "each rank's program gets --local_rank=<its local rank> after 'train.py' (--local-rank-arg)" \
        in p.stderr, p.stderr
    assert "the following arguments are required: --local_rank" in p.stderr, p.stderr  # not asked: not given


def test_a_py_word_that_is_no_file_here_is_still_a_program(job2, tmp_path):
    """Only an existing file is a script: `launch tool.py` with no tool.py here is a program
    looked up on PATH (a tool installed as `tool.py`), and named as missing when it is not."""
    p = shell(job2, f"{RESTORE} && launch nothere.py", cwd=tmp_path)
    assert p.returncode == 127 and "nothere.py: command not found" in p.stderr, p.stderr


def test_script_end_is_where_deepspeeds_launcher_puts_local_rank():
    from jobenv.launch.plan.program import python_form, script_end

    assert script_end(["python3", "train.py", "--x"]) == 2
    assert script_end(["/venv/bin/python", "-u", "-X", "dev", "-W", "ignore", "t.py", "a"]) == 7
    assert script_end(["python3", "-m", "pkg.mod", "a"]) == 3 and script_end(["python3", "-c", "code"]) == 3
    assert script_end(["./run.sh", "a"]) == 1 and script_end(["python3", "-u"]) == 2
    assert python_form(["m", "a"], True, "python", "/") == ["python", "-m", "m", "a"]
    assert python_form(["nothere.py"], False, "python", "/") == ["nothere.py"]


def test_local_rank_arg_reaches_a_shell_scripts_arguments(job2, tmp_path):
    """Issue 33: `launch --local-rank-arg sh -c '...'` gave `sh: 0: Illegal option --` (the flag
    went after `sh`).  Now it is the script's $1, in "$@", with or without a $0 given; real
    dash (/bin/sh) and bash."""
    script = "'exec python3 train.py \"$@\"'"
    p = shell(job2, f"{RESTORE} && launch --local-rank-arg sh -c {script} && "
                    f"launch --local-rank-arg bash -e -c {script} myname z", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(a[2] for a in _argvs(p.stdout)) == ["['--local_rank=0', 'z']", "['--local_rank=0']",
                                                       "['--local_rank=1', 'z']", "['--local_rank=1']"], p.stdout


def test_shell_commands_get_their_name_and_local_rank_after_it():
    from jobenv.launch.plan.program import script_end, shell_named

    assert shell_named(["sh", "-c", "s"]) == ["sh", "-c", "s", "sh"]
    assert shell_named(["/bin/bash", "-lc", "s"]) == ["/bin/bash", "-lc", "s", "bash"]
    assert shell_named(["bash", "-c", "s", "n", "a"]) == ["bash", "-c", "s", "n", "a"]  # $0 given: kept
    assert shell_named(["bash", "-o", "pipefail", "-c", "s"])[-1] == "bash"
    assert shell_named(["sh", "run.sh"]) == ["sh", "run.sh"] and shell_named(["sh", "-c"]) == ["sh", "-c"]
    assert script_end(["sh", "-c", "s", "sh"]) == 4 and script_end(["bash", "-e", "-c", "s", "n", "a"]) == 5
    assert script_end(["sh", "-e", "run.sh", "a"]) == 3 and script_end(["./run.sh", "a"]) == 1  # after the script
