"""Machine profiles: which one a job gets, and how a bad profile is reported."""
from __future__ import annotations

import os

import pytest

import machines
from conftest import base_env, jobenv
from jobenv import profiles
from jobenv.errors import BadInput

POLARIS_HOSTS = ["x3006c0s13b0n0.hsn.cm.polaris.alcf.anl.gov", "x3006c0s19b0n0.hsn.cm.polaris.alcf.anl.gov"]


@pytest.fixture(scope="module")
def shipped():
    return profiles.load_all({"HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"})


@pytest.mark.parametrize("scheduler,jobid,hosts,env,expect", [
    ("pbs", "2024084.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov", POLARIS_HOSTS, {}, "polaris"),
    ("pbs", "8190.amn-0001", ["x4102c5s2b0n0.hostmgmt2000.cm.aurora.alcf.anl.gov"], {}, "aurora"),
    ("slurm", "12345678", ["nid001234"], {"SLURM_CLUSTER_NAME": "perlmutter"}, "perlmutter"),
    ("slurm", "2048", ["frontier00001"], {"SLURM_CLUSTER_NAME": "frontier"}, "frontier"),
    ("cobalt", "10446", ["thetagpu13"], {}, "thetagpu"),
    ("pbs", "77.pbsserver", ["cn001"], {}, "pbs"),                # an unknown PBS site: generic
    ("slurm", "99", ["node1"], {"SLURM_CLUSTER_NAME": "mylab"}, "slurm"),
    ("local", "vm", ["vm"], {}, "local"),
])
def test_choose(shipped, scheduler, jobid, hosts, env, expect):
    assert profiles.for_job(shipped, scheduler, jobid, hosts, env).name == expect


def test_choose_by_name_and_unknown(shipped):
    assert profiles.for_job(shipped, "slurm", "1", ["n1"], {}, "polaris").name == "polaris"
    with pytest.raises(BadInput, match="unknown profile 'nope'"):
        profiles.for_job(shipped, "slurm", "1", ["n1"], {}, "nope")


def test_user_profile_overrides_and_matches_first(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "name: mycluster\nscheduler: pbs\nmatch: {hosts: '^cn\\d+'}\ngpus_per_host: 2\n"
        "launchers:\n  - argv: [mpiexec, -n, '{nranks}']\n")
    profs = profiles.load_all({"HOME": "/nonexistent", "JOBENV_PROFILES": str(tmp_path)})
    assert profiles.for_job(profs, "pbs", "5.srv", ["cn001"], {}).name == "mycluster"
    assert profiles.for_job(profs, "pbs", "5.srv", ["gpu01"], {}).name == "pbs"


def test_no_profile_for_scheduler():
    with pytest.raises(BadInput, match="no profile for scheduler"):
        profiles.for_job({}, "slurm", "1", ["n1"], {})


GOOD = "name: mine\nscheduler: local\nlaunchers:\n  - argv: [mpiexec, -n, '{nranks}']\n"
# (profile text, what the one error line says)
BAD = [
    ("name: mine\nscheduler: local\nmatch: {env: [1]}\nlaunchers: [{argv: [a]}]\n", "match: env must map"),
    ("name: mine\nscheduler: local\nmatch: {env: {1: x}}\nlaunchers: [{argv: [a]}]\n", "match: env must map"),
    ("name: mine\nscheduler: local\nmatch: {jobid: 5}\nlaunchers: [{argv: [a]}]\n", "patterns must be strings"),
    ("name: mine\nscheduler: local\nmatch: {env: {X: [a]}}\nlaunchers: [{argv: [a]}]\n", "patterns must be strings"),
    ("name: mine\nscheduler: local\nenv: {1: x}\nlaunchers: [{argv: [a]}]\n", "shell identifiers"),
    ("name: mine\nscheduler: local\nlaunchers: [{argv: [a], requires: [b]}]\n", "requires: program name"),
    ("name: mine\nscheduler: local\nlaunchers: [{argv: [{when: [x], args: [a]}]}]\n", "conditional argv"),
    ("name: mine\nscheduler: local\ndescription: [a]\nlaunchers: [{argv: [a]}]\n", "description: must be a string"),
    ("name: mine\nscheduler: local\ngpus_per_host: 99999999999999999999\nlaunchers: [{argv: [a]}]\n", "from 0 to"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("description: '" + "x" * (2 << 20) + "'\n", "larger than"),
]


@pytest.mark.parametrize("text,says", BAD, ids=[str(i) for i in range(len(BAD))])
@pytest.mark.parametrize("command", [["profiles"], ["save", "--quiet"]])
def test_bad_user_profile_is_one_line(tmp_path, home, text, says, command):
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True)
    (d / "mine.yaml").write_text(text)
    p = jobenv(command, base_env(home, machines.local(tmp_path)))
    assert p.returncode == 5 and p.stderr.startswith("jobenv: error: profile ") and says in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1 and len(p.stderr) < 500, p.stderr


def test_fifo_profile_is_refused_not_waited_on(tmp_path, home):
    (tmp_path / "p").mkdir()
    os.mkfifo(tmp_path / "p" / "x.yaml")
    p = jobenv(["profiles"], base_env(home, {"JOBENV_PROFILES": str(tmp_path / "p")}))
    assert p.returncode == 5 and "not a regular file" in p.stderr, p.stderr


def test_another_users_profile_is_refused(tmp_path, home, other_user, shared_tmp):
    """A profile chooses the commands `launch` runs: one planted in a shared directory on
    JOBENV_PROFILES, matching every local job, must not become this user's launcher."""
    evil = GOOD.replace("name: mine", "name: local").replace("mpiexec", f"{shared_tmp}/evil")
    other_user.sh(f"cd {shared_tmp} && printf '%s' '{evil}' > x.yaml")
    env = base_env(home, {**machines.local(tmp_path), "JOBENV_PROFILES": str(shared_tmp)})
    p = jobenv(["save", "--json"], env)
    assert p.returncode == 5 and "refusing it" in p.stderr and "evil" not in p.stdout, p.stdout + p.stderr
    mine = tmp_path / "mine.yaml"
    mine.write_text(GOOD)
    mine.chmod(0o666)
    p = jobenv(["profiles"], base_env(home, {"JOBENV_PROFILES": str(mine)}))
    assert p.returncode == 5 and "chmod go-w" in p.stderr, p.stderr
    mine.chmod(0o644)
    assert jobenv(["profiles"], base_env(home, {"JOBENV_PROFILES": str(mine)})).returncode == 0
