"""jobenv on a real 3-host OpenPBS (tests/cluster/pbs.py): save in a batch job, restore in
a fresh shell on another host of the job, submit/status/cancel.

Each "fresh shell" is `env -i` inside a host's network and UTS namespaces, as after
`ssh pbsN`: nothing is inherited but HOME, PATH, JOBENV_HOME and PBS_CONF_FILE (a site's
login shell has pbs.conf at /etc; this cluster's is in its own directory).
Run under `flock /tmp/jobenv-cluster.lock`.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cluster import e2e
from cluster.e2e import PY, PYBIN, cluster_fixture, run_fresh
from cluster.pbs import PBSCluster, available
from conftest import REPO

pytestmark = pytest.mark.e2e
store = e2e.store  # the fixture
cluster = cluster_fixture(PBSCluster, available, "OpenPBS cluster")


@pytest.fixture
def jobs(cluster):
    ids = []
    yield ids
    for j in ids:
        cluster.run(cluster.server, ["qdel", "-W", "force", j], check=False)
    for j in ids:
        try:
            cluster.wait_state(j, {"F"}, timeout=60)
        except (TimeoutError, RuntimeError, StopIteration):
            pass


def shell_env(cluster, host, store, **extra):
    return {"HOME": os.environ.get("HOME", "/root"), "PATH": f"{PYBIN}:{cluster.exec}/bin:/usr/bin:/bin",
            "JOBENV_HOME": store, "PYTHONPATH": str(REPO), "PBS_CONF_FILE": str(cluster.conf(host)),
            "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", **extra}


def fresh(cluster, host, script, store, **extra):
    """Run SCRIPT in a fresh bash on HOST."""
    return run_fresh(cluster, host, shell_env(cluster, host, store, **extra), script)


def tm_shim(cluster, tmp_path) -> str:
    """Hydra's `-launcher rsh` runs `RSH HOST '"proxy" args'` for a remote shell to parse (the
    proxy's path in double quotes); pbs_tmrsh execs its arguments as they are, so Hydra
    fails "Launch proxy failed".  This shim hands the line to sh on the other host through TM."""
    shim = tmp_path / "tmrsh-sh"
    shim.write_text(f'#!/bin/sh\nh=$1; shift\nexec {cluster.exec}/bin/pbs_tmrsh "$h" /bin/sh -c "$*"\n')
    shim.chmod(0o755)
    return str(shim)


def batch_job(cluster, jobs, store, tmp_path, nodes=2, ppn=2, body="exec sleep 600", qsub=()) -> str:
    """qsub a script that runs `jobenv save` and then `body`; returns once the save is done."""
    marker = tmp_path / f"saved-{len(jobs)}"
    script = tmp_path / f"job-{len(jobs)}.sh"
    script.write_text(f"#!/bin/bash\nexport JOBENV_HOME={store} PYTHONPATH={REPO} PBS_CONF_FILE={cluster.conf('pbs1')}\n"
                      f"export PATH={PYBIN}:{cluster.exec}/bin:$PATH\n"
                      f"{PY} -m jobenv save --quiet 2> {marker}.err; touch {marker}\n{body}\n")
    jobid = cluster.qsub("-l", f"select={nodes}:ncpus={ppn}:mpiprocs={ppn}", "-l", "place=scatter", *qsub,
                         "-o", str(tmp_path / "job.out"), "-j", "oe", str(script))
    jobs.append(jobid)
    cluster.wait_state(jobid, {"R"})
    deadline = time.time() + 90
    while not marker.exists():
        assert time.time() < deadline, "jobenv save did not finish in the job"
        time.sleep(0.2)
    err = Path(f"{marker}.err").read_text()
    assert "Traceback" not in err, err
    return jobid


def test_batch_job_saved_and_restored_in_a_fresh_shell_on_another_host(cluster, jobs, store, tmp_path):
    jobid = batch_job(cluster, jobs, store, tmp_path)
    exec_host = str(cluster.job(jobid)["exec_host"])
    hosts = [part.split("/")[0] for part in exec_host.split("+")]
    show = 'source <(jobenv get) && echo "$PBS_JOBID|$JOBENV_JOBID|$NHOSTS|$NRANKS" && cat "$HOSTFILE"'
    p = fresh(cluster, "pbs2", show, store)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"{jobid}|{jobid}|2|4", (lines, exec_host)
    assert lines[1:] == hosts and len(set(hosts)) == 2, (lines, exec_host)  # one line per host, in exec_host order


def test_save_job_from_outside_reads_the_running_job(cluster, jobs, store, tmp_path):
    """`save --job` of a running job that never saved: hosts from exec_host, the owner from
    euser (root is a manager here) or Job_Owner (what an ordinary user sees)."""
    script = tmp_path / "plain.sh"
    script.write_text("#!/bin/sh\nexec sleep 600\n")
    jobid = cluster.qsub("-l", "select=2:ncpus=1", "-l", "place=scatter", "-o", str(tmp_path / "plain.out"),
                         "-j", "oe", str(script))
    jobs.append(jobid)
    cluster.wait_state(jobid, {"R"})
    p = fresh(cluster, "pbs1", f"jobenv save --scheduler pbs --job {jobid.split('.')[0]} --json", store)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["jobid"] == jobid and len(rec["hosts"]) == 2 and rec["provenance"]["how"] == "outside"


def test_submit_places_each_chunk_on_its_own_host_then_status_and_cancel(cluster, store, tmp_path, jobs):
    tm = f"--launcher-args='-launcher rsh -launcher-exec {tm_shim(cluster, tmp_path)}'"
    p = fresh(cluster, "pbs1", f"cd {tmp_path} && jobenv submit --profile pbs --nodes 2 --time 10 {tm} -- sleep 600",
              store)
    assert p.returncode == 0, p.stderr
    jobid = p.stdout.strip().splitlines()[-1]
    jobs.append(jobid)
    cluster.wait_state(jobid, {"R"})
    exec_host = str(cluster.job(jobid)["exec_host"])
    assert len({part.split("/")[0] for part in exec_host.split("+")}) == 2, exec_host  # place=scatter
    st = fresh(cluster, "pbs1", f"jobenv status -j {jobid}", store)
    assert st.returncode == 0 and jobid.split(".")[0] in st.stdout, st.stdout + st.stderr
    c = fresh(cluster, "pbs1", f"jobenv cancel -j {jobid}", store)
    assert c.returncode == 0, c.stderr
    cluster.wait_state(jobid, {"F"}, timeout=60)


def test_selftest_across_hosts_through_tm_inside_the_job(cluster, jobs, store, tmp_path):
    """MPICH Hydra (the venv's mpiexec, the generic PBS profile's launcher) starts its proxies
    on the other hosts through PBS's TM (`pbs_tmrsh`, through `tm_shim`): no ssh between hosts."""
    report = tmp_path / "report.json"
    body = (f"source <(jobenv get) && launch --launcher-args '-launcher rsh -launcher-exec {tm_shim(cluster, tmp_path)}' "
            f"python3 -m jobenv.selftest --timeout 120 --json-file {report} > {tmp_path}/selftest.out 2>&1; "
            f"echo $? > {tmp_path}/selftest.rc\nexec sleep 600")
    batch_job(cluster, jobs, store, tmp_path, body=body)
    deadline = time.time() + 200
    while not (tmp_path / "selftest.rc").exists():
        assert time.time() < deadline, "the selftest did not finish"
        time.sleep(0.5)
    out = (tmp_path / "selftest.out").read_text()
    assert (tmp_path / "selftest.rc").read_text().strip() == "0", out
    rep = json.loads(report.read_text())
    assert rep["ok"] and rep["world_size"] == 4 and len(rep["ranks_per_host"]) == 2, rep["ranks_per_host"]


