"""`jobenv save` run as a real command with environments shaped like real machines."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fsutil
import machines
from conftest import base_env, jobenv, record, store_files

PF = machines.POLARIS_SUFFIX
CONTRACT = {"schema_version", "scheduler", "jobid", "machine", "hosts", "nhosts", "gpus_per_host",
            "ngpus", "hostfile", "launch", "env", "created_at", "created_on"}


def save(tmp_path: Path, home: Path, builder, *args: str, path: str = None):
    env = base_env(home, builder(tmp_path), path=path)
    p = jobenv(["save", "--json", *args], env)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert CONTRACT <= set(rec)
    assert rec == record(env, rec["jobid"])  # show --json agrees with what save printed
    return rec, p.stderr, env


def hf(rec):
    return rec["hostfile"]


CASES = {
    "polaris-2": (lambda r: machines.polaris(r, 2), dict(
        scheduler="pbs", machine="polaris", nhosts=2, gpus_per_host=4, ranks_per_host=4,
        hosts=[f"x3006c0s13b0n0{PF}", f"x3006c0s19b0n0{PF}"],
        launch=lambda r: ["mpiexec", "--envall", "-n", "8", "-ppn", "4", "--hostfile", hf(r), "--cpu-bind", "depth", "-d", "16"])),
    "polaris-1": (lambda r: machines.polaris(r, 1), dict(
        machine="polaris", nhosts=1, ngpus=4,
        launch=lambda r: ["mpiexec", "--envall", "-n", "4", "-ppn", "4", "--hostfile", hf(r), "--cpu-bind", "depth", "-d", "16"])),
    "aurora": (machines.aurora, dict(
        machine="aurora", gpus_per_host=12, ngpus=24,
        launch=lambda r: ["mpiexec", "--envall", "-n", "24", "-ppn", "12", "--hostfile", hf(r), "--cpu-bind",
                          "list:1-8:9-16:17-24:25-32:33-40:41-48:53-60:61-68:69-76:77-84:85-92:93-100"])),
    "sunspot": (machines.sunspot, dict(machine="sunspot", gpus_per_host=12, jobid="98765.amn-0001")),
    "pbs-uneven": (machines.pbs_repeated, dict(
        machine="pbs", nhosts=6, hosts=["cn017", "cn003", "cn004", "cn005", "cn006", "cn009"],
        gpus_per_host=0, ranks_per_host=1)),
    "pbs-mpiprocs4": (machines.pbs_mpiprocs4, dict(
        machine="pbs", hosts=["cn001", "cn002"], ranks_per_host=4,
        launch=lambda r: ["mpiexec", "-n", "8", "-ppn", "4", "--hostfile", hf(r)])),
    "pbs-array": (machines.pbs_array, dict(jobid="123[3].pbs01.cluster.edu", hosts=["cn010", "cn011"])),
    "perlmutter": (machines.perlmutter, dict(
        scheduler="slurm", machine="perlmutter", hosts=["nid001234", "nid001235"], gpus_per_host=4,
        launch=lambda r: ["srun", "-N", "2", "-n", "8", "--ntasks-per-node", "4", "--gpus-per-node", "4",
                          "-c", "32", "--cpu-bind", "cores"])),
    "frontier-gap": (machines.frontier, dict(
        machine="frontier", hosts=["frontier00001", "frontier00002", "frontier00003", "frontier00007"],
        gpus_per_host=8, ranks_per_host=8)),
    "slurm-two-groups": (machines.slurm_two_groups, dict(
        machine="slurm", hosts=["gpu098", "gpu099", "gpu100", "gpu101", "cpu01", "cpu02"], ranks_per_host=2,
        launch=lambda r: ["srun", "-N", "6", "-n", "12", "--ntasks-per-node", "2"])),
    "slurm-multibracket": (machines.slurm_multibracket, dict(
        hosts=["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"])),
    "slurm-het": (machines.slurm_het, dict(hosts=["cpu1", "cpu2", "gpu01", "gpu02"])),
    "slurm-cpu-only": (machines.slurm_cpu_only, dict(gpus_per_host=0, ranks_per_host=64, ngpus=0)),
    "slurm-step": (machines.slurm_step, dict(hosts=["nid001234", "nid001235"], nhosts=2, ranks_per_host=4)),
    "slurm-step-outside": (machines.slurm_step_outside, dict(hosts=["nid001234", "nid001235"], nhosts=2)),
    "thetagpu": (machines.thetagpu, dict(
        scheduler="cobalt", machine="thetagpu", jobid="10446",
        hosts=["thetagpu13", "thetagpu12", "thetagpu19", "thetagpu18"], gpus_per_host=8,
        launch=lambda r: ["mpirun", "-n", "32", "-N", "8", "--hostfile", hf(r), "-x", "PATH", "-x", "LD_LIBRARY_PATH"])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_save_fixture(tmp_path, home, name):
    builder, expect = CASES[name]
    rec, err, _ = save(tmp_path, home, builder)
    for key, want in expect.items():
        want = want(rec) if callable(want) else want
        assert rec[key] == want, (key, rec[key])
    assert rec["nhosts"] == len(rec["hosts"])
    assert rec["ngpus"] == rec["nhosts"] * rec["gpus_per_host"]
    assert Path(rec["hostfile"]).read_text().split() == rec["hosts"]
    assert oct(Path(rec["hostfile"]).stat().st_mode & 0o777) == "0o600"
    assert "Traceback" not in err


def test_pbs_secrets_and_task_vars_are_not_saved(tmp_path, home):
    rec, _, _ = save(tmp_path, home, machines.polaris)
    assert "PBS_JOBCOOKIE" not in rec["env"] and "PBS_TASKNUM" not in rec["env"]
    assert rec["env"]["PBS_JOBID"].startswith("2024084.")
    assert rec["env"]["PBS_O_WORKDIR"] == "/home/alice/proj"
    assert "NCPUS" not in rec["env"] and "ENVIRONMENT" not in rec["env"]
    files = store_files(base_env(home))
    assert not any(b"4F1B2C8D9E0A7B6C" in data for data in files.values())


def test_uneven_slots_warn(tmp_path, home):
    _, err, _ = save(tmp_path, home, machines.pbs_repeated)
    assert "uneven slots per host [1, 28]" in err


def test_slurm_step_saves_the_job_not_the_step(tmp_path, home):
    rec, _, _ = save(tmp_path, home, machines.slurm_step)
    env = rec["env"]
    for gone in ("SLURM_STEP_ID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODELIST", "SLURM_NNODES",
                 "SLURM_NTASKS", "SLURM_SRUN_COMM_PORT", "SLURM_TASK_PID", "SLURMD_NODENAME"):
        assert gone not in env
    assert env["SLURM_JOB_NODELIST"] == "nid[001234-001235]" and env["SLURM_JOB_NUM_NODES"] == "2"
    rec, _, _ = save(tmp_path, home, machines.slurm_step_outside)
    assert rec["env"]["SLURM_JOB_NODELIST"] == "nid[001234-001235]" and rec["env"]["SLURM_JOB_NUM_NODES"] == "2"
    assert "SLURM_NODELIST" not in rec["env"] and "SLURM_STEP_ID" not in rec["env"]


def test_salloc_on_login_node_saves_and_warns(tmp_path, home):
    rec, err, _ = save(tmp_path, home, machines.slurm_salloc_login)
    assert rec["hosts"] == ["nid001234", "nid001235"]
    assert "outside job 12345678's nodes" in err and "login31" in err
    assert rec["warnings"]


def test_local_falls_back_to_torchrun_without_mpi(tmp_path, home):
    empty = tmp_path / "bin"
    empty.mkdir()
    rec, _, _ = save(tmp_path, home, machines.local, "--ranks-per-host", "3", path=str(empty))
    assert rec["scheduler"] == "local" and rec["hosts"] == ["workstation7"] and rec["jobid"] == "workstation7"
    assert rec["launch"] == ["torchrun", "--standalone", "--nnodes", "1", "--nproc-per-node", "3", "--no-python"]


def test_local_uses_mpiexec_when_present(tmp_path, home):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mpiexec").write_text("#!/bin/sh\n")
    (bindir / "mpiexec").chmod(0o755)
    rec, _, _ = save(tmp_path, home, machines.local, "--gpus-per-host", "2", path=str(bindir))
    assert rec["launch"] == ["mpiexec", "-n", "2"] and rec["gpus_per_host"] == 2


def test_gpu_override_env_and_mask(tmp_path, home):
    env = base_env(home, {**machines.slurm_cpu_only(tmp_path), "JOBENV_GPUS_PER_HOST": "2"})
    assert json.loads(jobenv(["save", "--json"], env, check=True).stdout)["gpus_per_host"] == 2
    env = base_env(home, {**machines.pbs_mpiprocs4(tmp_path), "CUDA_VISIBLE_DEVICES": "0,1,2"})
    rec = json.loads(jobenv(["save", "--json"], env, check=True).stdout)
    assert rec["gpus_per_host"] == 3 and rec["ranks_per_host"] == 3


def test_launcher_variables_do_not_fool_detection(tmp_path, home):
    pals = {"PALS_RANKID": "3", "PALS_NODEID": "1", "PMI_RANK": "3", "PMI_SIZE": "8",
            "PMI_SHARED_SECRET": "s3cr3t", "PMI_CONTROL_PORT": "1234", **machines.local(tmp_path)}
    rec, _, _ = save(tmp_path, home, lambda r: pals)
    assert rec["scheduler"] == "local" and rec["env"] == {}
    # Slurm's PBS-compatibility plugin: PBS_JOBID without PBS_NODEFILE is still Slurm
    env = {**machines.perlmutter(tmp_path), "PBS_JOBID": "12345678"}
    rec, _, _ = save(tmp_path, home, lambda r: env)
    assert rec["scheduler"] == "slurm" and "PBS_JOBID" not in rec["env"]


def test_stale_pbs_vars_lose_to_live_slurm(tmp_path, home):
    stale = machines.polaris(tmp_path)
    os.unlink(stale["PBS_NODEFILE"])  # that job ended: its nodefile is gone
    rec, _, _ = save(tmp_path, home, lambda r: {**stale, **machines.perlmutter(r)})
    assert rec["scheduler"] == "slurm" and not any(k.startswith("PBS_") for k in rec["env"])


def test_several_jobs_coexist(tmp_path, home):
    for b in (machines.polaris, machines.perlmutter, machines.thetagpu, machines.pbs_array):
        save(tmp_path, home, b)
    names = [n for n in store_files(base_env(home)) if n.endswith(".json")]
    assert len(names) == 4
    mode = (home / ".jobenv" / "jobs").stat().st_mode & 0o777
    assert mode == 0o700


def test_summary_and_quiet(tmp_path, home):
    env = base_env(home, machines.perlmutter(tmp_path))
    p = jobenv(["save"], env, check=True)
    for word in ("12345678", "perlmutter", "nid[001234-001235]", "srun -N 2 -n 8"):
        assert word in p.stdout
    assert jobenv(["save", "--quiet"], env, check=True).stdout == ""


def test_user_profile_overrides_and_is_listed(tmp_path, home):
    pdir = home / ".config" / "jobenv" / "profiles"
    pdir.mkdir(parents=True)
    (pdir / "mine.yaml").write_text(
        "name: mine\nscheduler: pbs\nmatch: {hosts: '^cn0'}\nvars: {extra: '--verbose'}\n"
        "launchers:\n  - argv: [mpiexec, '{extra}', -n, '{nranks}', -f, '{hostfile}']\n")
    rec, _, env = save(tmp_path, home, machines.pbs_mpiprocs4)
    assert rec["machine"] == "mine" and rec["launch"] == ["mpiexec", "--verbose", "-n", "8", "-f", rec["hostfile"]]
    listed = json.loads(jobenv(["profiles", "--json"], env, check=True).stdout)
    names = {p["name"] for p in listed}
    assert {"mine", "polaris", "aurora", "sunspot", "perlmutter", "frontier", "thetagpu", "pbs", "slurm", "cobalt", "local"} <= names
    rec2, _, _ = save(tmp_path, home, machines.pbs_mpiprocs4, "--profile", "pbs")
    assert rec2["machine"] == "pbs"


@pytest.mark.parametrize("var,builder", [("PBS_NODEFILE", machines.pbs_mpiprocs4), ("COBALT_NODEFILE", machines.thetagpu)])
@pytest.mark.parametrize("kind", fsutil.HOSTILE_FILES)
def test_nodefile_that_is_not_a_small_regular_file_is_one_line(tmp_path, home, var, builder, kind):
    """A nodefile named by the environment may be a FIFO (blocks), /dev/zero (never ends),
    a directory, a dangling link or huge: one short line, exit 5, at once, nothing written."""
    env = base_env(home, {**builder(tmp_path), var: fsutil.hostile_file(tmp_path / "evil", kind)})
    p = fsutil.jobenv_within(20, ["save"], env)
    lines = p.stderr.splitlines()
    assert p.returncode == 5 and len(lines) == 1 and lines[0].startswith("jobenv: error: "), p.stderr[:2000]
    assert len(p.stderr) < 1000 and "Traceback" not in p.stderr
    assert store_files(env) == {}


def test_save_records_no_variable_that_chooses_what_srun_runs(tmp_path, home):
    """srun reads SLURM_TASK_PROLOG, SLURM_EXPORT_ENV (`ALL,LD_PRELOAD=...`, which sbatch
    itself sets from --export), SLURM_WORKING_DIR... as its options: a restore never sets
    them (jobenv.schedulers.SHELL_ONLY), so a save does not record them (every restore would warn
    about them); the site's SLURM_CONF is still recorded."""
    def builder(root):
        return {**machines.perlmutter(root), "SLURM_TASK_PROLOG": "/tmp/p.sh", "SLURM_EXPORT_ENV": "NONE",
                "SLURM_WORKING_DIR": "/tmp/w", "SLURM_STDOUTMODE": "/tmp/o", "SLURM_CONF": "/nonexistent/slurm.conf"}

    rec, _, _ = save(tmp_path, home, builder)
    assert rec["env"]["SLURM_CONF"] == "/nonexistent/slurm.conf"
    assert not {"SLURM_TASK_PROLOG", "SLURM_EXPORT_ENV", "SLURM_WORKING_DIR", "SLURM_STDOUTMODE"} & set(rec["env"])


