"""Requests to the host agents (jobenv.launch.watch.requests) carried out by real rank keepers and
their host agent (jobenv/rank/), the wrapper run by each POSIX shell /bin/sh is on HPC nodes:
signals, stacks, kill, acks, and the agent's end when no rank of the host runs."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from jobenv.launch import ranks

from jobenv.launch.watch import requests
from launchkit import ending
from test_launch_watch_supervise import _until
from test_rankwrap import HOST, POSIX_SHELLS, RUNS, WRAPPER

PY = sys.executable
# a rank that arms like the Python hook (a `hook` line), writes what it receives, and waits;
# argv[2], when given: ledger lines ('|' between them) it writes first, and `nohook` leaves its own out
RANK = """
import os, signal, sys, time
out = sys.argv[1]
def got(num, _frame):
    with open(out, "a") as f:
        f.write(f"{num}\\n")
for s in (signal.SIGUSR1, signal.SIGCONT, 38):
    signal.signal(s, got)
with open("/proc/self/stat") as f:
    started = f.read().rpartition(") ")[2].split()[19]
with open(os.environ["JOBENV_LEDGER"], "a") as f:
    for line in filter(None, (sys.argv[2] if len(sys.argv) > 2 else "").split("|")):
        f.write(line + "\\n")
    if "nohook" not in sys.argv:
        f.write(f"hook {os.environ['JOBENV_HOOK_RANK']} {os.getpid()} {started} {time.time()}\\n")
open(out + ".armed", "w").close()
time.sleep(120)
"""


def _start(tmp_path, shell, nranks=2, args=None, program=None):
    """`nranks` wrapped RANKs, or `program`s (rank r's extra arguments: args[r]), once each has
    written its ledger lines."""
    run = tmp_path / "run"
    run.mkdir()
    exe, argv0 = RUNS[shell]
    procs = []
    for r in range(nranks):
        env = {"PATH": "/usr/bin:/bin", "JOBENV_RUN_DIR": str(run), "PMI_RANK": str(r), "JOBENV_PYTHON": PY,
               "PMI_SIZE": str(nranks), "JOBENV_DUMP_SIGNAL": "38"}
        argv = [argv0, WRAPPER, PY, "-c", program or RANK, str(tmp_path / f"got{r}"), *(args or {}).get(r, [])]
        procs.append(subprocess.Popen(argv, executable=exe, env=env, stdin=subprocess.DEVNULL))
    assert _until(lambda: all((tmp_path / f"got{r}.armed").exists() for r in range(nranks))
                  and len(ranks.read(str(run)).ranks) == nranks and (run / f"agent-{HOST}").exists(), 20), \
        "the ranks never armed"
    return run, procs


def _end(run, procs):
    """Kill what a failed test leaves: the wrappers and their programs."""
    for p in procs:
        p.kill()
        p.wait()
    for r in ranks.read(str(run)).ranks.values():
        try:
            os.kill(r.pid or 0, signal.SIGKILL) if r.pid else None
        except OSError:
            pass


def _got(tmp_path, r):
    try:
        return (tmp_path / f"got{r}").read_text().split()
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_signal_and_stacks_requests_are_carried_out_once_and_acked(tmp_path, shell):
    run, procs = _start(tmp_path, shell)
    try:
        seq = requests.send(str(run), "signal:USR1")
        assert _until(lambda: requests.acks(str(run), seq), 20), "never acked"
        assert list(requests.acks(str(run), seq)) == [HOST]
        assert _until(lambda: all(_got(tmp_path, r) == [str(int(signal.SIGUSR1))] for r in range(2)), 20)
        seq2 = requests.send(str(run), "stacks:cont")
        assert seq2 == seq + 1 and _until(lambda: requests.acks(str(run), seq2), 20)
        assert _until(lambda: all(sorted(_got(tmp_path, r)) == sorted(["10", "18", "38"]) for r in range(2)), 20), \
            [_got(tmp_path, r) for r in range(2)]
        time.sleep(2.5)  # carried out once, though the request stays in place
        assert all(len(_got(tmp_path, r)) == 3 for r in range(2))
        with pytest.raises(ValueError):
            requests.send(str(run), "signal:KILL")
    finally:
        _end(run, procs)


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_kill_request_ends_every_rank_and_the_agent_then_ends(tmp_path, shell):
    run, procs = _start(tmp_path, shell)
    seq = requests.send(str(run), "kill")
    assert _until(lambda: requests.acks(str(run), seq), 20)
    rcs = [p.wait(timeout=30) for p in procs]
    assert rcs == [-signal.SIGTERM] * 2, rcs
    state = ranks.read(str(run))
    assert [ending(state.ranks[r]) for r in range(2)] == [("signal", 15)] * 2
    assert _until(lambda: not (run / f"agent-{HOST}").exists(), 10), "the agent never ended"
    beat = os.stat(run / f"host-{HOST}.beat").st_mtime
    time.sleep(2)
    assert os.stat(run / f"host-{HOST}.beat").st_mtime == beat  # no agent beats for a host with no rank


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_a_wrapper_killed_with_sigkill_is_recorded_lost_by_the_agent(tmp_path, shell):
    run, procs = _start(tmp_path, shell)
    try:
        procs[1].kill()
        procs[1].wait()
        assert _until(lambda: ranks.read(str(run)).ranks[1].lost, 10)
        state = ranks.read(str(run))
        assert ending(state.ranks[1]) == ("lost", None) and ending(state.ranks[0]) is None
        assert state.hosts[HOST].beat and time.time() - state.hosts[HOST].beat < 5
    finally:
        _end(run, procs)


def _started(pid: int) -> str:
    """A process's start time, clock ticks after boot (field 22 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(") ")[2].split()[19]


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_stacks_signal_only_a_running_hooked_python_never_a_pid_it_left(tmp_path, shell):
    """The dump signal (38) kills a process that does not catch it: the agent sends it only to
    the pid of a rank's newest `hook` line without a `clean` after it, and only while that pid
    is the process that started when the line says.  Each `sleep` stands for an unrelated
    process that got the pid of a hooked Python that exited."""
    sleeps = [subprocess.Popen(["sleep", "60"]) for _ in range(4)]
    pid = [p.pid for p in sleeps]
    start = [_started(p) for p in pid]
    t = time.time()
    forged = {
        1: f"hook 1 {pid[0]} {int(start[0]) + 1} {t}",  # another start time: a process that got the pid since
        2: f"hook 2 {pid[1]} {start[1]} {t}|clean 2 {t}",  # its Python wrote `clean`: exiting
        3: f"hook 3 {pid[2]} {start[2]} {t}",  # superseded by the rank's next Python (its own `hook`)
        4: f"hook 4 {pid[3]} {t}",  # an older hook's line, without a start time
    }
    args = {r: [line, "nohook"] if r != 3 else [line] for r, line in forged.items()}
    run, procs = _start(tmp_path, shell, 5, args)
    try:
        seq = requests.send(str(run), "stacks")
        assert _until(lambda: requests.acks(str(run), seq), 20), "never acked"
        assert _until(lambda: _got(tmp_path, 0) == ["38"] and _got(tmp_path, 3) == ["38"], 20), \
            [_got(tmp_path, r) for r in range(5)]
        time.sleep(1.5)
        assert [p.poll() for p in sleeps] == [None] * 4  # -38 each before
        assert [_got(tmp_path, r) for r in (1, 2, 4)] == [[], [], []]
    finally:
        _end(run, procs)
        for p in sleeps:
            p.kill()
            p.wait()


# a rank that exits on its own handler: 3 on SIGTERM, 0 on SIGUSR1 (a checkpoint at a warning)
CATCHER = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: os._exit(3))
signal.signal(signal.SIGUSR1, lambda *a: os._exit(0))
with open("/proc/self/stat") as f:
    started = f.read().rpartition(") ")[2].split()[19]
