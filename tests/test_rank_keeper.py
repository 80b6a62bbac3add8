"""The rank keeper (jobenv/rank/keeper.py), the program's parent on the supervised path: the
program starts as the launcher left things (no signal ignored that was not), every end is exact,
and only the process that ended can excuse a teardown abort."""
from __future__ import annotations

import os
import pty
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pathlib import Path

from conftest import REPO, mpich
from jobenv.launch import ranks
from jobenv.rank import teardown
from jobenv.rank import keeper
from test_rankwrap import WRAPPER, ledger

PY = sys.executable
HOOK = str(REPO / "jobenv" / "rankhook")
SIGIGN = 'grep SigIgn /proc/self/status'


def env(run, **extra):
    return {"PATH": os.environ["PATH"], "JOBENV_RUN_DIR": str(run), "JOBENV_PYTHON": PY, **extra}


def ignored(line: str) -> set:
    return keeper.ignored_at_start(line.split()[1])


def test_the_forwarding_table():
    """A signal the kernel sent a whole group (a terminal's ^C) reached the program already, and so
    did one from a launcher that signals the rank's group (Hydra, Open MPI, torchrun) or step (srun,
    Flux); a launcher that signals the rank's pid (or a user's kill of the keeper) needs it passed on."""
    parent = os.getppid()
    assert keeper.forwards(signal.SIGTERM, 0, parent, "pals") and keeper.forwards(signal.SIGUSR1, 0, parent, "none")
    assert not keeper.forwards(signal.SIGINT, keeper.SI_KERNEL, 0, "none")
    for launcher in ("mpich", "openmpi", "torchrun", "srun", "flux"):
        assert not keeper.forwards(signal.SIGTERM, 0, parent, launcher)
        assert keeper.forwards(signal.SIGTERM, 0, parent + 1, launcher)  # a user's kill of the keeper


