"""The ranks' Python hook (jobenv/rankhook/sitecustomize.py) in real ranks: real torch/gloo, real
mpiexec (the MPICH wheel's; Debian Open MPI and torchrun for the teardown soak).  Until the
wrapper exports them, a one-line sh shim stands in for it: JOBENV_HOOK_RANK from the launcher's
rank variable, JOBENV_LEDGER of the host."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import REPO, mpich
from jobenv.launch import ranks
from launchkit import BIN, TRAIN, local_job, need_torch, shell

HOOK = REPO / "jobenv" / "rankhook"
SHIM = 'JOBENV_HOOK_RANK=${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-$RANK}} exec "$@"'
SOAK_RUNS = int(os.environ.get("JOBENV_SOAK_RUNS", "10"))  # CI; the 200-run figures are in the README

# torchrun's variables from the launcher's, as the wrapper gives them
PRELUDE = r'''
import os, sys
for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"):
    if k in os.environ:
        os.environ.setdefault("RANK", os.environ[k])
os.environ.setdefault("WORLD_SIZE", os.environ.get("PMI_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("LOCAL_RANK", os.environ["RANK"])
'''

# launchkit's DDP script, cut before it releases the model: a DDP model that outlives
# destroy_process_group, which torch 2.13 aborted at exit on a busy node
DDP = PRELUDE + TRAIN[:TRAIN.index("dist.destroy_process_group()")] + "dist.destroy_process_group()\n"

# rank 0 blocks in a gloo all_reduce until rank 1, sleeping in Python, sees `release`
BLOCKED = PRELUDE + r'''
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1:
    while not os.path.exists("release"):
        time.sleep(0.05)
else:
    open("ready", "w").close()
t = torch.ones(1)
dist.all_reduce(t)  # rank 0 waits here
print("SUM", t.item(), flush=True)
'''
BLOCKED_AT = {0: BLOCKED.splitlines().index("dist.all_reduce(t)  # rank 0 waits here") + 1,
              1: BLOCKED.splitlines().index("        time.sleep(0.05)") + 1}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir(mode=0o700, parents=True)
    (d / "host-vm.ledger").touch()
    return d


def rank_env(d: Path, **extra: str) -> Dict[str, str]:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(d), "LANG": "C.UTF-8", "GLOO_SOCKET_IFNAME": "lo",
           "PYTHONPATH": str(HOOK), "JOBENV_LEDGER": str(d / "host-vm.ledger"), "JOBENV_RUN_DIR": str(d),
           "JOBENV_DUMP_SIGNAL": "38", "MASTER_PORT": str(free_port())}
    env.update(extra)
    return env


def launcher(kind: str, n: int) -> List[str]:
    if kind == "mpich":
        return [mpich(), "-n", str(n)]
    if kind == "openmpi":
        exe = shutil.which("mpirun.openmpi")
        if exe is None:
            pytest.skip("Debian Open MPI not installed")
        return [exe, "--allow-run-as-root", "--oversubscribe", "-n", str(n)]
    return [sys.executable, str(BIN / "torchrun"), "--standalone", f"--nproc-per-node={n}", "--no-python"]


def start(d: Path, prog: str, n: int = 1, kind: str = "mpich", **extra: str) -> subprocess.Popen:
    script = d / "prog.py"
    script.write_text(prog)
    argv = [*launcher(kind, n), "/bin/sh", "-c", SHIM, "sh", sys.executable, str(script)]
    return subprocess.Popen(argv, env=rank_env(d, **extra), cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def ledger(d: Path) -> List[List[str]]:
    return [line.split() for line in (d / "host-vm.ledger").read_text().splitlines()]


def wait_for(pred, what: str, limit: float = 120) -> None:
    end = time.monotonic() + limit
    while not pred():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_dumps_a_rank_blocked_in_a_gloo_all_reduce(tmp_path):
    """With --stacks (JOBENV_STACKS=1) faulthandler's C handler appends every thread's stack to
    stacks/rank-<R>.<pid>.txt, though the main thread is blocked in a collective: no thread of ours."""
    need_torch()
    d = run_dir(tmp_path)
    (d / "stacks").mkdir(mode=0o700)
    p = start(d, BLOCKED, n=2, JOBENV_STACKS="1")
    wait_for(lambda: (d / "ready").exists(), "rank 0 to reach all_reduce")
    time.sleep(0.5)
    pid = next(int(f[2]) for f in ledger(d) if f[:2] == ["hook", "0"])
    other = next(int(f[2]) for f in ledger(d) if f[:2] == ["hook", "1"])
    os.kill(pid, 38)
    dump = d / "stacks" / f"rank-0.{pid}.txt"
    wait_for(lambda: dump.exists() and "prog.py" in dump.read_text(), "the stack dump", 30)
    (d / "release").touch()
    out = p.communicate(timeout=120)[0]
    assert p.returncode == 0, out
    text = dump.read_text()
    assert oct(dump.stat().st_mode & 0o777) == "0o600"
    assert "in all_reduce" in text and f'prog.py", line {BLOCKED_AT[0]} in <module>' in text, text
    assert "SUM 2.0" in out
    assert (d / "stacks" / f"rank-1.{other}.txt").read_text() == ""  # armed, never asked


@pytest.mark.parametrize("ending,code,clean", [("pass", 0, True), ("sys.exit(0)", 0, True), ("sys.exit(3)", 3, True),
                                               ("1/0", 1, False), ("exit(3)", 3, True), ("quit('bye')", 1, True),
                                               ("exit(0)", 0, True), ("exit()", 0, True), ("exit(code=3)", 3, True),
                                               ("quit(code=0)", 0, True),
                                               ("import _sitebuiltins as s; assert type(exit) is s.Quitter"
                                                " and 'Ctrl-D' in repr(quit) and exit.eof and sys.exit.__module__ == 'sys'",
                                                0, True)])
def test_clean_when_main_ended_without_an_unhandled_exception(tmp_path, ending, code, clean):
    """`clean`: main ended without an unhandled exception and atexit ran.  sys.exit, exit and quit are
    left as they are (the old hook wrapped them to see a non-zero status); a clean that ends in exit N
    is exit N all the same: only a death by signal after `clean` is ever excused."""
    d = run_dir(tmp_path)
    p = start(d, f"import sys\n{ending}\n")
    out = p.communicate(timeout=60)[0]
    assert p.returncode == code, out
    rows = ledger(d)
    assert rows[0][:2] == ["hook", "0"], rows
    assert (["clean", "0"] in [r[:2] for r in rows]) is clean, rows


def test_without_its_ledger_the_hook_writes_nothing_and_the_program_runs(tmp_path):
    """The keeper makes the ledger before it starts the program; a hook that finds none (removed, or
    not made by us) creates nothing and never stands in the program's way."""
    d = run_dir(tmp_path)
    (d / "host-vm.ledger").unlink()
    p = start(d, "print('ran')\n")
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 0 and out == "ran\n", out
    assert not (d / "host-vm.ledger").exists()


