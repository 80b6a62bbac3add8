"""`launch` on the real 4-node Slurm cluster (tests/cluster): plain DDP across two nodes under
srun --mpi=pmi2/pmix, sizing (--nhosts, --hosts, --exclude, -n, --ppn), four independent
one-node runs side by side, and supervision of a step (timeout -> scancel, failed rank).

Run under `flock /tmp/jobenv-slurm.lock`: one cluster at a time on a machine.
"""
from __future__ import annotations

import re
import shlex
import time
from pathlib import Path

import pytest

from launchkit import RESTORE, check_training, need_torch, train_reports, write_train
from test_e2e_slurm import batch_job, cluster, fresh, jobs, store  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e
PMIX_ENV = {"OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "eth0",
            "OMPI_MCA_oob_tcp_if_include": "eth0", "OMPI_MCA_pml": "ob1"}


def hosts_of(out: str) -> list:
    return sorted(w for w in out.split() if re.fullmatch(r"node\d", w))


@pytest.fixture
def job4(cluster, jobs, store, tmp_path):  # noqa: F811
    """A 4-node job, 2 tasks per node, saved by its batch script."""
    return batch_job(cluster, jobs, store, tmp_path, "-N", "4", "--ntasks-per-node", "2")


@pytest.mark.parametrize("mpi", ["pmi2", "pmix"])
def test_plain_ddp_across_two_nodes(cluster, jobs, store, tmp_path, mpi):  # noqa: F811
    need_torch()
    if mpi not in cluster.run(["srun", "--mpi=list"], check=False).stdout + \
            cluster.run(["srun", "--mpi=list"], check=False).stderr:
        pytest.skip(f"this Slurm has no {mpi} plugin")
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    write_train(tmp_path)
    p = fresh(cluster, "node2", "bash", f"cd {tmp_path} && {RESTORE} && SLURM_MPI_TYPE={mpi} launch python3 train.py",
              store, **(PMIX_ENV if mpi == "pmix" else {}))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    reps = train_reports(p.stdout)
    check_training(reps, 4)
    assert {r["host"] for r in reps} == {"node1", "node2"}
    assert all("SLURM_PROCID" in r["launcher_view"] for r in reps)


def test_sizing_on_four_nodes(cluster, store, job4):  # noqa: F811
    cases = [("--nhosts 1", ["node1"] * 2), ("--hosts 'node[2-3]'", ["node2"] * 2 + ["node3"] * 2),
             ("--exclude node1,node3", ["node2"] * 2 + ["node4"] * 2), ("-n 3", ["node1"] * 2 + ["node2"]),
             ("--ppn 1", ["node1", "node2", "node3", "node4"]), ("--hosts node4 --ppn 1", ["node4"])]
    script = " && ".join(f"echo '== {args}' && jobenv launch {args} -- hostname" for args, _ in cases)
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && {script}", store)
    assert p.returncode == 0, p.stdout + p.stderr
    parts = p.stdout.split("== ")[1:]
    for (args, want), got in zip(cases, parts):
        head, _, body = got.partition("\n")
        assert head == args.replace("'", "") and hosts_of(body) == sorted(want), (args, got)
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --nhosts 5 -- hostname", store)
    assert p.returncode == 5 and "only 4 hosts" in p.stderr and "node[1-4]" in p.stderr
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --hosts node7 -- hostname", store)
    assert p.returncode == 5 and "'node7' is not in job" in p.stderr


def test_four_independent_one_node_runs_side_by_side(cluster, store, job4, tmp_path):  # noqa: F811
    need_torch()
    write_train(tmp_path)
    script = (f"cd {tmp_path} && {RESTORE} && for h in node1 node2 node3 node4; do "
              "jobenv launch --hosts $h -- python3 train.py > out.$h 2>&1 & done; wait")
    p = fresh(cluster, "node1", "bash", script, store)
    assert p.returncode == 0, p.stderr
    for h in ("node1", "node2", "node3", "node4"):
        out = (tmp_path / f"out.{h}").read_text()
        reps = train_reports(out)
        assert len(reps) == 2, f"out.{h} holds {len(reps)} rank reports, not 2:\n{out[-4000:]}"
        check_training(reps, 2)  # two independent worlds of 2, not one of 8
        assert {r["host"] for r in reps} == {h}, out[-2000:]