def all_jobs(cluster) -> list:
    """Every job the server knows, finished ones too (job_history_enable)."""
    out = cluster.run(cluster.server, ["qstat", "-x", "-f", "-F", "json"]).stdout
    return sorted(json.loads(out).get("Jobs", {}))


def wait_for(path: Path, timeout: float, what: str) -> str:
    deadline = time.time() + timeout
    while not path.exists() or not path.read_text().endswith("\n"):
        assert time.time() < deadline, what
        time.sleep(0.3)
    return path.read_text()


def attempt_program(tmp_path) -> Path:
    """A rank that notes `JOBENV_RESTART_COUNT PBS_JOBID` per attempt, then waits; TERM or USR1 end it."""
    prog = tmp_path / "attempt.py"
    prog.write_text("import os, signal, sys, time\n"
                    "for s in (signal.SIGTERM, signal.SIGUSR1):\n"
                    "    signal.signal(s, lambda *_: sys.exit(0))\n"
                    f"with open({str(tmp_path / 'attempts')!r}, 'a') as f:\n"
                    "    f.write(os.environ['JOBENV_RESTART_COUNT'] + ' ' + os.environ['PBS_JOBID'] + '\\n')\n"
                    "time.sleep(600)\n")
    return prog


def wait_lines(path: Path, n: int, timeout: float, why) -> list:
    deadline = time.time() + timeout
    lines = path.read_text().splitlines() if path.exists() else []
    while len(lines) < n:
        if time.time() > deadline:
            pytest.fail(f"{lines}\n{why()}")
        time.sleep(0.5)
        lines = path.read_text().splitlines() if path.exists() else []
    return lines


