"""The per-rank wrapper: generated from the launcher table, agrees with detect() on every row
and every rejection, binds GPUs per profile, records starts and exits, and runs under real
launchers (MPICH mpiexec, Open MPI mpirun, torchrun; Slurm in test_rankwrap_slurm.py)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import machines
from conftest import REPO, base_env, jobenv, mpich, need
from jobenv import rankwrap
from jobenv.runtime import DetectError, detect
from jobenv.runtime.launchers import LAUNCHERS
from test_runtime import HYDRA, OMPI4, PALS, SRUN, TABLE

WRAPPER = rankwrap.script_path()
# the shells /bin/sh is on HPC nodes, each started the way wrapper_argv() starts it: dash
# (Debian, Ubuntu), bash under the name sh (RHEL, Rocky, SUSE: POSIX mode), busybox ash;
# and bash as itself, for a user who runs the wrapper with bash
_SH = {"dash": ("dash", "dash"), "bash": ("bash", "bash"), "bash-as-sh": ("bash", "/bin/sh"),
       "busybox": ("busybox", "sh")}
RUNS = {k: (path, argv0) for k, (exe, argv0) in _SH.items() if (path := shutil.which(exe))}
SHELLS = [k for k in ("dash", "bash") if k in RUNS]
POSIX_SHELLS = [k for k in ("dash", "bash-as-sh", "busybox") if k in RUNS]
OUT = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
       "MASTER_PORT")
# the ledger's and agent's name: the kernel's node name (jobenv.rank.keeper.host_key), never JOBENV_HOSTNAME
HOST = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in os.uname().nodename)
PRINT = ["/bin/sh", "-c", 'printf "%s|" ' + " ".join(f'"${{{v}-unset}}"' for v in OUT)]


def wrap(env, argv=PRINT, shell="dash", **kw):
    full = {"PATH": "/usr/bin:/bin", "JOBENV_PYTHON": sys.executable, **env}
    kw.setdefault("timeout", 60)
    exe, argv0 = RUNS[shell]
    return subprocess.run([argv0, WRAPPER, *argv], executable=exe, env=full, capture_output=True, text=True, **kw)


def expected(env, pids=None):
    """What the wrapper must export, from detect(); None when detect() refuses."""
    try:
        info = detect(env, pids=pids, hostname=env.get("JOBENV_HOSTNAME", os.uname().nodename))
    except DetectError:
        return None
    if info.launcher == "torchrun":
        vals = [env.get(v, "unset") for v in OUT]
    else:
        # the wrapper keeps a launch's MASTER_PORT (jobenv launch always sets one), else torchrun's 29500
        vals = [info.rank, info.local_rank, info.world_size, info.local_world_size, info.node_rank, info.node_rank,
                info.master_addr or "unset", info.master_port if env.get("MASTER_PORT") else 29500]
    return "|".join(str(v) for v in vals) + "|"


def agree(env, pids=None, shell="dash"):
    want = expected(env, pids)
    p = wrap(env, shell=shell)
    if want is None:
        assert p.returncode == 5 and p.stdout == "" and p.stderr.startswith("jobenv: error: "), (p.stdout, p.stderr)
        assert p.stderr.count("\n") == 1
    else:
        assert p.returncode == 0, p.stderr
        assert p.stdout == want
    return p


def test_shipped_script_is_the_rendering_of_the_table():
    assert Path(WRAPPER).read_text() == rankwrap.render(), "run: python -m jobenv.rankwrap > jobenv/rankwrap.sh"
    text = rankwrap.render()
    for row in LAUNCHERS:  # every launcher and every one of its variables is in the script
        assert f"_je_row {row[0]} {row[1][0]} " in text and f"${{{row[1][0]}+x}}" in text
        for names in row[2:7]:
            for n in names:
                assert f" {n}" in text or f"'{n}" in text or f"${{{n}+x}}" in text, n


def _live(env):
    # srun's own task pid cannot be known before the wrapper starts: drop it (then live),
    # or point it at pid 1 (never a parent of the wrapper: a leftover)
    env = dict(env)
    if env.get("SLURM_TASK_PID") == "4242":
        del env["SLURM_TASK_PID"]
    elif "SLURM_TASK_PID" in env:
        env["SLURM_TASK_PID"] = "1"
    return env


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("name", sorted(TABLE))
def test_wrapper_agrees_with_detect_on_the_table(name, shell):
    env, pids, _ = TABLE[name]
    env = {**_live(env), "JOBENV_HOSTNAME": "elsewhere", "JOBENV_LAUNCH_TIME": "1700000000.5"}
    agree(env, pids=(os.getpid(),) if env.get("SLURM_TASK_PID") == "1" else None, shell=shell)


def _row_env(row, rank="1", size="4", local="1", lsize="2", node="1"):
    """An environment that sets every variable of one table row."""
    env = {v: "x" for v in row[6]}
    env[row[1][0]] = rank
    for names, val in ((row[2], size), (row[3], local), (row[4], lsize), (row[5], node)):
        for n in names:
            env[n] = val
    if row[7] == "srun":
        env.update(SLURM_STEP_ID="3", SLURM_JOB_ID="77", SLURM_STEP_TASKS_PER_NODE="2(x2)")
    return env


BAD_VALUES = ["-1", "1_0", "²", " 1", "1 ", "", "0x1", "9999999999", "+1"]


@pytest.mark.parametrize("row", LAUNCHERS, ids=[r[0] for r in LAUNCHERS])
def test_wrapper_agrees_with_detect_on_every_row_and_rejection(row):
    base = {"JOBENV_HOSTNAME": "n1", "JOBENV_JOBID": "9.srv", "JOBENV_LAUNCH_TIME": "5"}
    agree({**base, **_row_env(row)})
    agree({**base, **_row_env(row, rank="0", size="1", local="0", lsize="1", node="0")})
    agree({**base, **_row_env(row, rank="007", size="08", local="3", lsize="4", node="1")})  # leading zeros
    for field in range(5):  # each number garbage or out of range in turn
        for bad in BAD_VALUES + ["0", "00", "4", "5", "100"]:
            vals = ["1", "4", "1", "2", "1"]
            vals[field] = bad
            agree({**base, **_row_env(row, *vals)})
    agree({**base, **_row_env(row), "MASTER_PORT": "99999"})
    agree({**base, **_row_env(row), "MASTER_PORT": "-1"})
    agree({**base, **_row_env(row), "MASTER_PORT": "0"})
    agree({**base, **_row_env(row), "MASTER_PORT": "65535", "MASTER_ADDR": "10.0.0.1"})
    agree({**base, **_row_env(row), "NHOSTS": "1"})  # node 1 of a one-host job


def test_launchers_that_disagree_are_refused_by_both():
    agree({**OMPI4, **HYDRA})
    agree({**_live(SRUN), "PMI_RANK": "1", "PMI_SIZE": "4"})
    agree({**PALS, "PMI_RANK": "5"})  # agree: same rank and size


@pytest.mark.parametrize("nodelist,first", [("nid[001234-001235]", "nid001234"), ("gpu[098-101],cpu[01-02]", "gpu098"),
                                            ("rack[1-2]-node[01-02]", "rack1-node01"), ("n7,n2", "n7"),
                                            ("a[3,1-2]b", "a3b")])
def test_srun_master_is_the_first_step_host(nodelist, first):
    env = {**_live(SRUN), "SLURM_STEP_NODELIST": nodelist, "JOBENV_HOSTNAME": "x"}
    p = agree(env)
    assert p.stdout.split("|")[6] == first


# ------------------------------------------------------------------ a real record


def saved_polaris(tmp_path, nodes: int):
    """A Polaris-shaped job saved by the real `jobenv save`: the variables `get` exports, the record."""
    from jobenv.restore import plan
    from jobenv.store import files as store

    home = tmp_path / "home"
    home.mkdir()
    env = base_env(home, machines.polaris(tmp_path, nodes=nodes))
    jobenv(["save", "--quiet"], env, check=True)
    path = next(p for p, _ in store.iter_records(env))
    rec = store.load(path)
    return {"JOBENV_HOME": env["JOBENV_HOME"], **plan.build(rec, path, {}).set}, rec


@pytest.fixture
def restored(tmp_path):
    return saved_polaris(tmp_path, 3)


def test_node_rank_and_master_from_the_record(restored):
    env, rec = restored
    hydra = {"PMI_RANK": "3", "PMI_SIZE": "6", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2",
             "JOBENV_LAUNCH_TIME": "17.5"}
    for i, host in enumerate(rec.hosts):
        for name in (host, host.split(".")[0]):
            p = agree({**env, **hydra, "JOBENV_HOSTNAME": name})
            vals = p.stdout.split("|")
            assert vals[4] == str(i) and vals[6] == rec.hosts[0]
    agree({**env, **hydra, "JOBENV_HOSTNAME": "not-in-the-job"})  # block placement: 3 // 2
    agree({**env, **hydra, "PALS_RANKID": "3", "PALS_NODEID": "7", "JOBENV_HOSTNAME": "x"})  # beyond 3 hosts
    one_host = {k: v for k, v in hydra.items() if k != "MPI_LOCALNRANKS"}
    agree({**env, **one_host, "JOBENV_HOSTNAME": "x"})  # local size from NRANKS_PER_HOST


def test_long_host_lists_take_the_awk_path_with_the_same_answer(tmp_path):
    renv, rec = saved_polaris(tmp_path, 100)
    hydra = {"PMI_RANK": "3", "PMI_SIZE": "400", "MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4"}
    for i in (0, 57, 99):
        p = agree({**renv, **hydra, "JOBENV_HOSTNAME": rec.hosts[i].split(".")[0]})
        assert p.stdout.split("|")[4] == str(i)
    agree({**renv, **hydra, "JOBENV_HOSTNAME": "elsewhere"})


def test_a_sub_launch_follows_its_own_hostfile(restored, tmp_path):
    env, rec = restored
    sub = tmp_path / "sub-hosts"
    sub.write_text(f"{rec.hosts[2]}\n{rec.hosts[1]}\n")
    sub.chmod(0o600)
    hydra = {"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2",
             "JOBENV_HOSTFILE": str(sub)}
    p = agree({**env, **hydra, "JOBENV_HOSTNAME": rec.hosts[1]})
    assert p.stdout.split("|")[4] == "1" and p.stdout.split("|")[6] == rec.hosts[2]


def test_detect_refuses_a_record_from_a_foreign_or_unsafe_store(restored):
    env, rec = restored
    hydra = {"PMI_RANK": "0", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "2"}
    assert detect({**env, **hydra}, hostname="x").master_addr == rec.hosts[0]
    jobs = Path(env["JOBENV_RECORD"]).parent
    jobs.chmod(0o777)
    try:
        with pytest.raises(DetectError, match="writable by others"):
            detect({**env, **hydra}, hostname="x")
    finally:
        jobs.chmod(0o700)
    Path(env["JOBENV_RECORD"]).chmod(0o666)
    with pytest.raises(DetectError, match="writable by others"):
        detect({**env, **hydra}, hostname="x")


# ------------------------------------------------------------------ GPU binding

PROFILE_BINDINGS = {  # profile: local rank -> (variable, value)
    "polaris": ("CUDA_VISIBLE_DEVICES", ["3", "2", "1", "0", "3"]),
    "aurora": ("ZE_AFFINITY_MASK", ["0.0", "0.1", "1.0", "1.1", "2.0", "2.1", "3.0", "3.1", "4.0", "4.1", "5.0",
                                    "5.1", "0.0"]),
    "sunspot": ("ZE_AFFINITY_MASK", ["0.0", "0.1", "1.0", "1.1", "2.0", "2.1", "3.0", "3.1", "4.0", "4.1", "5.0",
                                     "5.1"]),
    "frontier": ("ROCR_VISIBLE_DEVICES", ["4", "5", "2", "3", "6", "7", "0", "1", "4"]),
}
# one mode per map, each sh run under dash and bash against gpu_bind_value
MAP_MODES = {"identity": "CUDA_VISIBLE_DEVICES:identity:3", "reverse": "CUDA_VISIBLE_DEVICES:reverse:4",
             "tile": "ZE_AFFINITY_MASK:tile:3:2", "order": "ROCR_VISIBLE_DEVICES:order:4,5,2,3,6,7,0,1,9999,0,10"}


def bound(mode, local, shell):
    """The wrapper's binding for `local` of 70 local ranks: (returncode, value, stderr)."""
    var = mode.split(":")[0]
    env = {"PMI_RANK": str(local), "PMI_SIZE": "70", "MPI_LOCALRANKID": str(local), "MPI_LOCALNRANKS": "70",
           "JOBENV_GPU_BIND": mode}
    p = wrap(env, ["/bin/sh", "-c", f'printf %s "${{{var}-unset}}"'], shell=shell)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("how", sorted(MAP_MODES))