def test_a_subprocess_of_the_rank_does_not_arm(tmp_path):
    d = run_dir(tmp_path)
    prog = r'''
import os, subprocess, sys
child = "import os, sys; print('CHILD', sorted(k for k in os.environ if k.startswith('JOBENV_') and 'HOOK' in k or k == 'JOBENV_LEDGER'), os.environ.get('PYTHONPATH'), 'rankhook' in repr(sys.modules.get('sitecustomize')))"
subprocess.run([sys.executable, "-c", child], check=True)
# the dump signal (--stacks): handled in the rank, neither blocked nor handled in a child, forked or exec'd
def masks():
    return [line for line in open("/proc/self/status").read().splitlines() if line.startswith(("SigBlk", "SigCgt"))]
print("RANK", *masks())
subprocess.run(["grep", "-E", "^Sig(Blk|Cgt)", "/proc/self/status"], check=True)
if os.fork() == 0:
    print(*masks(), flush=True)
    os._exit(0)
os.wait()
'''
    (d / "stacks").mkdir(mode=0o700)
    p = start(d, prog, PYTHONPATH=f"{HOOK}:/opt/mine", JOBENV_STACKS="1")
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 0, out
    assert "CHILD [] /opt/mine False" in out, out
    rank = next(line.split() for line in out.splitlines() if line.startswith("RANK"))
    assert int(rank[4], 16) & 1 << (38 - 1), out  # SigCgt of the rank itself
    masks = [int(w, 16) for line in out.splitlines() if line.startswith(("SigBlk", "SigCgt"))
             for w in line.split()[1::2]]
    assert len(masks) == 4 and not any(m & 1 << (38 - 1) for m in masks), out
    assert [r[0] for r in ledger(d)] == ["hook", "clean"]


