"""`launch --container` under srun on the real Slurm test cluster (tests/cluster/slurm.py): two
nodes, one rank each, every rank's program in the Debian image of tests/containerimage.py run by
Charliecloud's ch-run, each rank's keeper its parent on the node.

The ranks see Slurm's and jobenv's variables inside the image; a rank's exit code and its death
by signal are the launch's; ^C ends every rank on both nodes and leaves nothing running; the
selftest passes across the two nodes inside the image with and without jobenv in it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from conftest import REPO
from launchkit import RESTORE
from test_e2e_slurm import PYBIN, batch_job, cluster, fresh, jobs, store  # noqa: F401 (the Slurm test bed's fixtures)
from test_launch_plan_container_charliecloud import PROBE, _probes, image, image_with_jobenv  # noqa: F401

pytestmark = pytest.mark.e2e
USER = {"USER": os.environ.get("USER") or "root"}  # ch-run refuses to start without $USER


def _holding(marker: str, name: str = "") -> list:
    """(pid, name) of every process whose environment holds JOBENV_TEST_MARK=`marker` (srun passes
    the launch's environment to each rank's keeper, the keeper and ch-run to the program), less
    those not called `name` when given: on every node, as the nodes share this pid space."""
    want, found = f"JOBENV_TEST_MARK={marker}".encode(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            held = want in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if held and comm != "pytest" and (not name or comm == name):
            found.append((int(pid), comm))
    return found


def _ledgers(home: str) -> str:
    return "".join(p.read_text() for p in sorted(Path(home).glob("runs/*/*-a0/host-*.ledger")))


def test_ranks_in_the_image_under_srun_end_exactly(cluster, jobs, store, tmp_path, image, image_with_jobenv):  # noqa: F811
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "1")
    box = f"--container {image} --container-runtime charliecloud"

    p = fresh(cluster, "node1", "bash", f"{RESTORE} && cd {tmp_path} && jobenv launch {box} -- python3 -c \"{PROBE}\"",
              store, **USER)
    assert p.returncode == 0, p.stdout + p.stderr
    probes = _probes(p.stdout)
    assert [(q["env"]["RANK"], q["env"]["WORLD_SIZE"], q["env"]["LOCAL_RANK"]) for q in probes] == \
        [("0", "2", "0"), ("1", "2", "0")], probes
    assert all(q["inside"] and q["cwd"] == str(tmp_path) and q["env"]["JOBENV_CONTAINER"] == str(image)
               and q["jobenv"] == str(REPO / "jobenv" / "__init__.py") for q in probes), probes
    assert {q["env"]["MASTER_ADDR"] for q in probes} == {"node1"}, probes
    led = _ledgers(store)  # each node's keeper wrote its rank's start and end, the hook ran inside
    assert all(f"{w} {r} " in led for w in ("start", "hook", "end") for r in (0, 1)), led

    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch {box} -- /bin/sh -c "
              "'if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 1'", store, **USER)
    assert p.returncode == 3 and "rank 1 on node2 failed first: exit code 3" in p.stderr, p.stderr
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch {box} -- /bin/sh -c "
              "'if [ \"$RANK\" = 0 ]; then kill -9 $$; fi; sleep 5'", store, **USER)
    assert p.returncode == 137 and "rank 0 on node1 failed first: signal 9 (SIGKILL)" in p.stderr, p.stderr

    # ^C on node1's terminal: every rank on both nodes ends, the launch says 130
    marker = f"jobenv-srun-ctrl-c-{os.getpid()}"
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{PYBIN}:/usr/bin:/bin", "JOBENV_HOME": store,
           "PYTHONPATH": str(REPO), "JOBENV_TEST_MARK": marker, **USER}
    argv = cluster.on_node("node1", ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc", "-c",
                                     f"{RESTORE} && jobenv launch {box} -- /bin/sh -c 'echo up $RANK; exec sleep 300'"])
    before = _ledgers(store).count("start ")
    launch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        # both keepers started (the ledgers) and both programs exec'd into sleep inside the image
        while (_ledgers(store).count("start ") < before + 2 or len(_holding(marker, "sleep")) < 2) \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_holding(marker, "sleep")) == 2, _holding(marker)  # one rank's program on each node
        os.killpg(launch.pid, signal.SIGINT)  # a terminal's ^C: the whole foreground group
        out, err = launch.communicate(timeout=90)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
    assert launch.returncode == 130, out + err
    deadline = time.monotonic() + 15
    while _holding(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _holding(marker) == []

    # the selftest across both nodes, gloo over the nodes' eth0, in the image with and without jobenv
    pytest.importorskip("torch")
    site = sysconfig.get_paths()["purelib"]  # the test venv's torch, for the image's own python3 (both 3.11)
    for img in (image, image_with_jobenv):
        p = fresh(cluster, "node1", "bash", f"{RESTORE} && cd {tmp_path} && jobenv launch --container {img} "
                  f"--bind {sys.prefix}:{sys.prefix}:ro -- /usr/bin/python3 -m jobenv.selftest -q --framework torch "
                  "--timeout 120", store, **{**USER, "PYTHONPATH": f"{REPO}:{site}"})
        assert p.returncode == 0, p.stdout + p.stderr
        assert "jobenv selftest PASSED: 2 ranks on 2 hosts, torch via" in p.stdout, p.stdout
        assert f"in container {img} (charliecloud)" in p.stdout, p.stdout
