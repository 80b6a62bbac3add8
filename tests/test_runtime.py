"""Rank detection from recorded launcher environments (pure), and the runtime's contracts."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import fsutil
from jobenv.runtime import DetectError, DistInfo, detect, discovery, export_env
from jobenv.runtime.backends import choose_backend, tf_config

PALS = {"PALS_RANKID": "5", "PALS_LOCAL_RANKID": "1", "PALS_NODEID": "1", "PALS_DEPTH": "16", "PALS_APID": "a1b2",
        "PMI_RANK": "5", "PMI_SIZE": "8", "PMI_LOCAL_RANK": "1", "PMI_LOCAL_SIZE": "4"}
HYDRA = {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2", "PMI_FD": "9",
         "PMI_HOSTNAME": "n2"}
INTEL = {"PMI_RANK": "6", "PMI_SIZE": "8", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "4", "I_MPI_ROOT": "/opt/intel/mpi"}
OMPI4 = {"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
         "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "0", "OMPI_UNIVERSE_SIZE": "4"}
OMPI5 = {**OMPI4, "PMIX_RANK": "2", "PMIX_NAMESPACE": "prterun-n1-1234@1"}
MV2 = {"MV2_COMM_WORLD_RANK": "7", "MV2_COMM_WORLD_SIZE": "8", "MV2_COMM_WORLD_LOCAL_RANK": "3",
       "MV2_COMM_WORLD_LOCAL_SIZE": "4"}
BATCH = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_PROCID": "0", "SLURM_NTASKS": "4",
         "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_TASK_PID": "100"}
SRUN = {**BATCH, "SLURM_STEP_ID": "3", "SLURM_PROCID": "3", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
        "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_TASK_PID": "4242"}
SRUN_PMIX = {**SRUN, "PMIX_RANK": "3", "PMIX_NAMESPACE": "slurm.pmix.77.3"}
SRUN_PMI2 = {**SRUN, "PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "5"}
HOROVOD = {"HOROVOD_RANK": "1", "HOROVOD_SIZE": "4", "HOROVOD_LOCAL_RANK": "1", "HOROVOD_LOCAL_SIZE": "2",
           "HOROVOD_CROSS_RANK": "0", "HOROVOD_CROSS_SIZE": "2", "HOROVOD_HOSTNAME": "n1"}
JSRUN = {"JSM_NAMESPACE_RANK": "9", "JSM_NAMESPACE_SIZE": "12", "JSM_NAMESPACE_LOCAL_RANK": "3",
         "JSM_NAMESPACE_LOCAL_SIZE": "6"}
TORCHRUN = {"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1",
            "ROLE_RANK": "2", "MASTER_ADDR": "n1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
            "TORCHELASTIC_RESTART_COUNT": "0"}

#          env, pids, (launcher, rank, local, size, local size, node)
TABLE = {
    "plain python": ({}, None, ("none", 0, 0, 1, 1, 0)),
    "pals": (PALS, None, ("pals", 5, 1, 8, 4, 1)),
    "mpich hydra": (HYDRA, None, ("mpich", 3, 1, 4, 2, 1)),
    "intel mpi": (INTEL, None, ("mpich", 6, 2, 8, 4, 1)),
    "open mpi 4": (OMPI4, None, ("openmpi", 2, 0, 4, 2, 1)),
    "open mpi 5": (OMPI5, None, ("openmpi", 2, 0, 4, 2, 1)),
    "mvapich2": (MV2, None, ("mvapich2", 7, 3, 8, 4, 1)),
    "srun": (SRUN, (4242, 4000), ("srun", 3, 1, 4, 2, 1)),
    "srun --mpi=pmix": (SRUN_PMIX, (4242,), ("srun", 3, 1, 4, 2, 1)),
    "srun --mpi=pmi2": (SRUN_PMI2, (4242,), ("srun", 3, 1, 4, 2, 1)),
    "pmix without srun vars": ({"PMIX_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
                               None, ("pmix", 1, 1, 2, 2, 0)),
    "horovodrun": (HOROVOD, None, ("horovodrun", 1, 1, 4, 2, 0)),
    "jsrun": (JSRUN, None, ("jsrun", 9, 3, 12, 6, 1)),
    "torchrun": (TORCHRUN, None, ("torchrun", 2, 0, 4, 2, 1)),
    # leftovers must not fool detection
    "batch script SLURM_PROCID": (BATCH, (100,), ("none", 0, 0, 1, 1, 0)),
    "stale RANK without torchrun": ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1"}, None, ("none", 0, 0, 1, 1, 0)),
    "mpiexec inside an srun step shell": ({**SRUN, **HYDRA}, (9001, 9000, 8999), ("mpich", 3, 1, 4, 2, 1)),
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_detection_table(name):
    env, pids, (launcher, rank, local, size, lsize, node) = TABLE[name]
    info = detect(dict(env), pids=pids, hostname="elsewhere")
    got = (info.launcher, info.rank, info.local_rank, info.world_size, info.local_world_size, info.node_rank)
    assert got == (launcher, rank, local, size, lsize, node)


def test_open_mpi_node_rank_is_not_a_node_index():
    env = {**OMPI4, "OMPI_COMM_WORLD_NODE_RANK": "0", "OMPI_COMM_WORLD_RANK": "3"}
    assert detect(env, hostname="x").node_rank == 1  # block placement: rank 3 of 2 per node


def test_disagreeing_launchers_fail_naming_both():
    with pytest.raises(DetectError, match=r"openmpi says OMPI_COMM_WORLD_RANK=2.*mpich says PMI_RANK=3"):
        detect({**OMPI4, **HYDRA})
    with pytest.raises(DetectError, match="srun says SLURM_PROCID=3"):
        detect({**SRUN, "PMI_RANK": "1", "PMI_SIZE": "4"}, pids=(4242,))


def test_garbage_is_a_clear_error():
    with pytest.raises(DetectError, match="PMI_RANK='x' is not a number"):
        detect({"PMI_RANK": "x", "PMI_SIZE": "2"})
    with pytest.raises(DetectError, match="outside"):
        detect({"PMI_RANK": "4", "PMI_SIZE": "4"})


def _record(tmp_path, hosts, jobid="42.pbs"):
    """A record written by the real `jobenv save` in a PBS-shaped job with these hosts."""
    import machines
    from conftest import base_env, jobenv

    home = tmp_path / f"home-{jobid}"
    home.mkdir()
    nodefile = tmp_path / f"nodefile-{jobid}"
    nodefile.write_text("".join(h + "\n" for h in hosts))
    env = base_env(home, {**machines.pbs_common(jobid, str(nodefile)), "JOBENV_HOME": str(tmp_path / "store")})
    out = jobenv(["save", "--json"], env, check=True).stdout
    from jobenv.store import files as store

    return store.paths_for(store.key_for("pbs", jobid), env)[0] if out else ""


def test_rendezvous_from_record(tmp_path):
    rec = _record(tmp_path, ["x1.hsn.example", "x2.hsn.example"])
    env = {**HYDRA, "JOBENV_RECORD": rec}
    info = detect(env, hostname="x2")
    assert info.master_addr == "x1.hsn.example" and info.hosts == ("x1.hsn.example", "x2.hsn.example")
    assert info.node_rank == 1 and info.num_nodes == 2 and info.jobid == "42.pbs"
    assert detect({**env, "PMI_RANK": "0"}, hostname="x1").node_rank == 0
    assert discovery.PORT_LOW <= info.master_port < discovery.PORT_LOW + discovery.PORT_SPAN <= 32768  # below the ephemeral ports
    assert detect(env, hostname="x1").master_port == info.master_port  # every rank derives the same
    other = detect({**env, "JOBENV_RECORD": _record(tmp_path, ["x1", "x2"], jobid="43.pbs")}, hostname="x1")
    assert other.master_port != info.master_port
    forced = detect({**env, "MASTER_ADDR": "10.1.1.1", "MASTER_PORT": "1234"})
    assert (forced.master_addr, forced.master_port) == ("10.1.1.1", 1234)


def test_rendezvous_from_srun_step_and_local():
    info = detect(SRUN, pids=(4242,))
    assert info.master_addr == "n1" and info.jobid == "77"
    local = detect({"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"})
    assert local.master_addr == "127.0.0.1"
    unknown = detect(HYDRA)  # 2 hosts, no record, no MASTER_ADDR
    assert unknown.master_addr is None
    with pytest.raises(DetectError, match="MASTER_ADDR"):
        export_env(unknown, env={})


def test_export_env_for_env_init():
    env = {}
    export_env(detect(PALS, hostname="x", ).replace(master_addr="h0"), env=env)
    assert env["RANK"] == "5" and env["WORLD_SIZE"] == "8" and env["LOCAL_RANK"] == "1"
    assert env["LOCAL_WORLD_SIZE"] == "4" and env["MASTER_ADDR"] == "h0" and env["MASTER_PORT"].isdigit()


def test_distinfo_is_immutable_value():
    a = DistInfo(rank=1, world_size=2)
    with pytest.raises(AttributeError):
        a.rank = 3
    assert a == DistInfo(rank=1, world_size=2) and hash(a) == hash(DistInfo(rank=1, world_size=2))
    assert a.replace(rank=0).rank == 0 and a.as_dict()["world_size"] == 2 and "rank=1" in repr(a)


@pytest.mark.parametrize("fields,why", [
    ({"hosts": "n1,n2"}, "one string"),
    ({"hosts": b"n1"}, "one string"),
    ({"hosts": ["n1", 2]}, "hosts holds 2"),
    ({"hosts": None}, "hosts=None is not a list of host names"),
    ({"hosts": 5}, "hosts=5 is not a list"),
    ({"hosts": 1.5}, "hosts=1.5 is not a list"),
    ({"rank": 2, "world_size": 2}, "rank 2 is outside 0..1"),
    ({"rank": -1}, "rank -1 is outside"),
    ({"world_size": 0}, "world size 0"),
    ({"local_world_size": 3, "world_size": 2}, "local size 3 is outside 1..2"),
    ({"local_rank": 1}, "local rank 1 is outside 0..0"),
    ({"node_rank": -1}, "node rank -1"),
    ({"num_nodes": 0}, "of 0 nodes"),
    ({"rank": "0"}, "rank='0' is not an integer"),
    ({"world_size": True}, "world_size=True is not an integer"),
    ({"rank": 1.0, "world_size": 2}, "rank=1.0 is not an integer"),
    ({"master_port": 70000}, "master_port=70000"),
    ({"master_port": "29500"}, "master_port='29500'"),
    ({"master_addr": ""}, "master_addr=''"),
    ({"master_addr": 1}, "master_addr=1"),
    ({"launcher": None}, "launcher=None"),
    ({"jobid": 7}, "jobid=7"),
])
def test_distinfo_constructor_refuses_what_detect_would(fields, why):
    """A DistInfo built by hand holds to detect()'s rules: hosts="n1,n2" was five hosts
    ('n', '1', ',', 'n', '2') and rank 5 of 2 was accepted."""
    with pytest.raises(DetectError, match=why):
        DistInfo(**fields)
    with pytest.raises(DetectError, match=why):
        DistInfo(world_size=4, local_world_size=2).replace(**{"world_size": 1, "local_world_size": 1, **fields})
    assert DistInfo(hosts=["n1", "n2"]).hosts == ("n1", "n2") and DistInfo(hosts=iter(["n1"])).hosts == ("n1",)


def test_distinfo_hosts_that_are_not_a_sequence_are_a_detect_error():
    """hosts=None (Python's usual 'no value') or a number escaped as a bare TypeError from
    tuple(), which callers catching DetectError (or BadInput, exit 5) do not catch."""
    for hosts in (None, 5, 1.5):
        with pytest.raises(DetectError):
            DistInfo(hosts=hosts)


@pytest.mark.parametrize("cuda,xpu,req,expect", [
    (True, False, None, ("cuda", "nccl")), (False, True, None, ("xpu", "xccl")), (False, False, None, ("cpu", "gloo")),
    (True, False, "gloo", ("cuda", "gloo")), (True, True, None, ("cuda", "nccl")),
])
def test_choose_backend(cuda, xpu, req, expect):
    assert choose_backend(cuda, xpu, req) == expect


def test_choose_backend_refuses_impossible():
    with pytest.raises(DetectError, match="nccl needs CUDA"):
        choose_backend(False, False, "nccl")
    with pytest.raises(DetectError, match="xccl needs Intel"):
        choose_backend(True, False, "xccl")


def test_tf_config_lists_every_rank_in_block_order():
    info = DistInfo(rank=3, world_size=4, local_world_size=2, num_nodes=2, master_addr="a", master_port=30000,
                    hosts=("a", "b"))
    cfg = tf_config(info)
    assert cfg["cluster"]["worker"] == ["a:30000", "a:30001", "b:30000", "b:30001"]
    assert cfg["task"] == {"type": "worker", "index": 3}


def test_missing_framework_gives_install_hint(monkeypatch):
    from jobenv.runtime import backends

    with pytest.raises(backends.MissingFramework, match=r"pip install 'jobenv\[horovod\]'"):
        backends.ensure_installed("horovod_not_here_xyz", "horovod")
    with pytest.raises(backends.MissingFramework, match=r"pip install 'jobenv\[deepspeed\]'"):
        backends.require("deepspeed_not_here_xyz", "deepspeed")


# ---------------------------------------------------------------- nonsense is refused

@pytest.mark.parametrize("env,why", [
    ({**HYDRA, "MPI_LOCALRANKID": "2"}, "local rank 2 is outside 0..1"),
    ({**HYDRA, "MPI_LOCALNRANKS": "0"}, "local size 0"),
    ({**HYDRA, "MPI_LOCALNRANKS": "5"}, "local size 5 is outside 1..4"),
    ({**HYDRA, "PMI_SIZE": "-4"}, "not a number"),
    ({**HYDRA, "PMI_SIZE": "0"}, "outside"),
    ({**PALS, "PALS_NODEID": "8"}, "node rank 8 is beyond the job"),
    ({**PALS, "NHOSTS": "1"}, "node rank 1 is beyond the job .8 ranks on 1 host\\)"),
    ({**HYDRA, "MASTER_PORT": "99999"}, "MASTER_PORT='99999' is not a port number"),
    ({**HYDRA, "MASTER_PORT": "-1"}, "MASTER_PORT='-1'"),
    ({**HYDRA, "MASTER_PORT": "0"}, "MASTER_PORT='0'"),
    ({**HYDRA, "MASTER_PORT": "２９５００"}, "MASTER_PORT="),
    ({**HYDRA, "PMI_RANK": "1_0"}, "PMI_RANK='1_0' is not a number"),
    ({**HYDRA, "PMI_RANK": "\u00b2"}, "is not a number"),
    ({**HYDRA, "PMI_RANK": "12345678901"}, "is not a number"),
    ({**HYDRA, "JOBENV_HOSTFILE": "/nonexistent/hosts"}, "JOBENV_HOSTFILE"),
])
def test_nonsense_is_refused(env, why):
    with pytest.raises(DetectError, match=why):
        detect(env, hostname="n1")


def test_detect_error_is_a_bad_input_with_exit_5():
    from jobenv.core.errors import EXIT_BAD_INPUT, JobenvError

    with pytest.raises(JobenvError) as exc:
        detect({**HYDRA, "MPI_LOCALRANKID": "9"})
    assert exc.value.exit_code == EXIT_BAD_INPUT and isinstance(exc.value, RuntimeError)


def test_record_with_hosts_that_are_not_a_list_is_refused(tmp_path):
    path = _record(tmp_path, ["a1", "a2"])
    text = open(path).read()
    for bad in ('"a"', '["a b", "c"]', '[1, 2]', '["-x"]'):
        start = text.index('"hosts"')
        end = text.index("]", start) + 1
        open(path, "w").write(text[:start] + f'"hosts": {bad}' + text[end:])
        with pytest.raises(DetectError, match="record"):
            detect({**HYDRA, "JOBENV_RECORD": path}, hostname="a1")


def test_record_in_a_foreign_or_symlinked_store_is_refused(tmp_path):
    import os

    path = _record(tmp_path, ["a1", "a2"])
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(DetectError, match="symbolic link"):
        detect({**HYDRA, "JOBENV_RECORD": str(link)}, hostname="a1")
    if os.getuid() == 0:
        os.chown(path, 12345, 12345)
        with pytest.raises(DetectError, match="owned by uid 12345"):
            detect({**HYDRA, "JOBENV_RECORD": path}, hostname="a1")


@pytest.mark.slow  # ranks that import torch and DeepSpeed
@pytest.mark.parametrize("setup,framework", [("setup_torch", "torch"), ("setup_deepspeed", "deepspeed")])
def test_setup_names_the_rank_that_never_checks_in(tmp_path, setup, framework):
    """Rank 0 of 3 alone: setup_torch and setup_deepspeed fail within their timeout naming
    ranks 1 and 2 and their hosts, as the selftest does, instead of waiting in the backend's
    rendezvous."""
    pytest.importorskip(framework)
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    hosts = tmp_path / "hosts"
    hosts.write_text("h0\nh1\nh2\n")
    hosts.chmod(0o600)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "PMI_RANK": "0",
           "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(port), "JOBENV_HOSTFILE": str(hosts), "JOBENV_HOSTNAME": "h0",
           "GLOO_SOCKET_IFNAME": "lo"}
    code = (f"import jobenv, sys\ntry:\n    jobenv.{setup}(timeout=3)\nexcept jobenv.runtime.DetectError as e:\n"
            "    print(e); sys.exit(5)\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 5, p.stdout + p.stderr
    assert "ranks 1 (on h1), 2 (on h2) never checked in within 3 s" in p.stdout


@pytest.mark.parametrize("kind", fsutil.HOSTILE_FILES)
def test_hostile_jobenv_hostfile_is_refused_at_once(tmp_path, kind):
    """JOBENV_HOSTFILE is read in every rank: a FIFO must not block it, /dev/zero or a
    huge file must not fill its memory; each is one DetectError (run under `timeout`)."""
    path = fsutil.hostile_file(tmp_path / "evil", kind)
    code = "import jobenv.runtime as r\ntry:\n    r.detect()\nexcept r.DetectError as e:\n    print(e)\n"
    env = {**HYDRA, "PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "JOBENV_HOSTFILE": path, "JOBENV_HOSTNAME": "n1"}
    p = subprocess.run(["timeout", "-s", "KILL", "20", sys.executable, "-c", code], env=env, capture_output=True,
                       text=True)
    assert p.returncode == 0 and p.stdout.startswith(f"JOBENV_HOSTFILE={path!r}: "), (p.returncode, p.stderr[-2000:])
    assert len(p.stdout) < 1000


def test_jobenv_hostfile_is_read_whole_or_refused(tmp_path):
    """A launch on 700,000 hosts has a 17 MiB JOBENV_HOSTFILE: every host is read (it was cut
    at 16 MiB, so the last hosts fell back to rank // local size)."""
    hosts = [f"host-{i:06d}.example.org" for i in range(700_000)]
    path = tmp_path / "hosts"
    path.write_text("".join(h + "\n" for h in hosts))
    path.chmod(0o600)
    assert path.stat().st_size > 16 << 20
    info = detect({**HYDRA, "JOBENV_HOSTFILE": str(path)}, hostname=hosts[-1])
    assert info.node_rank == len(hosts) - 1 and info.num_nodes == len(hosts)


# A task of `flux run -N2 -n4` launched by `jobenv launch` in a restored shell of a Flux job:
# the job's id is F58 (`ƒ...`), which the ranks' wrapper cannot hash (issue 25: every
# multi-rank Flux launch failed "cannot derive MASTER_PORT from 'ƒXUCEv3@...'").  The task's
# launcher variables are those a real flux-core 0.88 task has (tests/cluster/flux.py: PMI_RANK,
# PMI_SIZE, PMI_FD, FLUX_TASK_RANK, FLUX_TASK_LOCAL_ID, FLUX_JOB_ID, FLUX_JOB_NNODES, FLUX_JOB_SIZE).
FLUX_LAUNCH = {"JOBENV_JOBID": "\u0192XUCEv3", "JOBENV_LAUNCH_TIME": "1700000000.123456"}
FLUX_TASK = {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_FD": "9", "FLUX_TASK_RANK": "3", "FLUX_TASK_LOCAL_ID": "1",
             "FLUX_JOB_ID": "\u01923RdxsWF", "FLUX_JOB_NNODES": "2", "FLUX_JOB_SIZE": "4", "JOBENV_HOSTNAME": "flux2"}


def test_flux_ids_seed_ports_as_flux_job_id_to_dec_prints_them():
    from jobenv.schedulers import flux

    assert discovery.seed_id("\u01922oLkTLb") == flux.decimal("\u01922oLkTLb") == "68484595712"  # `flux job id --to=dec ƒ2oLkTLb` (flux-core 0.88)
    assert discovery.seed_id("f2oLkTLb") == "f2oLkTLb"  # ASCII already: hashed as written on both sides
    assert discovery.seed_id("\u0192not-f58!") == "\u0192not-f58!"
    dec = flux.decimal(FLUX_LAUNCH["JOBENV_JOBID"])
    assert discovery.port_seed(FLUX_LAUNCH, FLUX_LAUNCH["JOBENV_JOBID"]) == f"{dec}@1700000000.123456"


def test_launch_hands_every_attempt_one_port_that_the_wrapper_keeps():
    from jobenv import rankwrap
    from jobenv.schedulers import flux

    port = discovery.launch_port(FLUX_LAUNCH)  # a Flux F58 id: hashed as its decimal
    assert port == discovery.derived_port(f"{flux.decimal(FLUX_LAUNCH['JOBENV_JOBID'])}@1700000000.123456")
    show = ["/bin/sh", "-c", 'printf %s "$MASTER_PORT"']
    env = {"PATH": "/usr/bin:/bin", **FLUX_TASK, **FLUX_LAUNCH, "MASTER_PORT": str(port)}
    ok = subprocess.run(["/bin/sh", rankwrap.script_path(), *show], env=env, capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == str(port), ok.stderr
    assert detect({**FLUX_TASK, **FLUX_LAUNCH, "MASTER_PORT": str(port)}).master_port == port
    pbs = {"JOBENV_JOBID": "2024084.polaris-pbs-01", "JOBENV_LAUNCH_TIME": "1700000000.123456"}
    assert discovery.launch_port(pbs) == discovery.derived_port("2024084.polaris-pbs-01@1700000000.123456")
    assert discovery.launch_port({**pbs, "JOBENV_LAUNCH_TIME": "1700000000.123457"}) != discovery.launch_port(pbs)
    assert discovery.launch_port({**FLUX_LAUNCH, "MASTER_PORT": "1234"}) is None  # the user's port is kept