def test_every_map_is_the_same_rule_in_python_and_sh(how, shell):
    assert set(MAP_MODES) == set(rankwrap.GPU_MAPS)  # a new map gets a case here
    for local in (0, 1, 2, 5, 7, 8, 10, 11, 12, 69):
        cycle = rankwrap.gpu_bind_cycle(MAP_MODES[how])
        var, value = rankwrap.gpu_bind_value(cycle, local)
        assert bound(cycle, local, shell) == (0, value, ""), (how, local)
    assert rankwrap.gpu_bind_cycle(MAP_MODES["tile"]) == "ZE_AFFINITY_MASK:0.0,0.1,1.0,1.1,2.0,2.1"
    assert rankwrap.gpu_bind_cycle(MAP_MODES["reverse"]) == "CUDA_VISIBLE_DEVICES:3,2,1,0"


ORDER = "ROCR_VISIBLE_DEVICES:order:"
HOSTILE_ORDERS = [ORDER, ORDER + ",", ORDER + "4,", ORDER + ",4", ORDER + "4,,5", ORDER + "04", ORDER + "4,00",
                  ORDER + "10000", ORDER + "4,12345", ORDER + "-1", ORDER + "+1", ORDER + " 4", ORDER + "4 ",
                  ORDER + "0x4", ORDER + "4;5", ORDER + "\u0664", ORDER + "4\n5", ORDER + "4:2",
                  ORDER + "4,5:", ORDER + ",".join(["0"] * 65), ORDER + ",".join(["9999"] * 65),
                  ORDER + "1" * 100_000, ORDER + "$(touch /tmp/x)", "LD_PRELOAD:order:4", "ROCR_VISIBLE_DEVICES:ordered:4",
                  "CUDA_VISIBLE_DEVICES:identity:65", "ZE_AFFINITY_MASK:tile:9:8"]