@pytest.mark.parametrize("launcher", ["mpich", "openmpi", "torchrun"])
def test_a_group_signal_reaches_the_program_once(tmp_path, launcher):
    """Hydra, Open MPI and torchrun signal the rank's process group: the program, in its keeper's
    group, gets it once, as the bare rank did, with its own children (here a forked one)."""
    if launcher == "openmpi" and not shutil.which("mpirun.openmpi"):
        pytest.skip("Open MPI is not installed")
    argvs = {"mpich": [mpich(), "-n", "1"], "openmpi": ["mpirun.openmpi", "--allow-run-as-root", "-n", "1"],
             "torchrun": [PY, str(Path(PY).parent / "torchrun"), "--standalone", "--nproc-per-node=1", "--no-python"]}
    out = tmp_path / "got"
    prog = ("import os, signal, sys, time\n"
            "who = 'child' if os.fork() == 0 else 'parent'\n"
            "signal.signal(signal.SIGTERM, lambda *a: open(sys.argv[1], 'a').write(who + chr(10)))\n"
            "open(sys.argv[1] + '.' + who, 'w').close()\n"
            "t = time.time()\n"
            "while time.time() - t < 4: time.sleep(0.05)\n")
    run = tmp_path / "run"
    run.mkdir()
    p = subprocess.Popen([*argvs[launcher], "/bin/sh", WRAPPER, PY, "-c", prog, str(out)],
                         env=env(run, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                                 OMPI_MCA_btl="self", MASTER_PORT="29517"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (Path(f"{out}.parent").exists() and Path(f"{out}.child").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    time.sleep(0.5)
    assert sorted(out.read_text().split()) == ["child", "parent"]
    assert keeper.ignored_at_start("0000000000001002") == {2, 13}
    assert keeper.ignored_at_start("zz") == set() == keeper.ignored_at_start("")


def test_the_program_starts_with_the_launchers_dispositions(tmp_path):
    """The old sh wrapper started every rank with SIGINT and SIGQUIT ignored (a background job's);
    Python ignores SIGPIPE and SIGXFSZ at its start.  The program's SigIgn is the launcher's, both
    when the launcher left SIGPIPE at its default and when it ignored it."""
    run = tmp_path / "run"
    run.mkdir()

    def launcher_defaults():  # a launcher that leaves INT and QUIT at their default (a suite run in the
        for s in (signal.SIGINT, signal.SIGQUIT):  # background of a shell inherits them ignored)
            signal.signal(s, signal.SIG_DFL)

    bare = subprocess.run(["sh", "-c", SIGIGN], capture_output=True, text=True, preexec_fn=launcher_defaults).stdout
    got = subprocess.run(["sh", WRAPPER, "sh", "-c", SIGIGN], env=env(run), capture_output=True, text=True,
                         preexec_fn=launcher_defaults)
    assert got.returncode == 0 and ignored(got.stdout) == ignored(bare), (bare, got.stdout)
    assert not ignored(got.stdout) & {signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE}
    # a launcher that ignores SIGPIPE (Python's subprocess without restore_signals passes it on)
    got = subprocess.run(["sh", WRAPPER, "sh", "-c", SIGIGN], env=env(run), capture_output=True, text=True,
                         restore_signals=False, preexec_fn=launcher_defaults)
    assert signal.SIGPIPE in ignored(got.stdout)


def test_every_end_is_exact(tmp_path):
    """exit 143 and death by SIGTERM, exit 139 and SIGSEGV, 40 rounds: `$?` says 128+N for both,
    the keeper's waitpid never mixes them up, and it ends as its program did."""
    cases = [("exit 143", 143, "exit:143"), ("kill -TERM $$", -15, "signal:15"), ("exit 139", 139, "exit:139"),
             ("kill -SEGV $$", -11, "signal:11"), ("kill -KILL $$", -9, "signal:9"), ("exit 0", 0, "exit:0")]
    for i in range(40):
        script, rc, want = cases[i % len(cases)]
        run = tmp_path / f"r{i}"
        run.mkdir()
        p = subprocess.run(["sh", WRAPPER, "sh", "-c", script], env=env(run), capture_output=True)
        assert (p.returncode, ledger(run)[0][2]) == (rc, want), (i, script, p.stderr)


def test_a_terminals_interrupt_reaches_the_program_once(tmp_path):
    """^C on a terminal signals the whole foreground group, program and keeper: the keeper does not
    pass on what the kernel sent the group, so the program sees one SIGINT, as without jobenv."""
    run = tmp_path / "run"
    run.mkdir()
    prog = ("import signal, sys, time\n"
            "n = []\n"
            "signal.signal(signal.SIGINT, lambda *a: n.append(1))\n"
            "open(sys.argv[1], 'w').close()\n"
            "t = time.monotonic()\n"
            "while time.monotonic() - t < 3 and len(n) < 2: time.sleep(0.05)\n"
            "sys.exit(10 + len(n))\n")
    ready = tmp_path / "ready"
    pid, fd = pty.fork()
    if pid == 0:
        os.execve("/bin/sh", ["sh", WRAPPER, PY, "-c", prog, str(ready)], env(run))
    try:
        deadline = time.monotonic() + 20
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.write(fd, b"\x03")
        status = os.waitpid(pid, 0)[1]
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 11, ledger(run)
    assert ledger(run)[0][2] == "exit:11"


@pytest.mark.parametrize("then,excused", [
    # a clean Python step, then a solver that dies: another process ended (finding 2 of issue 23)
    ("python3 -c pass && exec sh -c 'kill -SEGV $$'", False),
    # the hooked Python itself aborts after its main ended and atexit ran (libc's exit handler)
    ("exec python3 -c 'import ctypes; c = ctypes.CDLL(None); c.__cxa_atexit(ctypes.cast(c.abort, ctypes.c_void_p), None, None)'",
     True),
    # an unhooked (-I) Python after a hooked one, killed
    ("python3 -c pass && exec python3 -I -c 'import os; os.kill(os.getpid(), 9)'", False),
])
def test_only_the_process_that_ended_can_excuse_a_teardown_abort(tmp_path, then, excused):
    run = tmp_path / "run"
    run.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "python3").symlink_to(PY)
    e = env(run, PYTHONPATH=f"{HOOK}:{REPO}")
    e["PATH"] = f"{bindir}:{e['PATH']}"
    p = subprocess.run(["sh", WRAPPER, "sh", "-c", then], env=e, capture_output=True, text=True, timeout=60)
    assert p.returncode < 0, p.stderr
    state = ranks.read(str(run))
    assert state.ranks[0].clean, ledger(run, "clean")
    assert (teardown.excused(state, 1) is not None) == excused


def test_local_rank_arg_is_put_after_the_script_and_refuses_a_bad_position():
    from jobenv.rank.keeper import local_rank_arg

    prog = ["python3", "train.py", "--lr", "1"]
    assert local_rank_arg(prog, "", "3") == prog
    assert local_rank_arg(prog, "2", "03") == ["python3", "train.py", "--local_rank=3", "--lr", "1"]
    assert local_rank_arg(prog, "4", "1")[-1] == "--local_rank=1"
    for at, lr in (("5", "0"), ("0", "0"), ("x", "0"), ("2", ""), ("2", "-1"), ("2", "\u0661")):
        p = subprocess.run([sys.executable, "-c", "import sys; from jobenv.rank.keeper import local_rank_arg; "
                            "local_rank_arg(['a', 'b', 'c', 'd'], sys.argv[1], sys.argv[2])", at, lr],
                           capture_output=True, text=True, cwd=REPO)
        assert p.returncode == 5 and p.stderr.startswith("jobenv: error: ") and p.stderr.count("\n") == 1, \
            (at, lr, p.stderr)


def test_the_keeper_run_from_elsewhere_loads_its_siblings_once_and_nothing_of_the_cwd(tmp_path):
    """The wrapper's `python -I -S DIR/rank/keeper.py` from any working directory (here a relative
    path from another one, holding planted agent.py/lines.py/keeper.py): the keeper imports
    nothing of its own (no lookup in jobenv's files on a rank's way), the host agent it forks
    imports agent and lines from its directory and never the keeper a second time (no circle
    keeper -> agent -> keeper), nothing from the cwd."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    canary = tmp_path / "canary"
    for planted in ("agent", "keeper", "lines"):
        (cwd / f"{planted}.py").write_text(f"open({str(canary)!r}, 'w').write('{planted}')\n")
    run = tmp_path / "run"
    run.mkdir()
    path = os.path.relpath(REPO / "jobenv" / "rank" / "keeper.py", cwd)
    with open(tmp_path / "err", "w") as err:
        p = subprocess.run([PY, "-X", "importtime", "-I", "-S", path, "none", "", "true"], cwd=cwd,
                           env={"PATH": os.environ["PATH"], "RANK": "0", "JOBENV_RUN_DIR": str(run)},
                           stderr=err, timeout=60)
    assert p.returncode == 0
    deadline = time.time() + 10
    while list(run.glob("agent-*")) and time.time() < deadline:  # the agent ends after the host's last rank
        time.sleep(0.1)
    assert not list(run.glob("agent-*")) and not canary.exists()
    imported = [ln.split("|")[-1].strip() for ln in (tmp_path / "err").read_text().splitlines()
                if ln.startswith("import time:") and "|" in ln and "imported package" not in ln]
    ours = [m for m in imported if m in ("keeper", "agent", "lines") or m.startswith("jobenv")]
    assert ours == ["agent", "lines"] or ours == ["lines", "agent"], imported  # the agent's, once
    assert ("end 0 exit:0" in (run / f"host-{keeper.host_key()}.ledger").read_text())
