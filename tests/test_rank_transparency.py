"""A rank under `jobenv launch` is the rank the bare launcher starts: the probe (tests/rankprobe.py)
sees the same signal dispositions, blocked mask and handlers, thread count, process group and
session, stdin and descriptors, sys.modules, sys.path and sitecustomize, the same multiprocessing
spawn and fork behaviour.  The bare run uses the very argv `launch --dry-run` prints, less the
wrapper.  Documented differences: the variables of the torchrun contract and JOBENV_*; the program
runs one process down on the supervised path, its parent the rank keeper (jobenv/rank/keeper.py),
which holds the group and session the launcher gave the rank (the probe reports those of the rank
process, and that the program shares them); the hook's module stays as
sys.modules['sitecustomize'] when the site has none of its own."""
from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import REPO
from launchkit import BIN, RESTORE, fresh_env, save, shell, tools
from test_e2e_slurm import cluster, jobs, store  # noqa: F401 (fixtures)
from test_launch_e2e import HOST, OMPI_ENV, profile

pytestmark = pytest.mark.e2e
PROBE = Path(__file__).with_name("rankprobe.py")
DOCUMENTED = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "MASTER_ADDR",
              "MASTER_PORT", "PYTHONPATH", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "GROUP_WORLD_SIZE",
              "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "OMP_NUM_THREADS"}
HOOK = str(REPO / "jobenv" / "rankhook" / "sitecustomize.py")


def probes(d: Path) -> dict:
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in sorted(d.glob("probe-*.json"))}


def comparable(report: dict) -> dict:
    out = dict(report)
    out["env"] = [k for k in report["env"] if k not in DOCUMENTED and not k.startswith("JOBENV_")]
    if out.get("sitecustomize") == HOOK:  # documented: no site sitecustomize, the hook's module stays
        out["sitecustomize"] = None
        out["modules"] = [m for m in report["modules"] if m != "sitecustomize"]
    return out


def compare(tmp_path: Path, env: dict, nranks: int, extra_env: dict = None, run=None) -> None:
    """Bare (the dry-run's argv without the wrapper) vs the wrapper's plain path (that argv, no run
    directory) vs `launch` vs `launch --no-hook`, rank by rank;
    `run(script)` runs a restored shell's script (default: a fresh `env -i` bash here)."""
    if run is None:
        def run(script):
            return shell({**env, **(extra_env or {})}, script, cwd=tmp_path, timeout=240)
    p = run(f"{RESTORE} && launch --dry-run python3 {PROBE} OUT")
    assert p.returncode == 0, p.stderr
    argv = shlex.split(p.stdout.strip().splitlines()[-1])
    i = argv.index(str(REPO / "jobenv" / "rankwrap.sh"))
    bare = argv[:i - 1] + argv[i + 1:]
    # plain: the wrapper without a run or log directory maps the variables and execs the program
    runs = {"bare": shlex.join(bare), "plain": shlex.join(argv), "launch": f"launch python3 {PROBE} OUT",
            "no-hook": f"launch --no-hook python3 {PROBE} OUT"}
    got = {}
    for name, cmd in runs.items():
        out = tmp_path / name
        out.mkdir()
        p = run(f"cd {tmp_path} && {RESTORE} && {cmd.replace('OUT', str(out))} </dev/null")
        assert p.returncode == 0, (name, p.stdout[-2000:], p.stderr[-2000:])
        got[name] = probes(out)
        assert sorted(got[name]) == list(range(nranks)), (name, p.stderr)
    for name in ("plain", "launch", "no-hook"):
        for rank in range(nranks):
            want, have = comparable(got["bare"][rank]), comparable(got[name][rank])
            diff = {k: (want[k], have.get(k)) for k in want if want[k] != have.get(k)}
            assert not diff, json.dumps([name, rank, diff])
    assert got["bare"][0]["spawn_sys_exit"] == 7 and got["bare"][0]["fork_child"] == 3


def test_under_the_mpich_wheels_mpiexec(tmp_path):
    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin")
    save(env, "--ranks-per-host", "2")
    compare(tmp_path, env, 2)


def test_under_open_mpi_mpirun(tmp_path):
    if not Path("/usr/bin/mpirun.openmpi").exists():
        pytest.skip("Open MPI is not installed")
    home = tmp_path / "home"
    profile(home, "ompi-here", "cobalt", "[mpirun, --oversubscribe, -n, '{nranks}', -N, '{ppn}', --hostfile, "
            "'{hostfile}', -x, PATH, -x, LD_LIBRARY_PATH, -x, PYTHONPATH]")
    nodefile = tmp_path / "var/tmp/cobalt.10446"
    nodefile.parent.mkdir(parents=True)
    nodefile.write_text(f"{HOST}\n")
    env = fresh_env(home, f"{tools(tmp_path / 'bin', mpi=False)}:/usr/bin:/bin", **OMPI_ENV)
    save({**env, "COBALT_JOBID": "10446", "COBALT_NODEFILE": str(nodefile), "COBALT_JOBSIZE": "1",
          "COBALT_PARTNAME": HOST, "JOBENV_RANKS_PER_HOST": "2"}, "--profile", "ompi-here")
    compare(tmp_path, env, 2)


def test_under_torchrun(tmp_path):
    bindir = tools(tmp_path / "bin", mpi=False)
    sysdir = tmp_path / "sys"  # no MPI on PATH: the local profile falls back to torchrun
    sysdir.mkdir()
    for tool in ("bash", "sh", "env", "date", "cat", "hostname", "uname", "timeout"):
        real = shutil.which(tool)
        if real:
            (sysdir / tool).symlink_to(real)
    home = tmp_path / "home"
    home.mkdir()
    env = fresh_env(home, f"{bindir}:{sysdir}")
    save(env, "--ranks-per-host", "2")
    compare(tmp_path, env, 2)


def test_under_srun_on_the_slurm_cluster(cluster, jobs, store, tmp_path):  # noqa: F811
    """srun's tasks across two nodes of the test cluster, from a fresh shell on node1."""
    from test_e2e_slurm import batch_job, fresh

    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "1")
    compare(tmp_path, {}, 2, run=lambda script: fresh(cluster, "node1", "bash", script, store))
