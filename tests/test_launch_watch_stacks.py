"""jobenv.launch.watch.stacks: parsing real faulthandler dumps (tests/data/stacks, written by
CPython 3.11's faulthandler.register(all_threads=True) in real programs: a 2-rank gloo
job whose rank 1 sleeps in load_batch while rank 0 waits in all_reduce, a 150-deep
recursion, a module-level sleep dumped after SIGSTOP/SIGCONT, 105 threads), grouping them
as STAT does, and naming the ranks without a stack and the rank silent longest."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

from jobenv.launch.watch import stacks
from jobenv.rank import ledger
from launchkit import need_torch, shell
from test_e2e_slurm import cluster, jobs, store  # noqa: F401 (fixtures)
from test_launch_watch_supervise import _until, job  # noqa: F401 (job: a saved 2-rank MPICH job, a fixture)

DATA = os.path.join(os.path.dirname(__file__), "data", "stacks")


def dump(name: str) -> stacks.Stack:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        stack = stacks.parse(f.read())
    assert stack is not None
    return stack


def test_parse_takes_the_main_thread_not_the_newest():
    # the dump lists a worker thread (threading.run) first; the main thread is the last
    stack = dump("allreduce.txt")
    assert stack[0][2] == "all_reduce" and stack[0][0].endswith("distributed_c10d.py")
    assert [f[2] for f in stack[2:]] == ["step", "main", "<module>"]
    assert dump("load_batch.txt")[0] == ("/tmp/r3fx/train.py", "5", "load_batch")


def test_parse_a_dump_cut_at_100_threads_has_no_main_thread():
    with open(os.path.join(DATA, "many_threads.txt"), encoding="utf-8") as f:
        text = f.read()
    assert stacks.parse(text) is None  # its last thread is a worker: the main one was cut
    assert stacks.parse("") is None and stacks.parse("Fatal Python error: x\n") is None


def test_groups_identical_stacks_most_common_first_with_compact_ranges():
    ranks = {r: dump("allreduce.txt") for r in (0, 1, 2, 3, 4, 5, 7)}
    ranks[6] = dump("load_batch.txt")
    lines = stacks.render(ranks, {}, "/run/stacks", lambda path, line: "time.sleep(90)" if line == "5" else None)
    assert lines[0] == "stacks of 8 ranks (dumps in /run/stacks):"
    assert lines[1] == ("  7 ranks (0-5,7) in all_reduce at distributed_c10d.py:3252 ← wrapper at "
                        "c10d_logger.py:83 ← step at train.py:11 ← main at train.py:19 ← ... (1 more)")
    assert lines[2] == ("  rank 6 in load_batch at train.py:5 `time.sleep(90)` ← step at train.py:9 ← "
                        "main at train.py:19 ← <module> at train.py:22")


def test_recursion_reads_as_one_frame():
    line = stacks.describe(dump("deep.txt"))
    assert line == "down at deep.py:5 ← down at deep.py:6 x99"  # faulthandler keeps 100 frames
    assert stacks.describe(dump("flat.txt")) == "<module> at flat.py:3"


def test_a_thousand_ranks_read_in_a_few_lines():
    many: Dict[int, stacks.Stack] = {r: dump("allreduce.txt") for r in range(1000)}
    for r in range(0, 1000, 37):  # 28 odd ones out, each in its own place
        many[r] = (("/x/data.py", str(r), "load_batch"),)
    lines = stacks.render(many, {"no hook (not a Python program, or --no-hook)": list(range(1000, 1008))}, "d")
    assert len(lines) <= stacks.MAX_GROUPS + 3 and max(map(len, lines)) < 400
    assert lines[1].startswith("  972 ranks (1-36,38-73,") and lines[1].count(",") <= stacks.MAX_RANGES + 1
    assert "(1000 in all)" not in lines[1] and "972 in all" in lines[1]
    assert lines[-2] == "  and 19 other stacks of 19 ranks (333,370,407,444,481,518,555,592,629,666,703,740,"\
        "... (19 in all))"  # 1 + 9 groups shown
    assert lines[-1] == "  no stack from 8 ranks (1000-1007): no hook (not a Python program, or --no-hook)"


def rank_state(host: str, hook_pid: Optional[int] = None) -> ledger.RankState:
    r = ledger.RankState(0)
    r.host, r.hook_pid = host, hook_pid
    return r


def test_why_a_running_rank_gave_no_stack():
    assert stacks.why_missing(rank_state("n1"), {"n1": 1.0}) == "no hook (not a Python program, or --no-hook)"
    assert stacks.why_missing(rank_state("n2.x", 42), {"n1": 1.0}) == "host n2.x never acked the request"
    assert stacks.why_missing(rank_state("n1", 42), {"n1": 1.0}).startswith("no dump written")


def test_silent_longest_by_the_age_of_its_last_output():
    assert stacks.silent_longest([0, 1, 6], {0: 5.0, 1: 1.0, 6: 50.0}, "its log last written", "no log") == \
        "rank 6 silent longest: its log last written 50 s ago"
    assert stacks.silent_longest([0, 1, 6], {0: 5.0, 1: 49.5, 6: 50.0}, "its line", "none") == \
        "2 ranks (1,6) silent longest: its line 50 s ago"
    assert stacks.silent_longest([0, 1, 6], {0: 7.0}, "x", "no line in the last 200 lines of output") == \
        "silent longest: 2 ranks (1,6): no line in the last 200 lines of output"
    assert stacks.silent_longest([0, 1], {}, "x", "y") is None  # unlabelled output: cannot tell
    assert stacks.silent_longest([1], {1: 5.0}, "x", "y") is None  # the only one left


def test_silence_of_reads_the_launchers_labels():
    lines = [(9.0, b"[0] a"), (8.0, b"[1] b"), (7.0, b"plain"), (3.0, b"[0] c"), (1.0, b"\xff[1]")]
    assert stacks.silence_of(lines, "mpich") == {0: 3.0, 1: 8.0}
    assert stacks.silence_of([(2.0, b"  1: x"), (1.0, b"0: y")], "srun") == {1: 2.0, 0: 1.0}
    assert stacks.silence_of(lines, "no-such") == {}


@pytest.mark.parametrize("ranks,text", [([3], "3"), ([0, 1, 2, 5, 7, 8], "0-2,5,7-8"), ([2, 1, 2], "1-2")])
def test_rank_ranges(ranks, text):
    assert stacks.rank_ranges(ranks) == text


def test_hostile_names_in_a_dump_are_printed_inert():
    text = 'Current thread 0x1 (most recent call first):\n  File "/x/\x1b[2Jevil.py", line 1 in f\x1b]0;t\x07\n'
    lines = stacks.render({0: stacks.parse(text) or ()}, {}, "d")
    assert "\x1b" not in "".join(lines) and "\\x1b[2Jevil.py:1" in lines[1]


# --- end to end: `jobenv launch` under the MPICH wheel's mpiexec, 2 ranks on this host ---

def dumps_kept(env) -> list:
    return sorted(p.name for p in Path(env["JOBENV_HOME"]).glob("runs/*/*/stacks/rank-*.txt"))


HANG = """import os, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    time.sleep(300)
dist.all_reduce(torch.ones(1))
"""


@pytest.mark.e2e
def test_a_gloo_hang_at_timeout_names_each_ranks_stack(job, tmp_path):  # noqa: F811
    """Rank 1 sleeps before the all_reduce rank 0 waits in: the timeout says so, per rank."""
    need_torch()
    (tmp_path / "hang.py").write_text(HANG)
    p = shell(job, "jobenv launch --stacks --timeout 40 -- python3 hang.py", cwd=tmp_path, timeout=200)
    assert p.returncode == 124, p.stderr
    assert re.search(r"jobenv:   rank 0 in all_reduce at distributed_c10d\.py:\d+ `[^`]+` ← ", p.stderr), p.stderr
    assert "jobenv:   rank 1 in <module> at hang.py:5 `time.sleep(300)`\n" in p.stderr, p.stderr
    assert p.stderr.index("stacks of 2 ranks") < p.stderr.index("launch ran past --timeout"), p.stderr
    assert [n.split(".")[0] for n in dumps_kept(job)] == ["rank-0", "rank-1"]


STOP = """import os, signal, sys, time
def wait_for_peer():
    time.sleep(300)