def test_failed_rank_and_timeout_under_srun(cluster, store, job4, tmp_path):  # noqa: F811
    rank = tmp_path / "rank.sh"
    rank.write_text("echo hello from $RANK on $(hostname)\nif [ \"$RANK\" = 5 ]; then echo 'loss is nan' >&2; exit 3; fi\n"
                    "sleep 5\n")
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch -- sh {rank}", store)
    assert p.returncode != 0
    assert "jobenv: rank 5 on node3 failed first: exit code 3" in p.stderr, p.stderr
    assert "jobenv:   | loss is nan" in p.stderr
    logs = tmp_path / "logs"
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --label -- sh {rank}; "
              f"jobenv launch --log-dir {logs} -- sh {rank}", store)
    assert "jobenv: last lines of rank 5:\njobenv:   | 5: hello from 5 on node3\njobenv:   | 5: loss is nan" in p.stderr
    assert f"jobenv: last lines of rank 5 ({logs}/rank-5.log):\njobenv:   | hello from 5 on node3\n" in p.stderr
    assert sorted(f.name for f in logs.iterdir()) == [f"rank-{r}.log" for r in range(8)]
    print(p.stderr)  # quoted in the README
    slow = tmp_path / "slow.sh"
    slow.write_text("if [ \"$RANK\" = 6 ]; then sleep 300; fi\necho done $RANK\n")
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --timeout 15 -- sh {slow}", store)
    assert p.returncode == 124, p.stdout + p.stderr
    assert re.search(r"never finished: rank 6 on node4 still running$", p.stderr.strip().splitlines()[-1]), p.stderr
    steps = cluster.run(["squeue", "-h", "-s", "-o", "%i %j"], check=False).stdout
    assert "jobenv-" not in steps, steps  # the step was cancelled, not left running
    print(p.stderr)


def test_retry_without_the_failed_host(cluster, store, job4, tmp_path):  # noqa: F811
    script = tmp_path / "flaky.sh"
    script.write_text("if [ \"$(hostname)\" = node2 ]; then echo 'ECC error' >&2; exit 4; fi\necho ok on $(hostname)\n")
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --nhosts 2 --ppn 1 --retries 1 --exclude-failed "
              f"-- sh {script}", store)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 1 on node2 failed first: exit code 4" in p.stderr
    assert re.search(r"jobenv: retired node2 \(exit code 4 of rank 1, guessed; ledger \S+\): node3 takes its place\n"
                     r"jobenv: retrying \(2 of 2\)", p.stderr), p.stderr
    assert sorted(line for line in p.stdout.splitlines() if line.startswith("ok on")) == \
        ["ok on node1", "ok on node1", "ok on node3"]  # attempt 1: node1; attempt 2: node1 and node3


def test_a_killed_supervisor_leaves_no_step_running(cluster, store, job4):  # noqa: F811
    """`jobenv launch` killed with SIGKILL (the OOM killer): srun gets SIGTERM from the
    kernel and ends its step on every node; nothing is left running in the job."""
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && timeout -s KILL 8 jobenv launch -- sh -c 'sleep 300'; "
              "echo rc=$?", store)
    assert p.stdout.strip().endswith("rc=137"), p.stdout + p.stderr
    no_step_left(cluster)


def no_step_left(cluster, seconds: float = 30) -> None:  # noqa: F811
    """Within `seconds`, no step of any job runs but the batch and extern ones."""
    deadline = time.monotonic() + seconds
    while True:
        steps = cluster.run(["squeue", "-h", "-s", "-o", "%i %j"], check=False).stdout
        left = [s for s in steps.splitlines() if not s.split()[0].endswith((".batch", ".extern"))]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert not left, steps


KILLER = """import os, socket, sys
print(f"rank {os.environ['RANK']} on {socket.gethostname()} restart={os.environ.get('JOBENV_RESTART_COUNT')}", flush=True)
if socket.gethostname() == "node2":
    os.kill(os.getpid(), 9)
"""


def restart_cost(home: str) -> tuple:
    """(seconds from attempt 1's first failure to attempt 2's first rank start, from attempt 1's
    last rank end to it): from the ranks' own records in the two run directories."""
    from jobenv.launch import ranks
    from jobenv.rank.ends import first_failure

    second = next(Path(home, "runs").glob("*/*-a1"))
    pid = second.name.split("-")[-2]  # <stamp>-<pid>-a<N>: the same launch's first attempt has its pid
    a0, a1 = ranks.read(str(next(second.parent.glob(f"*-{pid}-a0")))), ranks.read(str(second))
    failed = first_failure(a0)
    assert failed is not None and failed.ended is not None
    started = min(r.started for r in a1.ranks.values() if r.started is not None)
    last = max(r.ended for r in a0.ranks.values() if r.ended is not None)
    return started - failed.ended, started - last


