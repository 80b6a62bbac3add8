"""The remotes file (jobenv.remote.remotes): what `remote add` accepts, and a file that another
user could change, or that was edited into something jobenv would not write, refused."""
from __future__ import annotations

import json
import os

import pytest

from conftest import base_env, jobenv


@pytest.fixture
def env(tmp_path):
    return base_env(tmp_path / "home")


def conf(env) -> str:
    return os.path.join(env["XDG_CONFIG_HOME"], "jobenv", "remotes.json")


@pytest.mark.parametrize("args,says", [
    (["bad name", "h"], "remote name 'bad name'"),
    (["-x", "h"], "No such option"),
    (["a", "--", "-oProxyCommand=x"], "not starting with '-'"),
    (["a", "user@host with space"], "without spaces"),
    (["a", "h", "--jobenv", "/opt/my venv/jobenv"], "--jobenv '/opt/my venv/jobenv'"),
    (["a", "h", "--jobenv", "$(id)"], "--jobenv '$(id)'"),
    (["a", "h", "--workdir", "~x/y"], "--workdir '~x/y'"),
])
def test_add_refuses(env, args, says):
    p = jobenv(["remote", "add", *args], env)
    assert p.returncode in (2, 5) and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr
    assert not os.path.exists(conf(env))


def test_add_list_rm_round_trip(env):
    assert jobenv(["remote", "add", "a", "me@login.site", "--jobenv", "~/venv/bin/jobenv"], env).returncode == 0
    assert jobenv(["remote", "add", "b", "alias"], env).returncode == 0
    data = json.loads(open(conf(env)).read())
    assert data == {"remotes": {"a": {"dest": "me@login.site", "jobenv": "~/venv/bin/jobenv",
                                      "workdir": "~/jobenv-sync"},
                                "b": {"dest": "alias", "jobenv": "jobenv", "workdir": "~/jobenv-sync"}}}
    assert oct(os.stat(conf(env)).st_mode & 0o777) == "0o600"
    lines = jobenv(["remote", "list"], env).stdout.splitlines()
    assert [ln.split()[:2] for ln in lines[-2:]] == [["a", "me@login.site"], ["b", "alias"]], lines
    p = jobenv(["remote", "rm", "c"], env)
    assert p.returncode == 3 and "no remote named 'c'" in p.stderr


def test_a_file_others_could_change_is_refused(env):
    assert jobenv(["remote", "add", "a", "h"], env).returncode == 0
    os.chmod(conf(env), 0o666)
    p = jobenv(["remote", "list"], env)
    assert p.returncode == 6 and "writable by others" in p.stderr, p.stderr


def test_a_hand_edited_option_is_refused(env):
    assert jobenv(["remote", "add", "a", "h"], env).returncode == 0
    with open(conf(env), "w") as f:
        json.dump({"remotes": {"a": {"dest": "-oProxyCommand=touch /tmp/x", "jobenv": "jobenv",
                                     "workdir": "w"}}}, f)
    p = jobenv(["status", "--remote", "a"], env)
    assert p.returncode == 6 and "is not one jobenv wrote" in p.stderr, p.stderr


def test_no_ssh_program_is_one_line(env):
    assert jobenv(["remote", "add", "a", "h"], env).returncode == 0
    p = jobenv(["status", "--remote", "a"], {**env, "JOBENV_SSH": "/nonexistent/ssh"})
    assert p.returncode == 7 and p.stderr == ("jobenv: error: no ssh program '/nonexistent/ssh': install OpenSSH's "
                                              "client, or set JOBENV_SSH\n"), p.stderr