CYCLE = "ROCR_VISIBLE_DEVICES:"
HOSTILE_CYCLES = [CYCLE, "ROCR_VISIBLE_DEVICES", CYCLE + ",", CYCLE + "4,", CYCLE + ",4", CYCLE + "4,,5", CYCLE + "04",
                  CYCLE + "4,00", CYCLE + "10000", CYCLE + "4,12345", CYCLE + "-1", CYCLE + "+1", CYCLE + " 4",
                  CYCLE + "4 ", CYCLE + "0x4", CYCLE + "4;5", CYCLE + "\u0664", CYCLE + "4\n5", CYCLE + "4:2",
                  CYCLE + "1.", CYCLE + ".1", CYCLE + "1.2.3", CYCLE + "1.01", CYCLE + "12345.1", CYCLE + "1.12345",
                  CYCLE + "1..2", CYCLE + ",".join(["0"] * 65), CYCLE + "1" * 100_000, CYCLE + "$(touch /tmp/x)",
                  "LD_PRELOAD:4", "ROCR_VISIBLE_DEVICES:order:4", "CUDA_VISIBLE_DEVICES:identity:4"]


@pytest.mark.parametrize("shell", SHELLS)
def test_hostile_bindings_are_refused_in_one_line(shell):
    top = rankwrap.gpu_bind_cycle(ORDER + ",".join(["7"] * 63 + ["9999"]))  # 64: the most
    assert bound(top, 63, shell) == (0, "9999", "")
    assert bound(CYCLE + ",".join(["9999.9999"] * 64), 3, shell) == (0, "9999.9999", "")
    for bad in HOSTILE_ORDERS:
        with pytest.raises(ValueError):
            rankwrap.gpu_bind_cycle(bad)
    for bad in HOSTILE_CYCLES:
        with pytest.raises(ValueError):
            rankwrap.gpu_bind_value(bad, 0)
        rc, out, err = bound(bad, 0, shell)
        assert rc == 5 and out == "" and err.startswith("jobenv: error: JOBENV_GPU_BIND is not ") and \
            err.count("\n") == 1 and len(err) < 600, (bad[:80], err[:300])


