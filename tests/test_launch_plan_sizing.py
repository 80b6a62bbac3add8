"""Sizing at launch time: pure (record hosts, profile template, request) -> argv + hostfile."""
from __future__ import annotations

import pytest

from jobenv.profiles import load as profiles
from jobenv.core.errors import BadInput
from jobenv.launch.plan import sizing
from jobenv.launch.plan.sizing import choose, render_sized
from jobenv.launch.types import Request

HOSTS = ["x3001c0s1b0n0.hsn.cm.polaris.alcf.anl.gov", "x3001c0s2b0n0.hsn.cm.polaris.alcf.anl.gov",
         "x3001c0s3b0n0.hsn.cm.polaris.alcf.anl.gov", "x3001c0s4b0n0.hsn.cm.polaris.alcf.anl.gov"]
NODES = ["node1", "node2", "node3", "node4"]


def shipped(name):
    return profiles.load_all({"XDG_CONFIG_HOME": "/nonexistent"})[name]


@pytest.mark.parametrize("req,hosts,ppn,n,whole", [
    (Request(), NODES, 4, 16, True),
    (Request(nhosts=1), NODES[:1], 4, 4, False),
    (Request(hosts="node[2-3]"), NODES[1:3], 4, 8, False),
    (Request(hosts="node3,node1"), ["node1", "node3"], 4, 8, False),  # the job's order decides placement
    (Request(exclude="node2"), ["node1", "node3", "node4"], 4, 12, False),
    (Request(nranks=6), NODES[:2], 4, 6, False),
    (Request(nranks=6, ppn=2), NODES[:3], 2, 6, False),
    (Request(nranks=6, nhosts=3), NODES[:3], 2, 6, False),
    (Request(ppn=1), NODES, 1, 4, False),
    (Request(nhosts=4, ppn=4), NODES, 4, 16, True),
    (Request(hosts="node[1-4]", exclude="node4", nhosts=2), NODES[:2], 4, 8, False),
])
def test_choose(req, hosts, ppn, n, whole):
    size = choose(NODES, 4, req, "42")
    assert (list(size.hosts), size.ppn, size.nranks, size.whole) == (hosts, ppn, n, whole)


@pytest.mark.parametrize("req,words", [
    (Request(nhosts=5), ["--nhosts 5", "only 4 host"]),
    (Request(hosts="node9"), ["'node9'", "not in job 42", "node[1-4]"]),
    (Request(exclude="gpu1"), ["--exclude", "'gpu1'"]),
    (Request(exclude="node[1-4]"), ["no hosts left"]),
    (Request(nranks=17), ["-n 17", "needs 5 hosts", "only 4"]),
    (Request(nranks=9, nhosts=2, ppn=4), ["does not fit"]),
    (Request(nranks=2, nhosts=3), ["leaves hosts without a rank"]),
    (Request(hosts="node[1-"), ["malformed hostlist"]),
    (Request(hosts="$(reboot)"), ["hostlist"]),
])
def test_impossible_requests_are_errors(req, words):
    with pytest.raises(BadInput) as exc:
        choose(NODES, 4, req, "42")
    for w in words:
        assert w in exc.value.message


def test_short_names_select_fqdn_hosts():
    size = choose(HOSTS, 4, Request(hosts="x3001c0s2b0n0"), "1.polaris")
    assert size.hosts == (HOSTS[1],)


def test_polaris_pals_renders_a_sub_hostfile():
    prof = shipped("polaris")
    size = choose(HOSTS, 4, Request(exclude="x3001c0s1b0n0", nhosts=2, ppn=2), "1")
    argv, text = render_sized(prof.launchers[0]["argv"], size, 4, "1", prof.vars, "/run/hf", "mpich")
    assert argv == ["mpiexec", "--envall", "-n", "4", "-ppn", "2", "--hostfile", "/run/hf",
                    "--cpu-bind", "depth", "-d", "16"]
    assert text == HOSTS[1] + "\n" + HOSTS[2] + "\n"