def test_nodefile_within_the_byte_limit_but_of_millions_of_lines_is_one_line_not_a_memory_error(tmp_path, home):
    """The byte limit (256 MiB) does not bound what is built from the bytes: splitlines() of
    64 MiB of newlines was a list of 67 million entries, and under a login node's `ulimit -v`
    (here 450 MB, where an ordinary save works) save died with a MemoryError traceback;
    `a\\n` * 128 Mi took minutes.  One `jobenv: error:` line, exit 5, at once."""
    import resource
    import subprocess
    import sys
    import time

    from conftest import REPO

    env = {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PYTHONPATH": str(REPO),
           "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PBS_JOBID": "77.srv", "PBS_NODEFILE": "/etc/hostname"}

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (450 << 20, 450 << 20))

    def save(nodefile_env):
        return subprocess.run([sys.executable, "-m", "jobenv", "save", "--quiet"], env={**env, **nodefile_env},
                              capture_output=True, text=True, timeout=120, preexec_fn=limit)

    ok = save({})
    assert ok.returncode == 0, ok.stderr  # the limit leaves room for an ordinary save
    for name, content in (("blank", b"\n" * (64 << 20)), ("one-host", b"a\n" * (32 << 20))):
        nodefile = tmp_path / name
        nodefile.write_bytes(content)
        start = time.monotonic()
        p = save({"PBS_JOBID": f"78{name}.srv", "PBS_NODEFILE": str(nodefile)})
        assert p.returncode == 5 and "Traceback" not in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr[-600:]
        assert p.stderr.startswith("jobenv: error: ") and "lines, more than jobenv's limit" in p.stderr
        assert time.monotonic() - start < 30, name


def test_nodefile_with_more_slots_per_host_than_the_limit_is_refused(tmp_path, home):
    """100,001 slots on one host: one line, exit 5, nothing written (save wrote a record
    that every later read refused as corrupt)."""
    env = base_env(home, machines.pbs_mpiprocs4(tmp_path))
    Path(env["PBS_NODEFILE"]).write_text("cn001\n" * 100_001 + "cn002\n")
    p = jobenv(["save"], env)
    assert p.returncode == 5 and p.stderr.count("\n") == 1, p.stderr
    assert "cn001 100,001 times" in p.stderr and "100,000 ranks per host" in p.stderr
    assert store_files(env) == {}
