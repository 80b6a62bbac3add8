"""Machine profiles: which one a job gets, and how a bad profile is reported."""
from __future__ import annotations

import pytest

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
    assert profiles.choose(shipped, scheduler, jobid, hosts, env).name == expect


def test_choose_by_name_and_unknown(shipped):
    assert profiles.choose(shipped, "slurm", "1", ["n1"], {}, "polaris").name == "polaris"
    with pytest.raises(BadInput, match="unknown profile 'nope'"):
        profiles.choose(shipped, "slurm", "1", ["n1"], {}, "nope")


def test_user_profile_overrides_and_matches_first(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "name: mycluster\nscheduler: pbs\nmatch: {hosts: '^cn\\d+'}\ngpus_per_host: 2\n"
        "launchers:\n  - argv: [mpiexec, -n, '{nranks}']\n")
    profs = profiles.load_all({"HOME": "/nonexistent", "JOBENV_PROFILES": str(tmp_path)})
    assert profiles.choose(profs, "pbs", "5.srv", ["cn001"], {}).name == "mycluster"
    assert profiles.choose(profs, "pbs", "5.srv", ["gpu01"], {}).name == "pbs"


def test_no_profile_for_scheduler():
    with pytest.raises(BadInput, match="no profile for scheduler"):
        profiles.choose({}, "slurm", "1", ["n1"], {})