def test_a_frontier_shaped_job_binds_each_rank_to_its_closest_gcd(tmp_path, home):
    """A Frontier allocation (salloc -N 4 --ntasks-per-node 8 --gpus-per-node 8) saved by its
    shipped profile and launched with --gpu-bind under an srun that starts one node's tasks."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "srun").write_text(FRONTIER_SRUN)
    (bindir / "srun").chmod(0o755)
    env = base_env(home, machines.frontier(tmp_path), path=f"{bindir}:/usr/bin:/bin")
    env.update(SLURM_TASKS_PER_NODE="8(x4)", SLURM_NTASKS="32", SLURM_NPROCS="32", SLURM_NTASKS_PER_NODE="8",
               SLURM_GPUS_ON_NODE="8", SLURM_GPUS_PER_NODE="8", SLURM_JOB_CPUS_PER_NODE="128(x4)")
    jobenv(["save", "-q"], env, check=True)
    p = jobenv(["launch", "--gpu-bind", "--nhosts", "1", "--", "sh", "-c",
                "echo $SLURM_LOCALID:$LOCAL_RANK:$ROCR_VISIBLE_DEVICES"], env)
    assert p.returncode == 0, p.stdout + p.stderr
    got = dict(line.split(":", 1) for line in p.stdout.split())
    assert got == {str(i): f"{i}:{d}" for i, d in enumerate([4, 5, 2, 3, 6, 7, 0, 1])}, p.stdout
    p = jobenv(["launch", "--dry-run", "--gpu-bind", "--nhosts", "1", "--", "true"], env)
    # the profile's line binds with srun's --gpu-bind closest: with --gpu-bind the wrapper binds, srun not
    assert "--gpus-per-node 8 --gpu-bind none /bin/sh" in p.stdout and "closest" not in p.stdout, p.stdout
    p = jobenv(["launch", "--dry-run", "--nhosts", "1", "--", "true"], env)
    assert "--gpu-bind closest" in p.stdout, p.stdout  # without it, srun's binding stays
    p = jobenv(["launch", "--dry-run", "--gpu-bind", "--nhosts", "1", "--", "true"], env)
    assert ("GPU binding on each host: local rank 0 -> ROCR_VISIBLE_DEVICES=4, 1 -> 5, 2 -> 2, 3 -> 3, 4 -> 6, "
            "5 -> 7, 6 -> 0, 7 -> 1\n") in p.stderr, p.stderr


# srun on one node, as far as a launch asks it: -n tasks, each with srun's task variables
FRONTIER_SRUN = """#!/bin/sh
n=1
while [ $# -gt 0 ]; do
    case $1 in
    -n) n=$2; shift 2 ;;
    -N|-c|--ntasks-per-node|--gpus-per-node|--gpu-bind) shift 2 ;;
    --*=*|--disable-status) shift ;;
    *) break ;;
    esac
done
i=0
while [ $i -lt $n ]; do
    SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=$n \
        SLURM_STEP_TASKS_PER_NODE=$n SLURM_STEP_NODELIST=frontier00001 "$@" &
    i=$((i + 1))
done
wait
"""


@pytest.mark.parametrize("name", sorted(PROFILE_BINDINGS))
def test_gpu_binding_per_profile(name):
    from jobenv.profiles import load as profiles

    prof = profiles.load_all({"XDG_CONFIG_HOME": "/nonexistent"})[name]
    mode = rankwrap.gpu_bind_cycle(profiles.gpu_bind_mode(prof))
    var, values = PROFILE_BINDINGS[name]
    for lr, value in enumerate(values):
        assert rankwrap.gpu_bind_value(mode, lr) == (var, value)
        env = {"PMI_RANK": str(lr), "PMI_SIZE": "16", "MPI_LOCALRANKID": str(lr), "MPI_LOCALNRANKS": "16",
               "JOBENV_GPU_BIND": mode}
        p = wrap(env, ["/bin/sh", "-c", f'printf %s "${{{var}}}"'])
        assert p.returncode == 0 and p.stdout == value, p.stderr


def test_profiles_without_binding_and_bad_modes():
    from jobenv.profiles import load as profiles

    profs = profiles.load_all({"XDG_CONFIG_HOME": "/nonexistent"})
    assert profiles.gpu_bind_mode(profs["slurm"]) == ""
    for bad in ("LD_PRELOAD:identity:4", "CUDA_VISIBLE_DEVICES:sideways:4", "CUDA_VISIBLE_DEVICES:identity:0",
                "CUDA_VISIBLE_DEVICES:tile:4", "ZE_AFFINITY_MASK:tile:6", "CUDA_VISIBLE_DEVICES:identity:x",
                "CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES:identity:010", "CUDA_VISIBLE_DEVICES:identity:4:",
                "ZE_AFFINITY_MASK:tile:6:02"):
        with pytest.raises(ValueError):
            rankwrap.gpu_bind_cycle(bad)
        p = wrap({"JOBENV_GPU_BIND": bad}, ["/bin/true"])
        assert p.returncode == 5 and "JOBENV_GPU_BIND" in p.stderr and p.stderr.count("\n") == 1, bad


@pytest.mark.parametrize("text,why", [
    ("gpu_bind: {var: LD_PRELOAD, map: identity}", "var"),
    ("gpu_bind: {var: CUDA_VISIBLE_DEVICES, map: sideways}", "map"),
    ("gpu_bind: {var: CUDA_VISIBLE_DEVICES, map: identity, devices: 0}", "devices"),
    ("gpu_bind: {var: ZE_AFFINITY_MASK, map: tile}", "tiles"),
    ("gpu_bind: {var: CUDA_VISIBLE_DEVICES, map: reverse, extra: 1}", "unknown"),
    ("gpu_bind: [CUDA_VISIBLE_DEVICES]", "mapping"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: []}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: 4}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: '4,5'}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [1, -1]}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [1, true]}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [1, '2']}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [1.0]}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [[1]]}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [" + "0, " * 65 + "]}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [10000]}", "order must be a list"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [3, 4]}", "order names device 4, beyond"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [1], devices: 1}", "order takes `order` only"),
    ("gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: identity, order: [1]}", "order is for map: order only"),
])
def test_profile_gpu_bind_is_validated(text, why):
    from jobenv.profiles import load as profiles

    base = "name: t\nscheduler: pbs\ngpus_per_host: 4\nlaunchers:\n  - argv: [mpiexec]\n"
    with pytest.raises(profiles.ProfileError, match=why) as exc:
        profiles.parse(base + text + "\n", "t.yaml")
    assert "\n" not in str(exc.value)


def test_profile_order_map_renders_as_the_wrappers_mode():
    from jobenv.profiles import load as profiles

    base = "name: t\nscheduler: slurm\nlaunchers:\n  - argv: [srun]\n"
    prof = profiles.parse(base + "gpu_bind: {var: ROCR_VISIBLE_DEVICES, map: order, order: [" +
                          ", ".join(["9999"] * 64) + "]}\n", "t.yaml")
    assert profiles.gpu_bind_mode(prof) == "ROCR_VISIBLE_DEVICES:order:" + ",".join(["9999"] * 64)


# ------------------------------------------------------------------ supervised path


def ledger(run, kind="end", rank=None):
    """The words of the run directory's `kind` lines (of `rank`), from its one host ledger."""
    (path,) = run.glob("host-*.ledger")
    return [line.split() for line in path.read_text().splitlines()
            if line.split()[0] == kind and (rank is None or line.split()[1] == str(rank))]