def test_the_shadowed_sitecustomize_still_runs(tmp_path):
    d = run_dir(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("import os\nos.environ['MINE_RAN'] = __file__\n")
    p = start(d, "import os, sys\nprint('MINE', os.environ.get('MINE_RAN'), sys.modules['sitecustomize'].__file__)\n",
              PYTHONPATH=f"{HOOK}:{mine}")
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 0, out
    assert f"MINE {mine}/sitecustomize.py {mine}/sitecustomize.py" in out, out
    assert ledger(d)[0][:2] == ["hook", "0"]


@pytest.mark.parametrize("kind", ["mpich", "openmpi", "torchrun"])
def test_teardown_soak(tmp_path, kind):
    """A 2-rank DDP run whose model outlives destroy_process_group ends 0 every time (JOBENV_SOAK_RUNS runs)."""
    need_torch()
    failed = []
    for i in range(SOAK_RUNS):
        d = run_dir(tmp_path / str(i))
        p = start(d, DDP, n=2, kind=kind)
        try:
            out = p.communicate(timeout=180)[0]
        except subprocess.TimeoutExpired:
            p.kill()
            out = p.communicate()[0]
        cleans = sorted(r[1] for r in ledger(d) if r[0] == "clean")
        if p.returncode != 0 or cleans != ["0", "1"]:
            failed.append((i, p.returncode, cleans, out[-600:]))
    assert not failed, f"{len(failed)} of {SOAK_RUNS} runs failed: {failed[:3]}"


@pytest.mark.e2e
def test_launch_puts_the_hook_first_unless_no_hook(tmp_path):
    """`jobenv launch` gives each rank's Python the hook (which leaves PYTHONPATH as it was); --no-hook does
    not.  Without a sitecustomize of the site's, the hook's module is the one trace left in sys.modules."""
    env = local_job(tmp_path, 1)
    probe = "python3 -c 'import os, sys; print(\"HOOK\", sys.modules[\"sitecustomize\"].__file__, os.environ[\"PYTHONPATH\"])'"
    p = shell(env, f"jobenv launch -- {probe}")
    assert p.returncode == 0, p.stderr
    word, hook, path = p.stdout.split()
    assert (word, hook) == ("HOOK", str(HOOK / "sitecustomize.py")) and path.endswith(str(REPO)), p.stdout
    p = shell(env, f"jobenv launch --no-hook -- {probe}")
    assert p.returncode != 0 and "KeyError: 'sitecustomize'" in p.stderr, p.stdout + p.stderr


@pytest.mark.e2e
def test_a_stacks_request_reaches_a_rank_blocked_in_all_reduce_under_launch(tmp_path):
    """The whole chain: `jobenv launch --stacks`, the keeper's program arms the hook, the host agent carries
    out a `stacks` request by the dump signal, faulthandler writes the blocked rank's stack."""
    from jobenv.launch.watch import requests

    need_torch()
    env = local_job(tmp_path, 2)
    home = Path(env["HOME"])
    (tmp_path / "prog.py").write_text(BLOCKED)
    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc", "-c", "jobenv launch --stacks -- python3 prog.py"]
    p = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (tmp_path / "ready").exists(), "rank 0 to reach all_reduce")
        time.sleep(0.5)
        run = next(p for p in (home / ".jobenv" / "runs").glob("*/*") if p.is_dir())
        state = ranks.read(str(run))
        requests.send(str(run), "stacks")
        dump = run / "stacks" / f"rank-0.{state.ranks[0].hook_pid}.txt"
        wait_for(lambda: dump.exists() and "prog.py" in dump.read_text(), "rank 0's stack", 30)
        text = dump.read_text()
        assert "in all_reduce" in text and f'prog.py", line {BLOCKED_AT[0]} in <module>' in text, text
        other = run / "stacks" / f"rank-1.{state.ranks[1].hook_pid}.txt"  # rank 1 sleeps in Python, waiting for `release`
        wait_for(lambda: other.exists() and "prog.py" in other.read_text(), "rank 1's stack", 30)
        assert f'prog.py", line {BLOCKED_AT[1]} in <module>' in other.read_text()
    finally:
        (tmp_path / "release").touch()
        out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "SUM 2.0" in out, err


def test_a_program_that_closes_our_descriptors_gets_nothing_of_ours(tmp_path):
    """A rank that closes descriptors it did not open (os.closerange, a daemon library) and
    reuses their numbers: the hook holds none (it opens the ledger for each line), so nothing of
    the program's is touched and `clean` still lands in the ledger."""
    d = run_dir(tmp_path)
    (d / "stacks").mkdir(mode=0o700)
    prog = f'''
import os, time
os.closerange(3, 64)
fds = [os.open("{d}/mine-%d" % i, os.O_RDWR | os.O_CREAT, 0o600) for i in range(8)]
for fd in fds:
    os.write(fd, b"data\\n")
    os.lseek(fd, 0, 0)
time.sleep(0.5)
print("READ", [len(os.read(fd, 100)) for fd in fds], flush=True)
'''
    p = start(d, prog)
    out = p.communicate(timeout=60)[0]
    assert p.returncode == 0 and "READ [5, 5, 5, 5, 5, 5, 5, 5]" in out, out
    assert "Exception" not in out and "Traceback" not in out, out
    for i in range(8):
        assert (d / f"mine-{i}").read_text() == "data\n"
    assert [r[0] for r in ledger(d)] == ["hook", "clean"]