def test_srun_gets_nodelist_for_a_subset_only():
    prof = shipped("slurm")
    tmpl = prof.launchers[0]["argv"]
    size = choose(NODES, 2, Request(hosts="node[3-4]", ppn=1), "7")
    argv, text = render_sized(tmpl, size, 0, "7", prof.vars, "/unused", "srun")
    assert argv == ["srun", "--nodelist=node[3-4]", "-N", "2", "-n", "2", "--ntasks-per-node", "1"] and text is None
    whole = choose(NODES, 2, Request(), "7")
    assert render_sized(tmpl, whole, 0, "7", prof.vars, "/unused", "srun")[0] == \
        ["srun", "-N", "4", "-n", "8", "--ntasks-per-node", "2"]


def test_openmpi_cobalt_and_frontier_templates():
    prof = shipped("thetagpu")
    size = choose(NODES, 8, Request(nranks=3), "9")
    argv, text = render_sized(prof.launchers[0]["argv"], size, 8, "9", prof.vars, "/hf", "openmpi")
    assert argv[:7] == ["mpirun", "-n", "3", "-N", "3", "--hostfile", "/hf"] and text == "node1\n"
    prof = shipped("frontier")
    size = choose(NODES, 8, Request(nhosts=1, ppn=2), "9")
    argv, _ = render_sized(prof.launchers[0]["argv"], size, 8, "9", prof.vars, "/hf", "srun")
    assert argv[:8] == ["srun", "--nodelist=node1", "-N", "1", "-n", "2", "--ntasks-per-node", "2"]
    assert argv[-4:] == ["--gpus-per-node", "8", "--gpu-bind", "closest"]


def test_template_without_hostfile_gets_one_and_torchrun_stays_on_one_host():
    size = choose(NODES, 2, Request(nhosts=2), "3")
    argv, text = render_sized(["mpiexec", "-n", "{nranks}"], size, 0, "3", {}, "/hf", "mpich")
    assert argv == ["mpiexec", "--hostfile", "/hf", "-n", "4"] and text == "node1\nnode2\n"
    local = choose(["vm"], 4, Request(nranks=2), "vm")
    argv, text = render_sized(shipped("local").launchers[1]["argv"], local, 0, "vm", {}, "/hf", "torchrun")
    assert "--nproc-per-node" in argv and argv[argv.index("--nproc-per-node") + 1] == "2" and text is None
    with pytest.raises(BadInput, match="one host"):
        render_sized(shipped("local").launchers[1]["argv"], size, 0, "3", {}, "/hf", "torchrun")


def test_one_process_per_host_for_stage():
    prof = shipped("pbs")
    argv, text = sizing.per_host(HOSTS, prof.launchers[0]["argv"], HOSTS[2:], "5", {}, "/hf", "mpich")
    assert argv == ["mpiexec", "-n", "2", "-ppn", "1", "--hostfile", "/hf"] and text == "".join(h + "\n" for h in HOSTS[2:])
    argv, _ = sizing.per_host(NODES, shipped("slurm").launchers[0]["argv"], ["node2"], "5", {}, "/hf", "srun")
    assert argv == ["srun", "--nodelist=node2", "-N", "1", "-n", "1", "--ntasks-per-node", "1"]


def test_block_placement_names_hosts_of_ranks():
    size = choose(NODES, 2, Request(nhosts=3), "1")
    assert [size.host_of(r) for r in (0, 1, 2, 5, 6)] == ["node1", "node1", "node2", "node3", None]


def test_per_host_plan_uses_the_records_profile_and_launcher():
    from jobenv.launch.plan.attempt import per_host_plan
    from jobenv.store.record import from_dict

    rec = from_dict({"schema_version": 1, "scheduler": "slurm", "jobid": "7", "machine": "slurm", "hosts": NODES,
                     "gpus_per_host": 4, "ranks_per_host": 4, "launch": ["srun", "-N", "4"], "env": {},
                     "created_at": "t", "created_on": "node1",
                     "software": {"python": None, "launcher": "/usr/bin/srun", "modules": None}})
    env = {"XDG_CONFIG_HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}
    argv, text = per_host_plan(rec, env, ["node2", "node4"], "/hf")
    assert argv[1:] == ["--nodelist=node[2,4]", "-N", "2", "-n", "2", "--ntasks-per-node", "1"] and text is None
    assert argv[0] in ("/usr/bin/srun", "srun")  # the recorded path where it exists