def stop_here():
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(300)
print("ready", flush=True)
stop_here() if os.environ["RANK"] == "1" else wait_for_peer()
"""


@pytest.mark.e2e
def test_a_stopped_rank_is_named_with_its_python_stack_at_timeout(job, tmp_path):  # noqa: F811
    (tmp_path / "stop.py").write_text(STOP)
    p = shell(job, "jobenv launch --stacks --timeout 8 -- python3 stop.py", cwd=tmp_path, timeout=120)
    assert p.returncode == 124, p.stderr
    assert "jobenv:   rank 0 in wait_for_peer at stop.py:3 `time.sleep(300)` ← <module> at stop.py:8" in p.stderr
    assert re.search(r"jobenv:   rank 1 in stop_here at stop.py:[56] `[^`]+` ← <module> at stop.py:8", p.stderr), \
        p.stderr


@pytest.mark.e2e
def test_idle_timeout_without_stacks_says_why_no_rank_gave_a_stack(job, tmp_path):  # noqa: F811
    """Stacks need faulthandler in the ranks, which only --stacks arms (a rank is otherwise left as
    the bare launcher starts it); with it, a rank whose Python has no hook is named as such."""
    (tmp_path / "stop.py").write_text(STOP.replace('== "1"', '== "none"'))
    p = shell(job, "jobenv launch --idle-timeout 4 -- python3 stop.py", cwd=tmp_path, timeout=120)
    assert p.returncode == 124, p.stderr
    assert f"jobenv: {stacks.UNARMED}\n" in p.stderr, p.stderr
    assert p.stderr.index("no stacks") < p.stderr.index("printed nothing for --idle-timeout 4 s")
    p = shell(job, "jobenv launch --stacks --idle-timeout 4 -- sh -c 'sleep 30'", cwd=tmp_path, timeout=120)
    assert p.returncode == 124, p.stderr
    assert "jobenv: no Python stack from any rank:\njobenv:   no stack from 2 ranks (0-1): no hook (not a Python " \
        "program, or --no-hook)\n" in p.stderr, p.stderr


WORK = """import os, sys, time
def work():
    open(sys.argv[1] + "/ready-" + os.environ["RANK"], "w").close()
    time.sleep(float(sys.argv[2]))