def start_line(run, timeout=20):
    """The words of the (one) rank's `start` line, once its wrapper wrote it."""
    deadline = time.monotonic() + timeout
    while not (list(run.glob("*.ledger")) and ledger(run, "start")):
        assert time.monotonic() < deadline, "the wrapper never wrote its start line"
        time.sleep(0.02)
    (start,) = ledger(run, "start")
    return start


def how(run, rank=None):
    """exit:N or signal:N of the (one) rank's `end` line."""
    (end,) = ledger(run, "end", rank)
    return end[2]


def test_run_dir_records_start_and_exit_and_log_dir_keeps_output(tmp_path):
    run, logs = tmp_path / "run", tmp_path / "logs"
    run.mkdir()
    logs.mkdir()
    env = {**HYDRA, "JOBENV_HOSTNAME": "n2", "JOBENV_RUN_DIR": str(run), "JOBENV_LOG_DIR": str(logs)}
    p = wrap(env, ["/bin/sh", "-c", 'echo "out $RANK $JOBENV_HOOK_RANK $JOBENV_LEDGER"; echo err >&2; exit 3'])
    assert p.returncode == 3 and p.stdout == ""
    assert (logs / "rank-3.log").read_text() == f"out 3 3 {run}/host-{HOST}.ledger\nerr\n"
    (start,) = ledger(run, "start")
    assert start[1] == "3" and all(w.isdigit() for w in start[2:6]) and abs(float(start[6]) - time.time()) < 60
    text = (run / f"host-{HOST}.ledger").read_text()
    assert text.endswith("\n") and ledger(run)[0][:3] == ["end", "3", "exit:3"]
    (run / f"host-{HOST}.ledger").unlink()
    p = wrap({**env, "JOBENV_LOG_DIR": "", "JOBENV_HOSTNAME": "n2.x y/z"}, ["/bin/sh", "-c", "kill -USR1 $$"])
    assert p.returncode == -signal.SIGUSR1  # the program's signal, re-raised
    # the kernel's node name, never JOBENV_HOSTNAME: a user's export reaches every host of the launch
    assert [p.name for p in run.glob("*.ledger")] == [f"host-{HOST}.ledger"]
    assert how(run) == f"signal:{int(signal.SIGUSR1)}"
    assert not [p for p in run.iterdir() if p.name.startswith("rank-")]  # no file per rank


def test_supervised_wrapper_forwards_term_and_keeps_stdin(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    env = {**HYDRA, "JOBENV_HOSTNAME": "n2", "JOBENV_RUN_DIR": str(run)}
    p = wrap(env, ["/bin/sh", "-c", "read x; echo got $x"], input="hello\n")
    assert p.stdout == "got hello\n"
    for f in run.iterdir():  # the host agent removes its lock as it ends; news/ is a directory
        shutil.rmtree(f, ignore_errors=True) if f.is_dir() else f.unlink(missing_ok=True)
    # Hydra (these are its variables) signals the rank's process group: the program, in its keeper's
    # group, gets SIGTERM itself (the keeper passes on none its group-signalling parent sent)
    proc = subprocess.Popen(["dash", WRAPPER, "sleep", "60"], start_new_session=True,
                            env={"PATH": "/usr/bin:/bin", "JOBENV_PYTHON": sys.executable, **env})
    start_line(run)
    time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=20) == -signal.SIGTERM
    assert how(run) == f"signal:{int(signal.SIGTERM)}"


