"""Failures on the real 3-host Flux instance (tests/cluster/flux.py), as on Slurm
(tests/test_resilience_slurm.py, tests/test_launch_slurm.py): every process of the launch on
the job's second host killed (what a dead host leaves) names that host lost; a host that kills
its ranks is retired and the spare host takes its place (`flux run --requires=host:...`: Flux
reads no hostfile, its constraint names the hosts of the next attempt).

Run under `flock /tmp/jobenv-cluster.lock`.
"""
from __future__ import annotations

import re
import shlex
import time

import pytest

from jobenv.core.hostlist import expand
from cluster.e2e import KILLER, failed_over, kill_host, ledger
from test_launch_slurm import restart_cost
from test_e2e_flux import batch_job, cluster, fresh, jobs, launch_behind, store, wait_file  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e


def job_hosts(cluster, store) -> list:  # noqa: F811
    """The saved job's hosts, in its hostfile's order."""
    return fresh(cluster, "flux1", 'source <(jobenv get) && cat "$HOSTFILE"', store).stdout.split()


def test_every_process_of_the_second_host_killed_names_the_host(cluster, jobs, store, tmp_path):  # noqa: F811
    batch_job(cluster, jobs, store, tmp_path)
    second = job_hosts(cluster, store)[1]
    proc = launch_behind(cluster, "flux1", store, tmp_path, "sh -c 'sleep 300'")
    out = lambda: (tmp_path / "launch.out").read_text() if (tmp_path / "launch.out").exists() else ""  # noqa: E731
    try:
        run_dir = str(ledger(store, second, 2).parent)
        time.sleep(1.5)
        t = time.monotonic()
        procs = kill_host(cluster, second, run_dir)
        assert len(procs) >= 5, procs  # 2 wrappers, 2 programs (sh, sleep), the agent
        rc = wait_file(tmp_path / "launch.rc", 60, lambda: "the launch did not end: " + out())
        took = time.monotonic() - t
        proc.wait(timeout=30)
    finally:
        proc.kill()
    err = out()
    assert rc.strip() != "0", err
    assert re.search(rf"jobenv: host {second} lost: ranks 2,3 stopped reporting at \d\d:\d\d:\d\d\n", err), err
    assert re.search(rf"jobenv: host {second} lost: ranks 2,3 stopped reporting at \S+ first "
                     r"\(2 of 4 ranks failed; 2 were stopped after it\)", err), err
    assert took < 40, (took, err)
    print(f"\n{second} killed -> launch ended in {took:.1f} s\n{err}")


def test_a_host_that_kills_its_ranks_is_replaced_by_a_spare(cluster, jobs, store, tmp_path):  # noqa: F811
    batch_job(cluster, jobs, store, tmp_path, nodes=3)
    first, second, spare = job_hosts(cluster, store)
    prog, logs = tmp_path / "killer.py", tmp_path / "logs"
    prog.write_text(KILLER)
    p = fresh(cluster, "flux1", f"source <(jobenv get) && jobenv launch --spare-nodes 1 --retries 1 --log-dir {logs} "
              f"-- python3 {prog} {second} && jobenv show && echo == && jobenv launch --ppn 1 -- hostname && echo == && "
              "jobenv launch --dry-run -- true", store)
    out, err = p.stdout, p.stderr
    assert p.returncode == 0, out + err
    failed_over(err, logs, first, second, spare)
    shown, ran, dry = out.split("==\n")
    assert re.search(rf"retired host +{second}: signal 9 \(SIGKILL\) of rank [23], named", shown), out
    assert sorted(w for w in ran.split() if w in cluster.names) == sorted([first, spare]), out
    # the next launch of the job asks Flux for the hosts left by name
    asked = [w.split(":", 1)[1] for w in shlex.split(dry) if w.startswith("--requires=host:")]
    assert len(asked) == 1 and sorted(expand(asked[0])) == sorted([first, spare]), dry
    cost, own = restart_cost(store)
    print(f"\n{err}{out}\nrestart cost of one failover: {cost:.2f} s from the failure to attempt 2's first rank "
          f"({own:.2f} s from attempt 1's last rank end)")