def test_requeue_launch_across_a_real_qrerun_then_qdel_never_duplicates_the_job(cluster, jobs, store, tmp_path):
    """`launch --requeue` as the batch script's last line.  A real `qrerun` (PBS reruns the job
    itself: R with substate 60 while the MoM sends SIGTERM) -> jobenv neither requeues nor
    resubmits, and attempt 2 runs under the same id with JOBENV_RESTART_COUNT=1 (run_count 2).
    Then `qdel` (R with substate 41/42 while the SIGTERM is delivered) -> nothing comes back."""
    prog = attempt_program(tmp_path)
    err = tmp_path / "launch.err"
    before = set(all_jobs(cluster))
    jobid = batch_job(cluster, jobs, store, tmp_path, nodes=1, ppn=1,
                      body=f"exec jobenv launch --requeue --grace 3 -- python3 {prog} 2>> {err}")
    attempts = tmp_path / "attempts"
    assert wait_for(attempts, 60, "attempt 1 did not start") == f"0 {jobid}\n"
    cluster.run(cluster.server, ["qrerun", jobid])
    lines = wait_for(attempts, 120, "attempt 2 did not start").splitlines()
    deadline = time.time() + 120
    while len(lines) < 2:
        assert time.time() < deadline, (lines, err.read_text() if err.exists() else "")
        time.sleep(0.5)
        lines = attempts.read_text().splitlines()
    said = err.read_text()
    assert lines == [f"0 {jobid}", f"1 {jobid}"], said
    assert cluster.job(jobid)["run_count"] == 2
    assert "by pbs itself" in said and "neither requeues nor resubmits" in said, said
    assert "requeueing" not in said and "resubmitting" not in said, said
    cluster.run(cluster.server, ["qdel", jobid])
    cluster.wait_state(jobid, {"F"}, timeout=60)
    deadline = time.time() + 30
    while said.count("pre-empted:") < 2 or not said.rstrip().endswith("brought back (for a warning before the limit "
                                                                       "ask for one: sbatch --signal=B:USR1@90, qsig -s USR1)"):
        if time.time() > deadline:
            break
        time.sleep(0.5)
        said = err.read_text()
    assert "no longer running" in said and "resubmitting" not in said and "requeueing" not in said, said
    time.sleep(6)  # a resubmission would have been queued by now (scheduler_iteration 5)
    assert set(all_jobs(cluster)) - before == {jobid}, said
    assert attempts.read_text().splitlines() == [f"0 {jobid}", f"1 {jobid}"], said


def test_requeue_refused_resubmits_the_kept_script_once_and_tells_it_by_qsub_v(cluster, jobs, store, tmp_path):
    """`qsig -s USR1` (a warning: the job runs on) to a job PBS may not rerun (`-r n`): qrerun
    is refused, so jobenv resubmits the kept copy once; qsub passes no environment, so the
    count goes by `-v` and the new job's rank sees JOBENV_RESTART_COUNT=1."""
    prog = attempt_program(tmp_path)
    err = tmp_path / "launch.err"
    before = set(all_jobs(cluster))
    jobid = batch_job(cluster, jobs, store, tmp_path, nodes=1, ppn=1, qsub=("-r", "n"),
                      body=f"exec jobenv launch --requeue --grace 3 -- python3 {prog} 2>> {err}")
    attempts = tmp_path / "attempts"
    said = lambda: (err.read_text() if err.exists() else "") + str(sorted(os.listdir("/var/tmp")))  # noqa: E731
    wait_lines(attempts, 1, 60, said)
    cluster.run(cluster.server, ["qsig", "-s", "USR1", jobid])
    lines = wait_lines(attempts, 2, 120, said)
    new = sorted(set(all_jobs(cluster)) - before - {jobid})
    jobs.extend(new)
    assert len(new) == 1 and lines == [f"0 {jobid}", f"1 {new[0]}"], (lines, new, said())
    assert "resubmitting: qsub -l select=1:ncpus=1:mpiprocs=1 -l place=scatter -r n" in said(), said()
    assert "-v JOBENV_RESUBMITS=1" in said() and f"job {jobid} resubmitted" in said(), said()