@pytest.mark.parametrize("shell", sorted(set(SHELLS + POSIX_SHELLS)))
def test_exit_codes_above_128_are_exits_and_signals_are_signals(tmp_path, shell):
    """`wait` says 128+N for exit 128+N and for signal N alike: the record and the wrapper's
    own end follow what really happened, and an exit of 147..150 (128 + a stop signal) is
    an exit, not a reason to stop the wrapper."""
    cases = [("exit 143", 143, "exit:143"), ("exit 147", 147, "exit:147"), ("exit 148", 148, "exit:148"),
             ("exit 149", 149, "exit:149"), ("exit 150", 150, "exit:150"), ("exit 137", 137, "exit:137"),
             ("kill -TERM $$", -signal.SIGTERM, f"signal:{int(signal.SIGTERM)}"),
             ("kill -SEGV $$", -signal.SIGSEGV, f"signal:{int(signal.SIGSEGV)}"),
             ("sleep 143 & p=$!; kill $p; wait $p", 143, "exit:143")]
    how_ = how
    for i, (script, rc, want) in enumerate(cases):
        run = tmp_path / f"run{i}"
        run.mkdir()
        env = {**HYDRA, "JOBENV_HOSTNAME": "n2", "JOBENV_RUN_DIR": str(run)}
        try:
            p = wrap(env, ["/bin/sh", "-c", script], shell=shell, timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{script!r}: the wrapper never ended (stopped itself?)") from None
        assert (p.returncode, how_(run)) == (rc, want), (script, p.stderr)


PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def test_the_wrapper_runs_under_the_shell_that_is_bin_sh():
    """What the tests call bash-as-sh is how the launch starts the wrapper: as /bin/sh."""
    assert rankwrap.wrapper_argv() == [RUNS["bash-as-sh"][1], WRAPPER]


@pytest.mark.parametrize("shell", POSIX_SHELLS)
@pytest.mark.parametrize("argv,want", [
    (["/bin/true"], (0, "exit:0")),
    (["/bin/sh", "-c", "exit 3"], (3, "exit:3")),
    ([PY, "-c", "exit(143)"], (143, "exit:143")),
    (["/bin/sh", "-c", "kill -TERM $$"], (-15, "signal:15")),
], ids=["true", "exit3", "exit143", "sigterm"])
def test_a_wait_cut_short_by_a_trap_is_never_the_programs_status(tmp_path, shell, argv, want):
    """The old sh wrapper's `wait` could be cut short by a trapped SIGCHLD (bash as /bin/sh) and
    hedged (`either:N`) where the job table was gone: the keeper waits as the parent, so every
    round is exact under every /bin/sh."""
    got = []
    for i in range(6):
        run = tmp_path / f"r{i}"
        run.mkdir()
        p = wrap({"JOBENV_RUN_DIR": str(run)}, argv, shell=shell)
        got.append((p.returncode, how(run)))
    assert got == [want] * 6, got


@pytest.mark.parametrize("shell", [s for s in ("dash", "busybox") if s in RUNS])
def test_a_status_above_128_is_exact_without_a_writable_tmpdir(tmp_path, shell):
    """The old wrapper saved dash's job table in ${TMPDIR:-/tmp} and hedged (`either:15`) without
    it: the keeper needs no file to tell exit 143 from SIGTERM."""
    cases = [("kill -TERM $$", -signal.SIGTERM, "signal:15"), ("exit 143", 143, "exit:143"), ("exit 3", 3, "exit:3")]
    for i, (script, rc, want) in enumerate(cases):
        run = tmp_path / f"r{i}"
        run.mkdir()
        p = wrap({"JOBENV_RUN_DIR": str(run), "TMPDIR": str(tmp_path / "absent")}, ["/bin/sh", "-c", script],
                 shell=shell)
        assert (p.returncode, how(run)) == (rc, want), (script, p.stderr)


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_a_program_that_exits_on_the_forwarded_sigterm_is_an_exit(tmp_path, shell):
    """A program that catches the forwarded SIGTERM (checkpoint, exit 3): the signal cuts
    `wait` short with 128+15 and the shell may reap the child inside it (`kill -0` then
    finds nothing, the job table says Done(3)): that is exit 3, never signal 15."""
    prog = ("import os,signal,sys,time\n"
            "signal.signal(signal.SIGTERM, lambda *a: os._exit(3))\n"
            "open(sys.argv[1], 'w').close()\n"
            "time.sleep(30)\n")
    exe, argv0 = RUNS[shell]
    got = []
    for i in range(8):
        run, ready = tmp_path / f"run{i}", tmp_path / f"ready{i}"
        run.mkdir()
        env = {"PATH": "/usr/bin:/bin", "JOBENV_RUN_DIR": str(run), "JOBENV_PYTHON": sys.executable}
        proc = subprocess.Popen([argv0, WRAPPER, PY, "-c", prog, str(ready)], executable=exe, env=env,
                                stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while not ready.exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=30)
        finally:
            proc.kill()
            proc.wait()
        got.append((rc, how(run)))
    assert got == [(3, "exit:3")] * 8, got


@pytest.mark.parametrize("record", ["ledger", "agent", "log"])
def test_records_and_logs_are_new_files_never_a_planted_name(tmp_path, record):
    """A name that already exists in the run or log directory (a link to the user's
    ~/.bashrc, a FIFO, an old file) is refused (the ledger, a log) or left alone (the
    agent's lock: no agent), never written through."""
    run, logs = tmp_path / "run", tmp_path / "logs"
    run.mkdir()
    logs.mkdir()
    victim = tmp_path / "bashrc"
    victim.write_text("keep me\n")
    planted = logs / "rank-3.log" if record == "log" else run / f"host-{HOST}.ledger" if record == "ledger" \
        else run / f"agent-{HOST}"
    planted.symlink_to(victim)
    env = {**HYDRA, "JOBENV_HOSTNAME": "n2", "JOBENV_RUN_DIR": str(run), "JOBENV_LOG_DIR": str(logs)}
    want = (0, "") if record.startswith("agent") else (5, f"{planted} exists")
    p = wrap(env, ["/bin/sh", "-c", "echo owned"])
    assert victim.read_text() == "keep me\n"
    assert p.returncode == want[0] and want[1] in p.stderr and ("refusing" in p.stderr) == bool(want[0]), p.stderr
    def clean():
        for f in [*run.glob("host-*"), *logs.glob("rank-*")]:
            if f != planted:
                f.unlink(missing_ok=True)  # a host agent may rename its beat meanwhile
    planted.unlink()
    clean()
    os.mkfifo(planted)  # nobody reads it: opening it for writing would hang the rank
    p = wrap(env, ["/bin/sh", "-c", "echo owned"], timeout=20)
    assert p.returncode == want[0] and ("refusing" in p.stderr) == bool(want[0])
    planted.unlink()
    clean()
    planted.symlink_to(tmp_path / "nowhere")  # dangling: following it would create the target
    p = wrap(env, ["/bin/sh", "-c", "echo owned"])
    assert p.returncode == want[0] and not (tmp_path / "nowhere").exists(), p.stderr
    assert p.stderr.count("\n") == want[0] // 5 and ("refusing" in p.stderr) == bool(want[0]), p.stderr


def test_no_program_is_a_usage_error():
    p = wrap({}, [])
    assert p.returncode == 2 and p.stderr.startswith("jobenv: error: usage:") and p.stderr.count("\n") == 1


def test_plain_path_execs_without_forking(tmp_path):
    """No RUN_DIR, no LOG_DIR: the program replaces the wrapper (same pid), and strace (when
    present) sees no fork or clone on the way."""
    p = wrap({**HYDRA, "JOBENV_HOSTNAME": "n2"}, ["/bin/sh", "-c", "echo $$"])
    assert p.returncode == 0
    strace = shutil.which("strace")
    if strace:
        log = tmp_path / "trace"
        subprocess.run([strace, "-f", "-e", "trace=process", "-o", str(log), "dash", WRAPPER, "/bin/true"],
                       env={"PATH": "/usr/bin:/bin", **HYDRA}, check=True, timeout=60)
        assert not any(c in log.read_text() for c in ("clone(", "fork(", "vfork(")), log.read_text()


# ------------------------------------------------------------------ real launchers

BIN = Path(sys.executable).parent
CHECK = (f"{sys.executable} -c 'import os, json, jobenv.runtime as r; i = r.detect(); "
         "os.write(1, (json.dumps([os.environ[v] for v in (\"RANK\", \"LOCAL_RANK\", \"WORLD_SIZE\", \"LOCAL_WORLD_SIZE\", "
         "\"GROUP_RANK\", \"MASTER_ADDR\", \"MASTER_PORT\")] + [i.rank, i.local_rank, i.world_size, i.launcher, "
         "i.master_addr, i.master_port, os.environ.get(\"PMI_RANK\") or os.environ.get(\"OMPI_COMM_WORLD_RANK\") "
         "or os.environ.get(\"HOROVOD_RANK\")"
         "or os.environ.get(\"SLURM_PROCID\")]) + chr(10)).encode())'")


def check_ranks(stdout: str, n: int, launcher: str, own_rank: bool = True) -> list:
    """Every rank printed its RANK/LOCAL_RANK/WORLD_SIZE: a permutation, equal to detect() and
    to the launcher's own rank variable, one rendezvous address and port for all."""
    import json

    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("[")]
    assert len(rows) == n, stdout
    assert sorted(int(r[0]) for r in rows) == list(range(n))
    for r in rows:
        assert [int(r[0]), int(r[1]), int(r[2])] == r[7:10] and r[10] == launcher
        assert r[5] == r[11] and int(r[6]) == r[12]
        if own_rank:
            assert r[13] == r[0]
        assert int(r[2]) == n and int(r[1]) < int(r[3])
    assert len({(r[5], r[6]) for r in rows}) == 1
    return rows


