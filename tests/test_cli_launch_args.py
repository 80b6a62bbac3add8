"""`launch` takes jobenv's options before the program, torchrun's spellings, more ranks than
slots on a local job, and refuses contradicting flags in one line: in real restored bash shells
under the MPICH wheel's mpiexec and Debian's Open MPI."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv, mpich, need
from jobenv.core.errors import BadInput
from jobenv.launch.plan import sizing
from jobenv.cli.launch_args import options_first
from launchkit import RESTORE, fresh_env, save, shell, tools
from jobenv.launch.types import Request

RANKS = "python3 -c 'import os, sys; print(\"R\", os.environ[\"RANK\"], os.environ[\"WORLD_SIZE\"], sys.argv[1:])'"
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}


@pytest.mark.parametrize("args,expect", [
    (["--", "-n", "4", "--", "python3"], ["-n", "4", "--", "python3"]),
    (["--", "-n", "4", "python3"], ["-n", "4", "python3"]),
    (["--", "python3", "-n", "4"], ["--", "python3", "-n", "4"]),
    (["-n", "4", "--", "python3", "--", "-x"], ["-n", "4", "--", "python3", "--", "-x"]),
    (["python3"], ["python3"]),
])
def test_options_first(args, expect):
    assert options_first(args) == expect


def _local_job(tmp_path: Path, path: str, **extra: str) -> dict:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = fresh_env(home, path, **extra)
    save(env, "--ranks-per-host", "2")
    return env


def _ranks(stdout: str) -> list:
    return sorted(line.split(maxsplit=3)[1:] for line in stdout.splitlines() if line.startswith("R "))


def test_options_before_the_program_in_a_restored_shell(tmp_path):
    mpich()
    env = _local_job(tmp_path, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    for form in (f"launch -n 1 -- {RANKS} x", f"launch -n 1 {RANKS} x"):
        p = shell(env, f"{RESTORE} && {form}")
        assert p.returncode == 0 and _ranks(p.stdout) == [["0", "1", "['x']"]], (form, p.stdout, p.stderr)
    p = shell(env, f"{RESTORE} && launch {RANKS} -n 4")  # after the program: the program's
    assert p.returncode == 0 and _ranks(p.stdout) == [[str(r), "2", "['-n', '4']"] for r in range(2)], p.stderr


RESTORES = {"zsh": ["-f", "-c", "source <(jobenv get) && {}"], "fish": ["--no-config", "-c", "jobenv get | source; and {}"],
            "dash": ["-c", 'eval "$(jobenv get --shell sh)" && {}']}


@pytest.mark.parametrize("shell_name", sorted(RESTORES))
def test_options_first_in_every_shell(tmp_path, shell_name):
    """The `launch` of zsh, fish and dash restores passes the options to jobenv, not the program."""
    mpich()
    exe = need(shell_name)
    env = _local_job(tmp_path, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    flags, script = RESTORES[shell_name][:-1], RESTORES[shell_name][-1]
    cmd = script.format(f"launch -n 1 -- {RANKS} y")
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], exe, *flags, cmd],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and _ranks(p.stdout) == [["0", "1", "['y']"]], (p.stdout, p.stderr)


@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_local_job_runs_more_ranks_than_slots(tmp_path, mpi):
    """`-n 4` on a job saved with 2 slots runs 4 ranks (Open MPI is told --oversubscribe)."""
    if mpi == "mpich":
        mpich()
        env = _local_job(tmp_path, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    else:
        if not shutil.which("mpirun.openmpi") or "orterun" not in str(Path("/usr/bin/mpiexec").resolve()):
            pytest.skip("Debian's Open MPI is not /usr/bin/mpiexec")
        env = _local_job(tmp_path, f"{tools(tmp_path / 'bin', mpi=False)}:/usr/bin:/bin", **OMPI_ENV)
    for form in ("launch -n 4", "launch --nproc-per-node 4", "launch --nproc_per_node=4 --nnodes 1"):
        p = shell(env, f"{RESTORE} && {form} {RANKS}")
        assert p.returncode == 0, (form, p.stdout, p.stderr)
        assert _ranks(p.stdout) == [[str(r), "4", "[]"] for r in range(4)], (form, p.stdout)


def test_only_a_local_job_oversubscribes_unasked():
    with pytest.raises(BadInput, match="needs 2 hosts"):
        sizing.choose(["n1"], 2, Request(nranks=4), "7")
    assert sizing.choose(["n1"], 2, Request(nranks=4), "7", oversubscribe=True).ppn == 4
    assert sizing.choose(["n1"], 2, Request(nranks=4, ppn=4), "7").ppn == 4  # asked explicitly


@pytest.mark.parametrize("flags,words", [
    (["--exclude-failed"], "--exclude-failed needs --retries N"),
    (["--ppn", "2", "--nproc-per-node", "4"], "--ppn 2 and --nproc-per-node 4 disagree"),
    (["--nhosts", "1", "--nnodes", "2"], "--nhosts 1 and --nnodes 2 disagree"),
    (["-n", "2", "--nproc-per-node", "4"], "-n 2 is fewer ranks than"),
    (["-n", "3", "--nnodes", "2", "--ppn", "2"], "-n 3 disagrees with --nhosts 2 x --ppn 2"),
    (["--hosts", "x3005c0s13b0n0", "--exclude", "x3005c0s13b0n0"], "--hosts and --exclude both name x3005c0s13b0n0"),
    (["--nnodes", "1:4"], "an elastic range is torchrun's"),
    (["--nproc-per-node", "gpu"], "pass a number, or auto"),
    # torchrun's rendezvous flags
    (["--rdzv-endpoint", "h:1", "--master-port", "2"], "--master-port 2 and --rdzv-endpoint 1 disagree"),
    (["--rdzv-endpoint", "h:x"], "--rdzv-endpoint's port"),
    (["--rdzv-endpoint", ":29500"], "expected HOST or HOST:PORT"),
    (["--master-port", "70000"], "--master-port"),
    (["--standalone", "--nnodes", "2"], "--standalone is this host alone"),
])
def test_conflicting_flags_refused_in_one_line(tmp_path, home, flags, words):
    env = base_env(home, machines.polaris(tmp_path))
    jobenv(["save", "-q"], env, check=True)
    p = jobenv(["launch", "--dry-run", *flags, "--", "true"], env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and words in p.stderr, p.stderr


def test_torchrun_aliases_size_like_ppn_and_nhosts(tmp_path, home):
    env = base_env(home, machines.polaris(tmp_path))
    jobenv(["save", "-q"], env, check=True)
    same = [jobenv(["launch", "--dry-run", *f, "--", "true"], env) for f in
            (["--ppn", "2", "--nhosts", "1"], ["--nproc-per-node", "2", "--nnodes", "1"],
             ["--nproc_per_node=2", "--nnodes=1:1"])]
    assert all(p.returncode == 0 for p in same), [p.stderr for p in same]
    assert len({p.stdout for p in same}) == 1 and " -n 2 -ppn 2 " in same[0].stdout, same[0].stdout


PORTS = "python3 -c 'import os; print(\"P\", os.environ[\"RANK\"], os.environ[\"MASTER_ADDR\"], os.environ[\"MASTER_PORT\"])'"


@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_torchrun_habits_with_no_saved_job(tmp_path, mpi):
    """Issue 33: with no saved job and no scheduler, `jobenv launch --nproc-per-node 2 train.py`
    runs 2 ranks on this host, as torchrun does, saying so in one line; --standalone is
    accepted; --master-port/--master_port and --rdzv-endpoint set what the ranks get.  As root
    under Open MPI (no OMPI_ALLOW_RUN_AS_ROOT given), launch passes Open MPI's consent and says so."""
    if mpi == "mpich":
        mpich()
        path = f"{tools(tmp_path / 'bin')}:/usr/bin:/bin"
        extra: dict = {}
    else:
        if not shutil.which("mpirun.openmpi") or "orterun" not in str(Path("/usr/bin/mpiexec").resolve()):
            pytest.skip("Debian's Open MPI is not /usr/bin/mpiexec")
        path = f"{tools(tmp_path / 'bin', mpi=False)}:/usr/bin:/bin"
        extra = {k: v for k, v in OMPI_ENV.items() if "ROOT" not in k}
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, path, **extra)
    (tmp_path / "train.py").write_text("import os\nprint('T', os.environ['RANK'], os.environ['WORLD_SIZE'], "
                                       "os.environ['LOCAL_RANK'], flush=True)\n")
    p = shell(env, "jobenv launch --nproc-per-node 2 train.py", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert sorted(ln for ln in p.stdout.splitlines() if ln.startswith("T ")) == ["T 0 2 0", "T 1 2 1"], p.stdout
    said = [ln for ln in p.stderr.splitlines() if "no saved job and no scheduler" in ln]
    assert len(said) == 1 and "launching on this host" in said[0], p.stderr
    root = [ln for ln in p.stderr.splitlines() if "running as root" in ln]
    assert len(root) == (1 if mpi == "openmpi" and os.geteuid() == 0 else 0), p.stderr
    # the record now exists: the next launch says nothing of it
    for flags, port in ((["--standalone", "--master-port", "29731"], "29731"), (["--master_port=29732"], "29732"),
                        (["--rdzv-endpoint", "127.0.0.1:29733"], "29733"), (["--rdzv_endpoint=localhost"], None)):
        p = shell(env, f"jobenv launch {' '.join(flags)} -n 2 -- {PORTS}", cwd=tmp_path)
        assert p.returncode == 0 and "no saved job" not in p.stderr, (flags, p.stdout, p.stderr)
        got = sorted(ln.split()[1:] for ln in p.stdout.splitlines() if ln.startswith("P "))
        assert [g[0] for g in got] == ["0", "1"] and len({tuple(g[1:]) for g in got}) == 1, (flags, got)
        assert got[0][1] == ("localhost" if "--rdzv_endpoint=localhost" in flags else "127.0.0.1"), got
        assert port is None or got[0][2] == port, (flags, got)


def test_no_fallback_inside_a_scheduler_job(tmp_path, home):
    """Inside an allocation with no record, launch still asks for `jobenv save` (exit 3)."""
    env = base_env(home, machines.polaris(tmp_path))
    p = jobenv(["launch", "--dry-run", "--", "true"], env)
    assert p.returncode == 3 and "jobenv save" in p.stderr and "torchrun" not in p.stderr, p.stderr


def test_standalone_in_a_job_of_two_hosts_is_this_host(tmp_path, home):
    """--standalone in a two-host job launches on this host alone; a host outside the job is refused."""
    env = base_env(home, machines.polaris(tmp_path))
    jobenv(["save", "-q"], env, check=True)
    second = machines.polaris(tmp_path)["PBS_NODEFILE"]
    host = Path(second).read_text().split()[1]
    p = jobenv(["launch", "--dry-run", "--standalone", "--", "true"], {**env, "JOBENV_HOSTNAME": host})
    assert p.returncode == 0 and f"hosts: 1, 4 ranks, 4 per host: {host.split('.')[0]}" in p.stderr, p.stderr
    p = jobenv(["launch", "--dry-run", "--standalone", "--", "true"], {**env, "JOBENV_HOSTNAME": "elsewhere"})
    assert p.returncode == 5 and "--standalone: this host (elsewhere) is not one of job" in p.stderr, p.stderr