work()
print("done-" + os.environ["RANK"], flush=True)
"""


@pytest.mark.e2e
def test_sigusr1_and_jobenv_stacks_print_stacks_and_the_launch_goes_on(job, tmp_path):  # noqa: F811
    (tmp_path / "work.py").write_text(WORK)
    argv = ["env", "-i", *[f"{k}={v}" for k, v in job.items()], "jobenv", "launch", "--stacks", "--", "python3",
            str(tmp_path / "work.py"), str(tmp_path), "25"]
    launch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert _until(lambda: len(list(tmp_path.glob("ready-*"))) == 2, 60), "the ranks never started"
        other = shell(job, "jobenv stacks", cwd=tmp_path, timeout=60)
        assert other.returncode == 0, other.stderr
        assert other.stdout.splitlines()[1] == "  2 ranks (0-1) in work at work.py:4 " \
            "`time.sleep(float(sys.argv[2]))` ← <module> at work.py:5", other.stdout
        launch.send_signal(signal.SIGUSR1)
        out, err = launch.communicate(timeout=90)
    finally:
        launch.kill()
    assert launch.returncode == 0, err
    assert sorted(out.split()) == ["done-0", "done-1"]
    assert "jobenv:   2 ranks (0-1) in work at work.py:4 `time.sleep(float(sys.argv[2]))`" in err, err
    assert len(dumps_kept(job)) == 2  # one file per rank's Python, each holding both dumps
    assert all(Path(p).read_text().count("work.py") >= 4 for p in Path(job["JOBENV_HOME"]).glob("runs/*/*/stacks/*"))


@pytest.mark.e2e
def test_jobenv_stacks_without_a_running_launch_is_one_error(job):  # noqa: F811
    p = shell(job, "jobenv stacks")
    assert p.returncode == 1 and p.stderr.startswith("jobenv: error: no running launch of job ") and \
        p.stderr.count("\n") == 1, p.stderr


def test_a_stopped_rank_on_the_slurm_cluster_is_named_with_its_stack(cluster, jobs, store, tmp_path):  # noqa: F811
    """The issue's test: 8 ranks on 4 Slurm nodes, rank 5 (node3) stopped with SIGSTOP.
    `jobenv stacks` on node2 (the launch runs on node1: live by the host agents' beats)
    groups the 7 others and says rank 5 gave none; at --timeout rank 5 is resumed and named
    with its Python stack."""
    from test_e2e_slurm import batch_job, fresh

    batch_job(cluster, jobs, store, tmp_path, "-N", "4", "--ntasks-per-node", "2")
    (tmp_path / "stop.py").write_text(STOP.replace('== "1"', '== "5"'))
    done: list = []
    script = f"cd {tmp_path} && source <(jobenv get) && jobenv launch --stacks --timeout 25 -- python3 stop.py"
    launch = threading.Thread(target=lambda: done.append(fresh(cluster, "node1", "bash", script, store)))
    launch.start()
    time.sleep(10)
    other = fresh(cluster, "node2", "bash", "jobenv stacks", store)
    launch.join(timeout=240)
    out, err = done[0].stdout, done[0].stderr
    assert other.returncode == 0, other.stderr
    assert other.stdout.splitlines()[1:3] == [
        "  7 ranks (0-4,6-7) in wait_for_peer at stop.py:3 `time.sleep(300)` ← <module> at stop.py:8",
        "  no stack from rank 5: no dump written (stopped, or the dump signal blocked or ignored)"], other.stdout
    assert done[0].returncode == 124, out + err
    assert "jobenv:   7 ranks (0-4,6-7) in wait_for_peer at stop.py:3 `time.sleep(300)` ← <module> at stop.py:8" \
        in err, err
    assert re.search(r"jobenv:   rank 5 in stop_here at stop.py:[56] `[^`]+` ← <module> at stop.py:8", err), err
    print(other.stdout, err)  # quoted in the README


@pytest.mark.e2e
def test_jobenv_stacks_never_writes_into_a_run_directory_another_user_planted(job, other_user, shared_tmp):  # noqa: F811
    """--run naming a directory another user made (a /tmp path handed around): one error
    line, and neither a request nor a stacks directory written there for their ranks to act on."""
    planted = shared_tmp / "20261125-000000-1-a0"
    other_user.sh(f"mkdir -m 777 {planted} && echo '1 stacks' > {planted}/request")
    p = shell(job, f"jobenv stacks --run {planted}")
    assert p.returncode != 0 and p.stderr.startswith("jobenv: error: ") and p.stderr.count("\n") == 1, p.stderr
    assert "not a launch attempt of this job" in p.stderr and "Traceback" not in p.stderr
    assert sorted(os.listdir(planted)) == ["request"] and (planted / "request").read_text() == "1 stacks\n"


def _take_pid(pid: int) -> "subprocess.Popen[bytes]":
    """A `sleep` with pid `pid` (free: its process exited), by setting the kernel's last pid
    (root only); skipped when another process takes it first."""
    for _ in range(200):
        if os.path.exists(f"/proc/{pid}"):
            pytest.skip(f"pid {pid} was taken by another process first")
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError as e:
            pytest.skip(f"cannot set the next pid: {e}")
        p = subprocess.Popen(["sleep", "300"])
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    pytest.skip(f"pid {pid} never came back")


@pytest.mark.e2e
def test_jobenv_stacks_spares_the_process_that_got_an_exited_pythons_pid(tmp_path):
    """A rank `sh -c 'python3 prep; exec python3 work.py'`: `jobenv stacks` dumps the running
    Python, and the process that got the pid of the Python that exited (its `hook` line, then its
    `clean`) lives on; the dump signal, 38, would have killed it."""
    from launchkit import local_job

    env = local_job(tmp_path, 1)
    (tmp_path / "work.py").write_text(WORK)
    rank = f"python3 -c pass; exec python3 {tmp_path / 'work.py'} {tmp_path} 15"
    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "jobenv", "launch", "--stacks", "--", "sh", "-c", rank]
    launch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    other = None
    try:
        assert _until(lambda: (tmp_path / "ready-0").exists(), 60), "the rank never started"
        led = next(Path(env["JOBENV_HOME"]).glob("runs/*/*/host-*.ledger")).read_text().split("\n")
        hooks = [line.split() for line in led if line.startswith("hook 0 ")]
        assert len(hooks) == 2 and any(line.startswith("clean 0 ") for line in led), led
        other = _take_pid(int(hooks[0][2]))
        p = shell(env, "jobenv stacks", cwd=tmp_path, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines()[1] == "  rank 0 in work at work.py:4 `time.sleep(float(sys.argv[2]))` " \
            "← <module> at work.py:5", p.stdout
        time.sleep(1.5)
        assert other.poll() is None, f"the process that got pid {other.pid} died: {other.returncode}"  # -38 before
        out, err = launch.communicate(timeout=90)
    finally:
        launch.kill()
        if other is not None:
            other.kill()
            other.wait()
    assert launch.returncode == 0 and out.split() == ["done-0"], err


@pytest.mark.e2e
def test_jobenv_stacks_spares_a_rank_whose_python_exec_d_another_program(tmp_path):
    """exec keeps the pid and the start time the hook recorded, and drops faulthandler's
    handler: the program the rank's Python exec'd would die of the dump signal (38).  The
    agent signals only a process that catches it (/proc/PID/status SigCgt)."""
    from launchkit import local_job

    env = local_job(tmp_path, 1)
    rank = f"import os; open('{tmp_path}/up', 'w'); os.execvp('sh', ['sh', '-c', 'sleep 6; echo survived'])"
    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "jobenv", "launch", "--stacks", "--", "python3", "-c",
            rank]
    launch = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert _until(lambda: (tmp_path / "up").exists(), 60), "the rank never started"
        time.sleep(0.5)
        p = shell(env, "jobenv stacks", cwd=tmp_path, timeout=60)
        assert p.returncode == 0 and "no dump written" in p.stdout, p.stdout + p.stderr
        out, err = launch.communicate(timeout=90)
    finally:
        launch.kill()
    assert launch.returncode == 0 and out.split() == ["survived"], out + err
