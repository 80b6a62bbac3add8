"""`jobenv stage` with a venv holding torch: the local job, and four nodes of the real
Slurm test cluster (run under `flock /tmp/jobenv-slurm.lock`).  Every rank must run the
interpreter and torch of its own node's copy."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, MachineLock
from test_e2e_slurm import cluster, jobs, store  # noqa: F401  (the Slurm test bed's fixtures)
from jobenv.store import record as record_mod
from jobenv.restore import shell
from jobenv.stage import restore
from jobenv.cli.stage import copy_name
from launchkit import train_reports, write_train

# every test here one at a time, after every other test (`alone`: .ci/run): they stage a torch venv
# (GBs written: an archive, a copy per node) through one stage cache (/tmp/jobenv-stage-cache); on a
# loaded machine the Slurm one's stage ran past its shell's 240 s (killed: SIGKILL) in CI runs
pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.alone]
CACHE = Path(os.environ.get("JOBENV_TEST_CACHE", "/tmp/jobenv-stage-cache"))
BASE_PY = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
PROBE = "import socket, sys, torch; print('RANK', socket.gethostname(), sys.executable, torch.__file__)"


@pytest.fixture(scope="session")
def torch_venv() -> Path:
    """A venv with torch inside it, installed as the suite's own is (.ci/install-torch.sh: the
    CPU build, or PyPI's less its GPU-only parts; pip's cache has the wheels), built once per
    cache dir, by one pytest process at a time (xdist workers)."""
    venv = CACHE / "torchvenv"
    CACHE.mkdir(parents=True, exist_ok=True)
    with MachineLock(str(CACHE) + ".lock"):
        if not (CACHE / "torchvenv.ok").exists():
            if subprocess.run([BASE_PY, "-c", "import ensurepip"], capture_output=True).returncode:
                pytest.skip("the base interpreter has no ensurepip")
            subprocess.run(["rm", "-rf", str(venv)], check=True)
            subprocess.run([BASE_PY, "-m", "venv", str(venv)], check=True)
            p = subprocess.run(["bash", str(REPO / ".ci" / "install-torch.sh")], capture_output=True, text=True,
                               env={**os.environ, "PYTHON": str(venv / "bin" / "python")})
            if p.returncode:
                pytest.skip(f"cannot install torch into a test venv: {(p.stdout + p.stderr)[-300:]}")
            (CACHE / "torchvenv.ok").touch()
    return venv


def restore_exports(store_dir: str, host: str) -> str:
    """What the restore plan adds for the staged copy (stage.restore_items), as sh lines."""
    recs = [p for p in (Path(store_dir) / "jobs").glob("*.json") if not p.name.startswith(".")]
    rec = record_mod.from_json(max(recs, key=lambda p: p.stat().st_mtime).read_text())
    sets, path, warns = restore.restore_items(rec, {}, host)
    assert not warns and path, (sets, path, warns)
    lines = [f"export {k}={shell.quote(v)}" for k, v in sets.items()]
    lines.append(f"export PATH={shell.quote(':'.join(path))}:\"$PATH\"")
    return "; ".join(lines)


def ranks(stdout: str):
    return [line.split()[1:] for line in stdout.splitlines() if line.startswith("RANK ")]


# ------------------------------------------------------------------ the local job
def test_local_job(tmp_path, torch_venv):
    import test_e2e_local as loc

    loc.need_stack()
    home = tmp_path / "home"
    home.mkdir()
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, body in {"jobenv": f'exec {sys.executable} -m jobenv "$@"',
                       "mpiexec": f'exec {Path(sys.executable).parent / "mpiexec"} "$@"'}.items():
        (tools / name).write_text(f"#!/bin/sh\n{body}\n")
        (tools / name).chmod(0o755)
    base = {"HOME": str(home), "PATH": f"{tools}:/usr/bin:/bin", "JOBENV_HOME": str(home / ".jobenv"),
            "PYTHONPATH": str(REPO), "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
    target = tmp_path / "node-local"

    def sh(script):
        return subprocess.run(["/usr/bin/env", "-i", *[f"{k}={v}" for k, v in base.items()], "bash", "--norc",
                               "--noprofile", "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path)

    p = sh(f"jobenv save --quiet --ranks-per-host 2 && jobenv stage --env {torch_venv} --to {target}")
    assert p.returncode == 0, p.stdout + p.stderr
    copy = target / copy_name(str(torch_venv))
    host = os.uname().nodename
    report = tmp_path / "report.json"
    train = write_train(tmp_path)  # a plain env:// DDP script, no jobenv import
    p = sh(f"source <(jobenv get) && {restore_exports(base['JOBENV_HOME'], host)} && launch python3 -c \"{PROBE}\" "
           f"&& launch python3 -m jobenv.selftest --timeout 120 --json-file {report} && launch python3 {train}")
    assert p.returncode == 0, p.stdout + p.stderr
    got = ranks(p.stdout)
    assert len(got) == 2 and all(exe.startswith(f"{copy}/") and tf.startswith(f"{copy}/") for _, exe, tf in got), got
    trained = train_reports(p.stdout)
    assert sorted(r["rank"] for r in trained) == [0, 1] and all(r["python"].startswith(f"{copy}/") for r in trained)
    assert trained[0]["params"] == trained[1]["params"] and trained[0]["sum"] == 1.0, trained
    rep = json.loads(report.read_text())
    assert rep["ok"] and rep["world_size"] == 2
    p = sh(f"jobenv stage --env {torch_venv} --to {target}")
    assert p.returncode == 0 and "(0 copied, 1 unchanged)" in p.stdout, p.stdout + p.stderr
    p = sh(f"jobenv stage --env {torch_venv} --to {target} --clean")
    assert p.returncode == 0 and not copy.exists(), p.stderr


# ------------------------------------------------------------------ four Slurm nodes
def test_slurm_four_nodes(tmp_path, torch_venv, cluster, jobs, store):  # noqa: F811
    from test_e2e_slurm import batch_job, fresh

    batch_job(cluster, jobs, store, tmp_path, "-N", "4", "--ntasks-per-node", "1")
    to = tmp_path / "local"
    (to / "node3").mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "tmpfs", str(to / "node3")], check=True)
    stage = f"jobenv stage --env {torch_venv} --to {to}/%h"
    try:
        p = fresh(cluster, "node1", "bash", stage, store)
        assert p.returncode == 1, p.stdout + p.stderr
        assert p.stderr.startswith("jobenv: error: node3: no space in ") and p.stderr.count("\n") == 1, p.stderr
        assert os.listdir(to / "node3") == []
    finally:
        subprocess.run(["umount", str(to / "node3")], check=True)
    name = copy_name(str(torch_venv))
    rec = json.loads(fresh(cluster, "node1", "bash", "jobenv show --json", store).stdout)
    assert sorted(rec["staged"]) == ["node1", "node2", "node4"]

    p = fresh(cluster, "node1", "bash", stage, store)  # node3 now has room; the others are current
    assert p.returncode == 0 and "(1 copied, 3 unchanged)" in p.stdout, p.stdout + p.stderr

    shim = " ".join(restore.rank_prefix(record_mod.from_dict(
        json.loads(fresh(cluster, "node2", "bash", "jobenv show --json", store).stdout))))
    assert shim, "per-host paths need the rank shim"
    report = tmp_path / "report.json"
    p = fresh(cluster, "node2", "bash", f"source <(jobenv get) && {restore_exports(store, 'node2')} && "
              f"launch {shim} python3 -c \"{PROBE}\" && "
              f"launch {shim} python3 -m jobenv.selftest --timeout 180 --json-file {report}", store)
    assert p.returncode == 0, p.stdout + p.stderr
    got = ranks(p.stdout)
    assert sorted(h for h, _, _ in got) == ["node1", "node2", "node3", "node4"], got
    for host, exe, tf in got:
        assert exe == f"{to}/{host}/{name}/bin/python3" and tf.startswith(f"{to}/{host}/{name}/lib/"), (host, exe, tf)
    assert json.loads(report.read_text())["ok"]

    marker = next((torch_venv / "lib").glob("python3*/site-packages")) / "jobenv_stage_test_marker.py"
    marker.write_text("CHANGED = True\n")
    try:
        p = fresh(cluster, "node1", "bash", stage, store)
        assert p.returncode == 0 and "(4 copied, 0 unchanged)" in p.stdout, p.stdout + p.stderr
        assert all((to / h / name / marker.relative_to(torch_venv)).exists() for h in cluster.nodes)
    finally:
        marker.unlink()

    p = fresh(cluster, "node4", "bash", stage + " --clean", store)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not any((to / h / name).exists() for h in cluster.nodes)
    rec = json.loads(fresh(cluster, "node1", "bash", "jobenv show --json", store).stdout)
    assert "staged" not in rec