with open(os.environ["JOBENV_LEDGER"], "a") as f:
    f.write(f"hook {os.environ['JOBENV_HOOK_RANK']} {os.getpid()} {started} {time.time()}\\n")
open(sys.argv[1] + ".armed", "w").close()
time.sleep(120)
"""


def _signal_all(run, sig):
    """`sig` to every rank's program and keeper at once, as a step-wide signal (scancel) reaches them."""
    state = ranks.read(str(run))
    for pid in [pid for r in range(2) for pid in (state.ranks[r].pid, state.ranks[r].wrapper_pid)]:
        os.kill(pid, sig)


def _each_round(tmp_path, shell, sig, rounds, check, program=None, timeout=10):
    """`rounds` times: two fresh ranks, then `sig` to every process of them, programs and
    wrappers at once (as scancel and srun send it); check(round, the wrappers' exit codes, the
    ranks' records)."""
    for round_ in range(rounds):
        sub = tmp_path / f"{sig.name}{round_}"
        sub.mkdir()
        run, procs = _start(sub, shell, program=program)
        try:
            _signal_all(run, sig)
            rcs = [p.wait(timeout=timeout) for p in procs]
            check(round_, rcs, [ending(ranks.read(str(run)).ranks[r]) for r in range(2)])
        finally:
            _end(run, procs)


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_a_program_that_exits_on_the_step_wide_signal_is_never_recorded_as_killed(tmp_path, shell):
    """SIGTERM to every process of the step, the program exiting 3 from its own handler: the old sh
    wrapper could lose that status (`unknown 15`); the keeper, its parent, records exit 3 every
    round and exits 3.  A pre-emption warning (USR1 to all), which the program answers with exit 0,
    is exit 0 too."""
    def on_term(round_, rcs, got):
        assert rcs == [3, 3] and got == [("exit", 3), ("exit", 3)], (round_, rcs, got)

    def on_usr1(round_, rcs, got):
        assert rcs == [0, 0] and got == [("exit", 0), ("exit", 0)], round_

    _each_round(tmp_path, shell, signal.SIGTERM, 5, on_term, CATCHER)
    _each_round(tmp_path, shell, signal.SIGUSR1, 5, on_usr1, CATCHER)


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_the_host_agent_outlives_a_pre_emption_warning(tmp_path, shell):
    """srun --signal=USR1@S and scancel --signal reach the host agent too: it must go on beating
    (a dead agent's lock would keep every later wrapper from starting another)."""
    run, procs = _start(tmp_path, shell)
    try:
        pid = int((run / f"agent-{HOST}").read_text().split()[0])
        os.kill(pid, signal.SIGUSR1)
        os.kill(pid, signal.SIGUSR2)
        beat = os.stat(run / f"host-{HOST}.beat").st_mtime
        assert _until(lambda: os.stat(run / f"host-{HOST}.beat").st_mtime > beat, 5), "the agent stopped beating"
        os.kill(pid, 0)
    finally:
        _end(run, procs)


@pytest.mark.parametrize("shell", POSIX_SHELLS)
def test_a_signal_to_every_process_of_the_step_is_recorded_as_that_signal(tmp_path, shell):
    """scancel and srun signal every process of the step: a program and its keeper get SIGTERM at
    once.  Each round, each rank ends at once as signal 15, exact (the old sh wrapper said
    `unknown 15` when bash lost the status), and its keeper dies of TERM too."""
    def check(round_, rcs, got):
        assert rcs == [-15, -15] and got == [("signal", 15), ("signal", 15)], (round_, rcs, got)

    _each_round(tmp_path, shell, signal.SIGTERM, 6, check, timeout=4)
