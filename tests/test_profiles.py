"""Machine profiles: which one a job gets, and how a bad profile is reported."""
from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

import machines
from conftest import base_env, jobenv
from jobenv.profiles import load as profiles
from jobenv.core.errors import BadInput, JobenvError

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
    ("name: mine\nscheduler: local\nlaunchers: [{argv: [a], family: [mpich, nope]}]\n", "family 'nope' is not one of"),
    ("name: mine\nscheduler: local\nlaunchers: [{argv: [a], family: [mpich, [x]]}]\n", "is not one of"),
    ("name: mine\nscheduler: local\nlaunchers: [{argv: [{when: [x], args: [a]}]}]\n", "conditional argv"),
    ("name: mine\nscheduler: local\ndescription: [a]\nlaunchers: [{argv: [a]}]\n", "description: must be a string"),
    ("name: mine\nscheduler: local\ngpus_per_host: 99999999999999999999\nlaunchers: [{argv: [a]}]\n", "from 0 to"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("description: '" + "x" * (2 << 20) + "'\n", "larger than"),
    # an alias, even a harmless one, is refused where it stands (see bomb() below)
    ("name: mine\nscheduler: local\nlaunchers: [{argv: &a [a]}, {argv: *a}]\n", "line 3: YAML error: aliases"),
    ("name: mine\nscheduler: local\ngpus_per_host: " + "9" * 5000 + "\nlaunchers: [{argv: [a]}]\n", "too long"),
    ("name: mine\nscheduler: local\ngpu_bind: {1: a, b: c}\nlaunchers: [{argv: [a]}]\n", "unknown key"),
    # an untrusted value is named by its type, never printed whole
    ("name: mine\nscheduler: local\nlaunchers: [{argv: [[" + "a," * 100 + "]]}]\n", "strings or numbers, not a list"),
    ("name: mine\nscheduler: local\n? " + "x" * 5000 + "\n: 1\nlaunchers: [{argv: [a]}]\n", "'xxxxx"),
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


def bomb(levels: int = 9) -> str:
    """Billion laughs: 423 bytes whose first argv entry stands for 9**9 items."""
    text = "name: bomb\nscheduler: pbs\nlaunchers:\n  - argv:\n    - [&a0 [x,x,x,x,x,x,x,x,x]"
    for i in range(1, levels):
        text += f", &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]"
    return text + "]\n"


def wide() -> str:
    """One flat list of 40,000 words, then 35,000 conditional argv entries sharing it (just
    under MAX_BYTES): validation would walk 1.4e9 items, with no memory to run out of."""
    return ("name: wide\nscheduler: pbs\nvars: {w: x}\nlaunchers:\n  - argv:\n    - {when: w, args: &b ["
            + "x," * 40_000 + "]}\n" + "    - {when: w, args: *b}\n" * 35_000)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (10, 10))


@pytest.mark.parametrize("text", [bomb(), wide()], ids=["deep", "wide"])
def test_profile_alias_bomb_is_one_line(tmp_path, home, text):
    """A small profile of aliases must cost what its size does: before aliases were refused,
    the deep one's error message repr()ed 9**9 items before cutting them to 200 characters
    (49 s, 2.4 GB, then a MemoryError traceback) and the wide one ran for minutes."""
    assert len(text) < profiles.MAX_BYTES
    d = tmp_path / "profs"
    d.mkdir()
    (d / "bomb.yaml").write_text(text)
    env = base_env(home, {"JOBENV_PROFILES": str(d)})
    p = subprocess.run([sys.executable, "-m", "jobenv", "profiles"], env=env, capture_output=True, text=True,
                       preexec_fn=_limited, timeout=60)
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, (p.returncode,
                                                                                             p.stderr[-300:])
    assert "aliases (*name) are not allowed" in p.stderr, p.stderr


def test_shipped_profiles_use_no_aliases():
    """The same loader reads jobenv's own profiles: they must not need an alias either."""
    assert len(profiles.load_all({"HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent"})) >= 10


# --- which files are trusted as profiles ---------------------------------------------------

def test_profile_directory_another_user_owns_is_refused(tmp_path, other_user, shared_tmp):
    """Another user who owns a JOBENV_PROFILES directory would decide which of your (or
    root's) files are read as profiles, under which names and in which override order
    (here: a link to a file of yours), and could remove them at any time."""
    mine = tmp_path / "site-override.yaml"  # a file of the user's, anywhere (they need not read it)
    mine.write_text("name: chosen\nscheduler: pbs\nlaunchers:\n  - argv: [mpiexec, -n, '{nranks}']\n")
    theirs = shared_tmp / "profiles"
    other_user.sh(f"mkdir '{theirs}' && ln -s '{mine}' '{theirs}/zz.yaml'")
    with pytest.raises(JobenvError, match=f"above the profile .* is owned by uid {other_user.uid}"):
        found = profiles.load_all({"HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent",
                                   "JOBENV_PROFILES": str(theirs)})
        assert "chosen" not in found


def test_another_users_link_to_your_profile_is_refused(tmp_path, home, other_user, shared_tmp):
    """A link is judged as the link: in sticky /tmp another user's link at the path you
    named would choose which of your files is read (the file it reaches is yours)."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(GOOD)
    other_user.sh(f"ln -s '{mine}' '{shared_tmp}/p.yaml'")
    p = jobenv(["profiles"], base_env(home, {"JOBENV_PROFILES": f"{shared_tmp}/p.yaml"}))
    assert p.returncode == 5 and f"symbolic link owned by uid {other_user.uid}; refusing it" in p.stderr, p.stderr
    (tmp_path / "d").mkdir()  # each link on the way counts: yours -> theirs -> your file
    (tmp_path / "d" / "via.yaml").symlink_to(f"{shared_tmp}/p.yaml")
    p = jobenv(["profiles"], base_env(home, {"JOBENV_PROFILES": str(tmp_path / "d")}))
    assert p.returncode == 5 and f"{shared_tmp}/p.yaml is a symbolic link owned by uid" in p.stderr, p.stderr


def test_sticky_profile_directory_is_refused(tmp_path, home, shared_tmp):
    """A directory that others may add entries to is not a profile directory, sticky or not:
    only your own file in it, and still refused (another user could add one at any time)."""
    (shared_tmp / "mine.yaml").write_text(GOOD)
    p = jobenv(["profiles"], base_env(home, {"JOBENV_PROFILES": str(shared_tmp)}))
    assert p.returncode == 5 and "writable by others" in p.stderr and "refusing it" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr


def test_your_own_links_to_profiles_still_work(tmp_path, home):
    """Dotfile managers link ~/.config/jobenv/profiles (or each file) elsewhere: links of
    your own, to files of your own, are followed."""
    dot = tmp_path / "dotfiles"
    (dot / "profiles").mkdir(parents=True)
    (dot / "real.yaml").write_text(GOOD)
    (dot / "profiles" / "mine.yaml").symlink_to("../real.yaml")
    (home / ".config" / "jobenv").mkdir(parents=True)
    (home / ".config" / "jobenv" / "profiles").symlink_to(dot / "profiles")
    p = jobenv(["profiles"], base_env(home, {}))
    assert p.returncode == 0 and "mine" in p.stdout, p.stdout + p.stderr