def _clean_env(tmp_path, **extra):
    stale = ("SLURM_", "PBS_", "COBALT_", "PMI_", "OMPI_", "RANK", "JOBENV_", "MASTER_", "LOCAL_", "WORLD_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(stale)}
    env.update({"JOBENV_HOME": str(tmp_path / "store"), "PYTHONPATH": str(REPO), "OMPI_ALLOW_RUN_AS_ROOT": "1",
                "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,tcp",
                "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo", **extra})
    return env


def test_under_mpich_mpiexec(tmp_path):
    p = subprocess.run([mpich(), "-n", "4", *rankwrap.wrapper_argv(), "/bin/sh", "-c", CHECK],
                       env=_clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    check_ranks(p.stdout, 4, "mpich")


def test_under_open_mpi_mpirun(tmp_path):
    mpirun = need("mpirun.openmpi")  # Debian Open MPI by name: the MPICH wheel ships an `mpirun` too
    p = subprocess.run([mpirun, "--oversubscribe", "-n", "3", *rankwrap.wrapper_argv(), "/bin/sh", "-c", CHECK],
                       env=_clean_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    check_ranks(p.stdout, 3, "openmpi")


def test_under_torchrun_untouched(tmp_path):
    torchrun = BIN / "torchrun"
    if not torchrun.exists():
        pytest.skip("torch not installed")
    p = subprocess.run([str(torchrun), "--standalone", "--nproc-per-node", "2", "--no-python",
                        *rankwrap.wrapper_argv(), "/bin/sh", "-c", CHECK],
                       env=_clean_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    check_ranks(p.stdout, 2, "torchrun", own_rank=False)


def test_under_horovodrun(tmp_path):
    horovodrun = BIN / "horovodrun"
    if not horovodrun.exists():
        pytest.skip("horovod not installed")
    p = subprocess.run([str(horovodrun), "--gloo", "-np", "2", "-H", "localhost:2", "--network-interface", "lo",
                        *rankwrap.wrapper_argv(), "/bin/sh", "-c", CHECK],
                       env=_clean_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    check_ranks("\n".join(line.split("]<stdout>:", 1)[-1] for line in p.stdout.splitlines()), 2, "horovodrun")


@pytest.mark.parametrize("machine", ["polaris", "thetagpu"])
def test_pbs_and_cobalt_shaped_jobs(tmp_path, machine):
    """`jobenv save` in a PBS- or Cobalt-shaped job, the variables `get` exports, then one
    MPICH world over the job's hosts, each played on this machine by one MPMD segment that
    names its host: node ranks follow the record's host order on every rank."""
    from jobenv.restore import plan
    from jobenv.store import files as store

    home = tmp_path / "home"
    home.mkdir()
    job = getattr(machines, machine)(tmp_path)
    env = base_env(home, job)
    jobenv(["save", "--quiet"], env, check=True)
    path = next(p for p, _ in store.iter_records(env))
    rec = store.load(path)
    run = {**_clean_env(tmp_path), **job, **plan.build(rec, path, {}).set, "JOBENV_HOME": env["JOBENV_HOME"]}
    argv = [mpich(), "-launcher", "fork", "-hosts", "localhost"]
    for i, host in enumerate(rec.hosts):
        argv += ([":"] if i else []) + ["-n", "2", "-env", "JOBENV_HOSTNAME", host, *rankwrap.wrapper_argv(),
                                       "/bin/sh", "-c", CHECK]
    p = subprocess.run(argv, env=run, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    rows = check_ranks(p.stdout, 2 * len(rec.hosts), "mpich")
    for r in rows:  # ranks 2i, 2i+1 play host i; all really share this machine: loopback
        assert int(r[4]) == int(r[0]) // 2 and r[5] == "127.0.0.1"


TRAIN = """
import gc, os, torch, torch.distributed as dist
dist.init_process_group("gloo")  # env:// from the wrapper; no jobenv import
r, n = dist.get_rank(), dist.get_world_size()
model = torch.nn.Linear(4, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
torch.manual_seed(r)
for _ in range(3):
    opt.zero_grad()
    ddp(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()
t = torch.tensor([float(r + 1)])
dist.all_reduce(t)
w = model.weight.detach().clone()
dist.broadcast(w, 0)
assert t.item() == n * (n + 1) / 2 and torch.equal(w, model.weight.detach())
os.write(1, f"ok {os.environ['RANK']} {os.environ['LOCAL_RANK']} {os.environ['WORLD_SIZE']} {r} {n}\\n".encode())
# torch 2.13 aborts a rank at interpreter exit ("terminate called without an active exception",
# SIGABRT) in about 3 of 10 runs when a DDP model outlives destroy_process_group (6/20 here
# under the MPICH wheel's mpiexec without jobenv, 0/20 when the model is released and collected
# after it): the script does that; telling that teardown abort apart
# from a failure in launch's report is open resilience work.
dist.destroy_process_group()
del ddp, opt
gc.collect()
"""


@pytest.mark.parametrize("launcher", ["mpich", "openmpi"])
def test_plain_env_ddp_script_trains_under_the_wrapper(tmp_path, launcher):
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    argv = [mpich(), "-n", "3"] if launcher == "mpich" else [need("mpirun.openmpi"), "--oversubscribe", "-n", "3"]
    p = subprocess.run([*argv, *rankwrap.wrapper_argv(), sys.executable, str(script)],
                       env=_clean_env(tmp_path, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1"),
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = sorted(line.split()[1:] for line in p.stdout.splitlines() if line.startswith("ok "))
    assert rows == [[str(r), str(r), "3", str(r), "3"] for r in range(3)], p.stdout


@pytest.mark.parametrize("shell", [s for s in ("dash", "busybox") if s in RUNS])
def test_bash_variables_inherited_by_another_shell_are_not_trusted(tmp_path, shell):
    """dash and ash take EPOCHREALTIME, RANDOM and BASH_VERSION from the environment as plain
    variables: a clock that never moves would stamp every line with one time, and a wrapper
    that took itself for bash would skip its own job table (the rank's signal then hedged)."""
    run = tmp_path / "run"
    run.mkdir()
    env = {"JOBENV_RUN_DIR": str(run), "EPOCHREALTIME": "5.5", "RANDOM": "7", "BASH_VERSION": "5.2.15(1)-release"}
    before = time.time()
    p = wrap(env, ["/bin/sh", "-c", "kill -TERM $$"], shell=shell)
    assert (p.returncode, how(run)) == (-signal.SIGTERM, "signal:15"), p.stderr
    assert "jobs:" not in p.stderr  # bash's `jobs -pr`, an error in ash ("illegal option -r")
    (start,) = ledger(run, "start")
    assert before - 1 < float(start[6]) < time.time() + 1


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_a_program_killed_as_its_wrapper_gets_sigterm_is_named_by_its_own_signal(tmp_path, shell):
    """SIGKILL to the program, then at once SIGTERM to its wrapper (a teardown racing an OOM
    kill): the TERM trap cuts `wait` short with 143 while the program is already gone.  The
    record is the program's signal 9, never the trap's 15 (busybox ash said 15 in 5 of 12,
    freeing the job at `jobs -l` before its second `wait`; bash as sh said 17, its second `wait`
    cut short by a stale SIGCHLD after dropping the status); bash may say it lost the status."""
    exe, argv0 = RUNS[shell]
    ok = {(-signal.SIGKILL, "signal:9")}  # exact: the keeper is the program's parent
    got = []
    for i in range(8):
        run = tmp_path / f"r{i}"
        run.mkdir()
        proc = subprocess.Popen([argv0, WRAPPER, "sleep", "30"], executable=exe, stdin=subprocess.DEVNULL,
                                env={"PATH": "/usr/bin:/bin", "JOBENV_RUN_DIR": str(run),
                                     "JOBENV_PYTHON": sys.executable})
        try:
            os.kill(int(start_line(run)[4]), signal.SIGKILL)
            proc.send_signal(signal.SIGTERM)
            got.append((proc.wait(timeout=30), how(run)))
        finally:
            proc.kill()
            proc.wait()
    assert all(g in ok for g in got), got


def _online_cpus() -> int:
    """This host's CPUs as the kernel lists them (/sys/devices/system/cpu/online: 0-63,128-191)."""
    groups = Path("/sys/devices/system/cpu/online").read_text().strip().split(",")
    return sum(int(g.split("-")[1]) - int(g.split("-")[0]) + 1 if "-" in g else 1 for g in groups)


@pytest.mark.parametrize("shell", SHELLS)
def test_torchruns_other_variables_and_a_share_of_the_cpus(shell):
    """What torchrun also sets (ROLE_*, GROUP_WORLD_SIZE, TORCHELASTIC_*_RESTARTS, OMP_NUM_THREADS
    when unset), so code written for torchrun finds them; under torchrun itself nothing is added."""
    show = ["/bin/sh", "-c", 'printf "%s|" "$ROLE_RANK" "$ROLE_WORLD_SIZE" "$ROLE_NAME" "$GROUP_WORLD_SIZE" '
            '"$TORCHELASTIC_RESTART_COUNT" "$TORCHELASTIC_MAX_RESTARTS" "$OMP_NUM_THREADS"']
    env = {"PMI_RANK": "3", "PMI_SIZE": "5", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    share = max(1, _online_cpus() // 2)
    p = wrap({**env, "JOBENV_RESTART_COUNT": "1", "JOBENV_MAX_RESTARTS": "3"}, show, shell=shell)
    assert p.returncode == 0 and p.stdout == f"3|5|default|3|1|3|{share}|", p.stderr  # 5 ranks, 2 per host: 3 hosts
    assert wrap({**env, "OMP_NUM_THREADS": "7"}, show, shell=shell).stdout == "3|5|default|3|0|0|7|"  # yours stays
    assert wrap({**env, "OMP_NUM_THREADS": ""}, show, shell=shell).stdout == "3|5|default|3|0|0||"
    assert wrap({**env, "SLURM_CPUS_PER_TASK": "5"}, show, shell=shell).stdout.endswith("|5|")  # srun's -c
    assert wrap({**env, "SLURM_CPUS_PER_TASK": "0"}, show, shell=shell).stdout.endswith("|1|")
    assert wrap({**env, "SLURM_CPUS_PER_TASK": "x"}, show, shell=shell).stdout.endswith(f"|{share}|")
    torchrun = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "r"}
    assert wrap(torchrun, show, shell=shell).stdout == "|" * 7


def test_torch_takes_its_share_of_the_cpus_under_a_real_launcher(tmp_path):
    """2 ranks of real torch under the MPICH wheel's mpiexec: each uses its share of the host's
    CPUs (torch's default is all of them: 2 ranks on 2 CPUs ran 2 threads each)."""
    code = "import torch; print(torch.get_num_threads())"
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch not installed")
    p = subprocess.run([mpich(), "-n", "2", *rankwrap.wrapper_argv(), sys.executable, "-c", code],
                       env=_clean_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [str(max(1, _online_cpus() // 2))] * 2