@pytest.mark.parametrize("where", ["pbs1", "pbs2"])
def test_kill_from_a_fresh_shell_ends_every_rank(cluster, jobs, store, tmp_path, where):
    """`jobenv kill --job` from a fresh shell on the launch's host (pbs1: its supervisor gets
    SIGTERM too) or another of a 4-rank launch across 2 hosts (Hydra through TM): every rank
    ended and recorded, on both hosts, and the launch itself ends.  Hydra ends the ranks left
    after the first SIGTERM'd one by SIGKILL to each rank's process group: those keepers write
    no `end`, and their host's agent, in its own session, writes their `lost` (it was in one
    of those groups once, and died with it: 1 in 4 runs here, 5 in 6 in the issue)."""
    import subprocess

    mark = f"jobenv-kill-test-{os.getpid()}"
    (tmp_path / "sleeper.py").write_text("import time\ntime.sleep(300)\n")
    body = (f"jobenv launch --launcher-args '-launcher rsh -launcher-exec {tm_shim(cluster, tmp_path)}' "
            f"-- python3 {tmp_path}/sleeper.py {mark} > {tmp_path}/launch.out 2>&1; echo $? > {tmp_path}/launch.rc\n"
            "exec sleep 600")
    jobid = batch_job(cluster, jobs, store, tmp_path, body=body)
    deadline = time.time() + 90
    while len(subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split()) < 4:
        assert time.time() < deadline, "the 4 ranks did not start"
        time.sleep(0.3)
    t = time.monotonic()
    p = fresh(cluster, where, f"jobenv kill --job {jobid}", store)
    took = time.monotonic() - t
    out = (tmp_path / "launch.out").read_text() if (tmp_path / "launch.out").exists() else ""
    out += "".join(f"\n{f}:\n{f.read_text()}" for f in sorted(Path(store).glob("runs/*/*/host-*")))
    out += "\nrun directory: " + " ".join(sorted(f.name for f in Path(store).glob("runs/*/*/*")))
    out += "\n" + subprocess.run(["ps", "-eo", "pid,ppid,sid,pgid,stat,lstart,args"], capture_output=True,
                                  text=True).stdout
    assert p.returncode == 0, p.stdout + p.stderr + out
    assert "ended 4 rank(s) (0; 1; 2; 3) on 2 host(s)" in p.stderr, p.stderr + out
    print(f"\njobenv kill took {took:.1f} s")
    left = e2e.left_running(mark, but=" launch ")
    assert not left, f"outlived jobenv kill: {left}"
    deadline = time.time() + 30
    while not (tmp_path / "launch.rc").exists():
        assert time.time() < deadline, "the launch did not end"
        time.sleep(0.3)


def test_a_rank_killed_on_the_second_host_is_named_with_its_host(cluster, jobs, store, tmp_path):
    """Rank 3 (the second host's second slot) killed with SIGKILL: the launch names it with
    that host's name, as on Slurm (tests/test_resilience_slurm.py)."""
    import re

    prog = "sh -c 'if [ $RANK = 3 ]; then sleep 3; kill -9 $$; fi; sleep 300'"
    body = (f"timeout -s KILL 150 jobenv launch --launcher-args '-launcher rsh -launcher-exec "
            f"{tm_shim(cluster, tmp_path)}' -- {prog} > {tmp_path}/launch.out 2>&1; echo $? > {tmp_path}/launch.rc\n"
            "exec sleep 600")
    jobid = batch_job(cluster, jobs, store, tmp_path, body=body)
    second = str(cluster.job(jobid)["exec_host"]).split("+")[1].split("/")[0]
    deadline = time.time() + 120
    while not (tmp_path / "launch.rc").exists():
        assert time.time() < deadline, "the launch did not end"
        time.sleep(0.3)
    err = (tmp_path / "launch.out").read_text()
    assert (tmp_path / "launch.rc").read_text().strip() != "0", err
    found = re.search(r"jobenv: rank 3 on (\S+) failed(?: first)?: signal 9 \(SIGKILL\)", err)
    assert found and found.group(1) == second, err