def test_a_host_that_kills_its_ranks_is_replaced_by_a_spare(cluster, store, job4, tmp_path):  # noqa: F811
    prog, logs = tmp_path / "killer.py", tmp_path / "logs"
    prog.write_text(KILLER)
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --spare-nodes 1 --retries 1 --log-dir {logs} "
              f"-- python3 {prog} && jobenv show && echo == && jobenv launch --ppn 1 -- hostname", store)
    assert p.returncode == 0, p.stdout + p.stderr
    # both ranks of node2 die alike: named once (issue 26), else the first of them
    assert re.search(r"jobenv: (rank [23] on node2 failed first|ranks 2-3 on node2 failed the same way): "
                     r"signal 9 \(SIGKILL\)", p.stderr), p.stderr
    assert re.search(r"jobenv: retired node2 \(signal 9 \(SIGKILL\) of rank [23], named; ledger \S+/bad-hosts.json\): "
                     r"node4 takes its place\njobenv: retrying \(2 of 2\)", p.stderr), p.stderr
    assert re.search(r"retired host +node2: signal 9 \(SIGKILL\) of rank [23], named; run \S+-a0 at ", p.stdout)
    first = {f.name: f.read_text() for f in (logs / "attempt-1").iterdir()}  # attempt 1's logs, intact
    assert sorted(first) == [f"rank-{r}.log" for r in range(6)]
    assert first["rank-0.log"] == "rank 0 on node1 restart=0\n" and first["rank-5.log"] == "rank 5 on node3 restart=0\n"
    assert first["rank-2.log"] == "rank 2 on node2 restart=0\n"
    second = sorted((logs / f"rank-{r}.log").read_text() for r in range(6))
    assert second == sorted(f"rank {r} on {h} restart=1\n" for r, h in enumerate(["node1", "node1", "node3", "node3",
                                                                                  "node4", "node4"]))
    # the next launch of the job leaves the retired host out, saying why
    assert re.search(r"jobenv: leaving out node2: signal 9 \(SIGKILL\) of rank [23], named; run \S+ at .*\(retired; "
                     r"--hosts naming it uses it again\)", p.stderr), p.stderr
    assert hosts_of(p.stdout.split("==")[-1]) == ["node1", "node3", "node4"], p.stdout
    print(p.stderr + p.stdout)  # quoted in the README
    cost, own = restart_cost(store)
    print(f"restart cost of one failover: {cost:.2f} s from the failure to attempt 2's first rank "
          f"({own:.2f} s from attempt 1's last rank end)")


def test_the_same_import_error_on_every_rank_retires_no_host(cluster, store, job4, tmp_path):  # noqa: F811
    p = fresh(cluster, "node1", "bash", f"{RESTORE} && jobenv launch --spare-nodes 1 --retries 1 "
              "-- python3 -c 'import no_such_module_jobenv'; jobenv show", store)
    assert "ModuleNotFoundError: No module named 'no_such_module_jobenv'" in p.stderr, p.stderr
    assert p.stderr.count("jobenv: not retrying: import error: the environment lacks a module") == 1, p.stderr
    assert "retrying (2 of 2)" not in p.stderr  # the next attempt would fail the same way
    assert "retired host" not in p.stdout and "retired node" not in p.stderr
    assert not list(Path(store, "runs").glob("*/bad-hosts.json"))
    print(p.stderr)


MPI_SIZE = "from mpi4py import MPI\nc = MPI.COMM_WORLD\nprint(f'WORLD {c.Get_rank()}/{c.Get_size()}', flush=True)\n"


def test_an_mpi_program_is_one_world_without_slurm_mpi_type_and_a_split_is_never_silent(
        cluster, jobs, store, tmp_path):  # noqa: F811
    """The issue: under srun an mpi4py program ran as N copies of rank 0 of 1 and exited 0 when
    SLURM_MPI_TYPE was unset (this cluster's default is none).  `launch` now adds the --mpi type
    the venv's MPICH needs (pmi2, from `srun --mpi=list`), shown by --dry-run; a type that does
    not fit, given by the user, is theirs, and is said before any rank starts."""
    pytest.importorskip("mpi4py")
    batch_job(cluster, jobs, store, tmp_path, "-N", "2", "--ntasks-per-node", "2")
    (tmp_path / "size.py").write_text(MPI_SIZE)
    p = fresh(cluster, "node1", "bash", f"cd {tmp_path} && {RESTORE} && unset SLURM_MPI_TYPE && "
              "launch --dry-run size.py && echo == && launch size.py && echo == && "
              "SLURM_MPI_TYPE=none launch size.py", store)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    dry, world, alone = p.stdout.split("==\n")
    assert shlex.split(dry)[:4] == ["/usr/bin/srun", "--mpi=pmi2", "--disable-status", "-N"], dry
    assert sorted(re.findall(r"WORLD (\S+)", world)) == ["0/4", "1/4", "2/4", "3/4"], p.stdout + p.stderr
    assert sorted(re.findall(r"WORLD (\S+)", alone)) == ["0/1"] * 4, p.stdout + p.stderr  # the user's choice
    warned = [ln for ln in p.stderr.splitlines() if "mpi4py is built with" in ln]
    assert warned == ["jobenv: warning: mpi4py is built with MPICH, but srun --mpi=none (--mpi or SLURM_MPI_TYPE) "
                      "is not its PMI: every rank would start it as rank 0 of a world of 1 (and exit 0); it needs "
                      "--mpi=pmi2 or pmix"], p.stderr
    # this venv's horovod is built with Debian's Open MPI: its world is said to split too, on each launch
    horovod = [ln for ln in p.stderr.splitlines() if ln.startswith("jobenv: warning: horovod is built with Open MPI")]
    assert len(horovod) in (0, 3), p.stderr
