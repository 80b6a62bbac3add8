"""Failures on the real 3-host OpenPBS (tests/cluster/pbs.py), as on Slurm
(tests/test_resilience_slurm.py, tests/test_launch_slurm.py): every process of the launch on
the job's second host killed (what a dead host leaves) names that host lost; a host that kills
its ranks is retired and the spare host takes its place through the next attempt's hostfile.
Ranks start on the other hosts through TM (Hydra's `-launcher rsh` with test_e2e_pbs.tm_shim).

Run under `flock /tmp/jobenv-cluster.lock`.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from cluster.e2e import KILLER, failed_over, kill_host, ledger
from test_launch_slurm import restart_cost
from test_e2e_pbs import batch_job, cluster, jobs, store, tm_shim  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


def job_hosts(cluster, jobid: str) -> list:  # noqa: F811
    return [part.split("/")[0] for part in str(cluster.job(jobid)["exec_host"]).split("+")]


def wait_rc(tmp_path: Path, timeout: float, what: str) -> str:
    deadline = time.time() + timeout
    while not (tmp_path / "launch.rc").exists():
        out = tmp_path / "launch.out"
        assert time.time() < deadline, f"{what}: {out.read_text() if out.exists() else ''}"
        time.sleep(0.3)
    return (tmp_path / "launch.rc").read_text().strip()


def test_every_process_of_the_second_host_killed_names_the_host(cluster, jobs, store, tmp_path):  # noqa: F811
    body = (f"timeout -s KILL 150 jobenv launch --launcher-args '-launcher rsh -launcher-exec "
            f"{tm_shim(cluster, tmp_path)}' -- sh -c 'sleep 300' > {tmp_path}/launch.out 2>&1; "
            f"echo $? > {tmp_path}/launch.rc\nexec sleep 600")
    jobid = batch_job(cluster, jobs, store, tmp_path, body=body)
    second = job_hosts(cluster, jobid)[1]
    run_dir = str(ledger(store, second, 2).parent)
    time.sleep(1.5)
    t = time.monotonic()
    procs = kill_host(cluster, second, run_dir)
    assert len(procs) >= 5, procs  # 2 wrappers, 2 programs (sh, sleep), the agent, Hydra's proxy
    rc = wait_rc(tmp_path, 90, "the launch did not end")
    took = time.monotonic() - t
    err = (tmp_path / "launch.out").read_text()
    assert rc != "0", err
    assert re.search(rf"jobenv: host {second} lost: ranks 2,3 stopped reporting at \S+ first "
                     r"\(2 of 4 ranks failed; 2 were stopped after it\)", err), err
    print(f"\n{second} killed -> launch ended in {took:.1f} s\n{err}")


def test_a_host_that_kills_its_ranks_is_replaced_by_a_spare(cluster, jobs, store, tmp_path):  # noqa: F811
    prog, logs = tmp_path / "killer.py", tmp_path / "logs"
    prog.write_text(KILLER)
    tm = f"--launcher-args '-launcher rsh -launcher-exec {tm_shim(cluster, tmp_path)}'"
    second_host = "$(awk '!seen[$0]++' $PBS_NODEFILE | sed -n 2p)"  # exec_host's order
    body = (f"(jobenv launch --spare-nodes 1 --retries 1 --log-dir {logs} {tm} -- python3 {prog} {second_host} && "
            f"jobenv show && echo == && jobenv launch --ppn 1 {tm} -- hostname) > {tmp_path}/launch.out "
            f"2> {tmp_path}/launch.err; echo $? > {tmp_path}/launch.rc\nexec sleep 600")
    jobid = batch_job(cluster, jobs, store, tmp_path, nodes=3, body=body)
    first, second, spare = job_hosts(cluster, jobid)
    rc = wait_rc(tmp_path, 120, "the launches did not end")
    out, err = (tmp_path / "launch.out").read_text(), (tmp_path / "launch.err").read_text()
    assert rc == "0", out + err
    failed_over(err, logs, first, second, spare)
    assert re.search(rf"retired host +{second}: signal 9 \(SIGKILL\) of rank [23], named", out), out
    assert sorted(w for w in out.split("==")[-1].split() if w in cluster.names) == sorted([first, spare]), out
    cost, own = restart_cost(store)
    print(f"\n{err}{out}\nrestart cost of one failover: {cost:.2f} s from the failure to attempt 2's first rank "
          f"({own:.2f} s from attempt 1's last rank end)")


def test_a_lost_host_is_retired_and_the_spare_takes_its_place(cluster, jobs, store, tmp_path):  # noqa: F811
    """Every process of the launch on the second host killed, under --spare-nodes: Hydra kills
    the first host's ranks by SIGKILL to their groups, and that host's agent, alive, writes their
    `lost`; the host that went silent is the one retired, not the one whose agent spoke."""
    tm = f"--launcher-args '-launcher rsh -launcher-exec {tm_shim(cluster, tmp_path)}'"
    prog = "sh -c '[ $JOBENV_RESTART_COUNT = 1 ] && echo attempt 2 on $(hostname) || sleep 300'"
    body = (f"timeout -s KILL 150 jobenv launch --spare-nodes 1 --retries 1 {tm} -- {prog} > {tmp_path}/launch.out "
            f"2>&1; echo $? > {tmp_path}/launch.rc\nexec sleep 600")
    jobid = batch_job(cluster, jobs, store, tmp_path, nodes=3, body=body)
    first, second, spare = job_hosts(cluster, jobid)
    kill_host(cluster, second, str(ledger(store, second, 2).parent))
    rc = wait_rc(tmp_path, 90, "the launch did not end")
    err = (tmp_path / "launch.out").read_text()
    assert rc == "0", err
    assert re.search(rf"jobenv: host {second} lost: ranks 2,3 stopped reporting at \S+ first", err), err
    assert re.search(rf"jobenv: retired {second} \(heartbeat lost \(the rank vanished with its host\) of rank 2, "
                     rf"named; ledger \S+\): {spare} takes its place\njobenv: retrying \(2 of 2\)", err), err
    assert sorted(re.findall(r"attempt 2 on (\S+)", err)) == sorted([first, first, spare, spare]), err
