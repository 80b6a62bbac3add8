"""`python -m jobenv.selftest` under real launchers, 4 ranks each, gloo on loopback."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import machines
from conftest import REPO, base_env, jobenv, mpich, need

BIN = Path(sys.executable).parent
LOOPBACK = {"MASTER_ADDR": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo", "OMPI_MCA_btl_tcp_if_include": "lo",
            "OMPI_MCA_oob_tcp_if_include": "lo", "OMPI_MCA_btl": "self,tcp", "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMP_NUM_THREADS": "1"}
SELFTEST = [sys.executable, "-m", "jobenv.selftest"]


def need_module(name: str) -> None:
    import importlib.util

    if importlib.util.find_spec(name) is None:
        if os.environ.get("CI"):
            raise AssertionError(f"{name} is required in CI")
        pytest.skip(f"{name} not installed")


def run(argv, tmp_path, extra=None, timeout=240):
    stale = ("SLURM_", "PBS_", "COBALT_", "PMI_", "OMPI_COMM", "RANK", "JOBENV_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(stale)}
    env.update({**LOOPBACK, "JOBENV_HOME": str(tmp_path / "store"), "PYTHONPATH": str(REPO), **(extra or {})})
    t = time.time()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    p.seconds = time.time() - t
    return p


def report(tmp_path) -> dict:
    return json.loads((tmp_path / "report.json").read_text())


def check_report(rep: dict, n: int, launcher: str, framework: str = "torch") -> None:
    assert rep["ok"] and rep["world_size"] == n and rep["launcher"] == launcher and rep["framework"] == framework
    assert sorted(r for ranks in rep["ranks_per_host"].values() for r in ranks) == list(range(n))
    assert {"allreduce_sum", "allreduce_max", "broadcast", "allgather_hosts", "barrier", "loss_decreases",
            "params_identical"} <= set(rep["checks"])
    for phase in ("interpreter", "imports", "rendezvous", "first_collective", "first_step", "teardown"):
        assert phase in rep["phases"], phase
    assert rep["losses"][-1] < rep["losses"][0]
    assert [r["rank"] for r in rep["ranks"]] == list(range(n))


def test_mpich_mpiexec_torch(tmp_path):
    need_module("torch")
    p = run([mpich(), "-n", "4", *SELFTEST, "--json-file", "report.json"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    check_report(report(tmp_path), 4, "mpich")
    assert "PASSED" in p.stdout and "start-up phases" in p.stdout


def test_mpich_mpiexec_mpi4py(tmp_path):
    need_module("mpi4py")
    p = run([mpich(), "-n", "4", *SELFTEST, "--framework", "mpi", "--json-file", "report.json"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    check_report(report(tmp_path), 4, "mpich", "mpi")


def test_open_mpi_mpirun_torch(tmp_path):
    need_module("torch")
    orterun = need("mpirun.openmpi")
    p = run([orterun, "--oversubscribe", "-n", "4", *SELFTEST, "--json-file", "report.json"], tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    check_report(report(tmp_path), 4, "openmpi")


def test_torchrun(tmp_path):
    need_module("torch")
    torchrun = str(BIN / "torchrun")
    p = run([torchrun, "--standalone", "--nproc-per-node", "4", "--no-python", *SELFTEST, "--json-file", "report.json"],
            tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    check_report(report(tmp_path), 4, "torchrun")


def test_missing_rank_is_named_within_timeout(tmp_path):
    """Rank 2 exits before rendezvous: the run ends within --timeout, non-zero, naming rank 2 and its host."""
    need_module("mpi4py")
    env = base_env(tmp_path, machines.local(tmp_path), path=f"{BIN}:/usr/bin:/bin")
    env["JOBENV_HOSTNAME"] = socket.gethostname()
    jobenv(["save", "--quiet", "--ranks-per-host", "4"], env, check=True)
    rec = next((Path(env["JOBENV_HOME"]) / "jobs").glob("*.json"))
    script = f'if [ "$PMI_RANK" = 2 ]; then exit 0; fi; exec {sys.executable} -m jobenv.selftest --framework mpi --timeout 10'
    p = run([mpich(), "-n", "4", "sh", "-c", script], tmp_path, {"JOBENV_RECORD": str(rec)})
    assert p.returncode != 0
    assert p.seconds < 30
    assert f"ranks 2 (on {socket.gethostname()}) never checked in" in p.stderr, p.stderr


def test_taken_port_is_an_error_with_hint_not_a_hang(tmp_path):
    need_module("mpi4py")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        p = run([mpich(), "-n", "2", *SELFTEST, "--framework", "mpi", "--timeout", "20"], tmp_path,
                {"MASTER_PORT": str(port - 1)})  # the check-in listens on MASTER_PORT + 1
    finally:
        s.close()
    assert p.returncode != 0 and p.seconds < 40
    assert f"port {port} on 127.0.0.1 is already in use" in p.stderr and "MASTER_PORT" in p.stderr


def test_main_flow_local(tmp_path):
    """The README's main job: save -> get in a fresh shell -> launch the selftest."""
    need_module("torch")
    mpich()
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": f"{BIN}:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": str(REPO),
           **LOOPBACK}
    env.pop("MASTER_ADDR")
    script = (f"jobenv() {{ {sys.executable} -m jobenv \"$@\"; }}; jobenv save --quiet --ranks-per-host 2 && "
              f"env -i HOME=$HOME PATH=$PATH PYTHONPATH=$PYTHONPATH GLOO_SOCKET_IFNAME=lo bash --norc -c "
              f"'source <({sys.executable} -m jobenv get) && launch python3 -m jobenv.selftest --json-file report.json'")
    p = subprocess.run(["bash", "--norc", "-c", script], env=env, capture_output=True, text=True, cwd=tmp_path,
                       timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = report(tmp_path)
    check_report(rep, 2, "mpich")
    assert rep["phases"]["launch"]["max"] >= 0  # the launch function stamped JOBENV_LAUNCH_TIME


def test_json_flag_prints_the_report_and_tables_stay_unwrapped(tmp_path):
    """`--json` is a flag (as everywhere in jobenv); `--json-file FILE` writes; piped tables are plain."""
    p = run([mpich(), "-n", "2", *SELFTEST, "--json"], tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["ok"] and rep["world_size"] == 2
    p = run([mpich(), "-n", "2", *SELFTEST], tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "\x1b[" not in p.stdout and all(ln == ln.rstrip() for ln in lines)
    assert any(ln.startswith("start_to_first_allreduce") for ln in lines), p.stdout
    assert lines[-1].startswith("jobenv selftest PASSED: 2 ranks")


def test_json_file_honours_the_umask_and_a_link_to_a_file_is_one_error(tmp_path):
    """`--json-file` is a file the user names: jobenv.core.atomic.write_output's rules (issue 24)."""
    (tmp_path / "elsewhere.json").write_text("keep\n")
    (tmp_path / "link.json").symlink_to("elsewhere.json")
    old = os.umask(0o077)
    try:
        p = run([mpich(), "-n", "1", *SELFTEST, "--json-file", "report.json"], tmp_path)
    finally:
        os.umask(old)
    assert p.returncode == 0 and (tmp_path / "report.json").stat().st_mode & 0o777 == 0o600, p.stderr
    p = run([mpich(), "-n", "1", *SELFTEST, "--json-file", "link.json"], tmp_path)
    assert p.returncode == 4 and p.stdout.rstrip().splitlines()[-1].startswith("jobenv selftest PASSED"), p.stderr
    assert p.stderr.count("\n") == 1 and "cannot write --json-file link.json: " in p.stderr and \
        "name that file itself" in p.stderr and (tmp_path / "elsewhere.json").read_text() == "keep\n"
