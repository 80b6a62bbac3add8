"""Shared helpers: run the real `jobenv` command in a controlled environment; the suite's tiers
(docs/contributing.md#test-tiers), its real-cluster lock and its timing summaries."""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional

import pytest

REPO = Path(__file__).resolve().parents[1]
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"

# A pytest started in the background of a script (`pytest ... &`, as .ci/run runs the real-cluster
# tests beside the others) inherits SIGINT and SIGQUIT ignored, and so would every process a test
# starts: a ^C test would then test nothing (jobenv keeps an ignored SIGINT ignored, as nohup
# asks).  The tests run as from a terminal: both at their defaults for the processes they start.
for _sig in (signal.SIGINT, signal.SIGQUIT):
    if signal.getsignal(_sig) is signal.SIG_IGN:
        signal.signal(_sig, signal.default_int_handler if _sig == signal.SIGINT else signal.SIG_DFL)


def base_env(home: Path, extra: Optional[Mapping[str, str]] = None, path: Optional[str] = None) -> Dict[str, str]:
    """A minimal environment, as in a fresh login shell, plus `extra`."""
    env = {"HOME": str(home), "PATH": path or BASE_PATH, "JOBENV_HOME": str(home / ".jobenv"),
           "LANG": "C.UTF-8", "PYTHONPATH": str(REPO), "XDG_CONFIG_HOME": str(home / ".config")}
    env.update(extra or {})
    return env


def jobenv_program(tmp_path: Path) -> Path:
    """A `jobenv` program for this checkout whose argv[0] is its own absolute path, as a
    venv's console script is (`init --install` pins it), wherever this interpreter's lives."""
    exe = tmp_path / "venv-bin" / "jobenv"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path[:0] = [{str(REPO)!r}]\n"
                   "from jobenv.__main__ import main\nsys.exit(main())\n")
    exe.chmod(0o755)
    return exe


def jobenv(args: List[str], env: Mapping[str, str], check: bool = False, **kw) -> subprocess.CompletedProcess:
    """Run `python -m jobenv ARGS` as a user would run `jobenv ARGS`."""
    p = subprocess.run([sys.executable, "-m", "jobenv", *args], env=dict(env), capture_output=True,
                       text=True, errors="surrogateescape", timeout=120, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"jobenv {args} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def record(env: Mapping[str, str], job: Optional[str] = None) -> dict:
    args = ["show", "--json"] + (["--job", job] if job else [])
    return json.loads(jobenv(args, env, check=True).stdout)


def store_files(env: Mapping[str, str]) -> Dict[str, bytes]:
    d = Path(env["JOBENV_HOME"]) / "jobs"
    if not d.exists():
        return {}
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.endswith(".lock")}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def need(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        if os.environ.get("CI"):
            raise AssertionError(f"{program} is required in CI (.ci/run installs it)")
        pytest.skip(f"{program} is not installed")
    return path


def mpich() -> str:
    """The MPICH wheel's mpiexec, installed next to this interpreter (not another MPI's on PATH)."""
    exe = Path(sys.executable).parent / "mpiexec"
    if not exe.exists():
        if os.environ.get("CI"):
            raise AssertionError("the mpich wheel's mpiexec is required in CI")
        pytest.skip("mpich wheel not installed")
    return str(exe)


# ---------------------------------------------------------------- tiers
# The quick tier (`pytest --quick`, `bash .ci/run --quick`) is every test not marked `slow`.  A test
# is `slow` by what it uses, decided here at collection so that a new test lands in its tier with
# no list to update: a real cluster (any fixture over `cluster_pool`: also marked `cluster`, which
# .ci/run runs one at a time in a pytest of its own beside the parallel one), an end-to-end
# scenario (`e2e`: real launchers, schedulers, frameworks), a module of a package whose tests
# start many processes (SLOW_PACKAGES); or by an explicit `slow` mark.
QUICK_BUDGET_S = 5.0  # a quick-tier test slower than this (call phase) is named in the summary


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true",
                     help="the quick tier only: deselect tests marked slow (docs/contributing.md#test-tiers)")


# Tests mirror modules (tests/test_<pkg>_<module>.py): these packages' tests start ranks, keepers,
# agents and launchers (MPICH, Open MPI, torchrun: each rank a Python with torch), many
# processes a test, so every test of theirs, today's and tomorrow's, is in the full tier.
SLOW_PACKAGES = ("launch", "rank", "rankwrap", "rankhook", "selftest")


def slow_package(module: str) -> bool:
    """Whether tests/MODULE.py tests one of SLOW_PACKAGES (test_launch_x, not test_launcher_fit)."""
    return any(module == f"test_{pkg}" or module.startswith(f"test_{pkg}_") for pkg in SLOW_PACKAGES)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "cluster_pool" in item.fixturenames:
            item.add_marker(pytest.mark.cluster)
        if item.get_closest_marker("cluster") or item.get_closest_marker("e2e") or \
                slow_package(Path(str(item.fspath)).stem):
            item.add_marker(pytest.mark.slow)
    if config.getoption("--quick"):
        slow = [i for i in items if i.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [i for i in items if not i.get_closest_marker("slow")]


_E2E_TIMES = []
_OVER_BUDGET = []


def pytest_runtest_logreport(report):
    if report.when == "call" and "e2e" in report.keywords:
        _E2E_TIMES.append((report.nodeid, report.duration, report.outcome))
    if report.when == "call" and "slow" not in report.keywords and report.duration > QUICK_BUDGET_S:
        _OVER_BUDGET.append((report.nodeid, report.duration))


def pytest_terminal_summary(terminalreporter):
    """One timing line per end-to-end scenario (the CI budget is watched through these), and the
    quick-tier tests over their budget (each a candidate for `slow`, or for a quicker test)."""
    if _E2E_TIMES:
        terminalreporter.section("scenario timings")
        for nodeid, secs, outcome in sorted(_E2E_TIMES):
            terminalreporter.write_line(f"{secs:7.1f} s  {outcome:7}  {nodeid}")
    if _OVER_BUDGET:
        terminalreporter.section(f"quick-tier tests over {QUICK_BUDGET_S:.0f} s (mark them slow, or make them quick)")
        for nodeid, secs in sorted(_OVER_BUDGET, key=lambda t: -t[1]):
            terminalreporter.write_line(f"{secs:7.1f} s  {nodeid}")


# ---------------------------------------------------------------- machine-wide resources
class MachineLock:
    """An exclusive flock on a file in /tmp, shared by every pytest process on this machine
    (xdist workers, another checkout's run): what two of them must not do at once.  A lock
    already held by an ancestor (`flock /tmp/jobenv-cluster.lock pytest ...`, the old way) is
    ours: waiting for it would wait forever."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1

    def __enter__(self) -> "MachineLock":
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not self._held_by_ancestor():
                t = time.time()
                print(f"\nwaiting for {self.path} (another test run holds it)", file=sys.stderr)
                fcntl.flock(self.fd, fcntl.LOCK_EX)
                print(f"{self.path}: waited {time.time() - t:.0f} s", file=sys.stderr)
        return self

    def __exit__(self, *exc) -> None:
        os.close(self.fd)  # closing the descriptor releases the lock
        self.fd = -1

    def _held_by_ancestor(self) -> bool:
        ino = os.fstat(self.fd).st_ino
        holders = set()
        for line in Path("/proc/locks").read_text().splitlines():
            f = line.split()
            # "1: FLOCK  ADVISORY  WRITE 1234 fd:01:5678 0 EOF" (a blocked waiter has "->" first)
            if len(f) >= 6 and f[1] == "FLOCK" and f[5].rsplit(":", 1)[-1] == str(ino):
                holders.add(int(f[4]))
        pid = os.getppid()
        while pid > 1:
            if pid in holders:
                return True
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return False
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        return False


# one real cluster (Slurm, OpenPBS, Flux) at a time on a machine: they share /etc/hosts and munge
CLUSTER_LOCK = "/tmp/jobenv-cluster.lock"


class ClusterPool:
    """The real clusters of one session, each started once (on the first test that asks for
    it) under the machine's cluster lock, which this session holds from then to its end, and
    stopped at its end: a cluster's start is 10-60 s, and every test leaves it as it found it
    (the `jobs` fixtures wait until their jobs hold no node).  A start that failed fails each
    later test that asks, without starting again."""

    def __init__(self, tmp_path_factory) -> None:
        self.tmp = tmp_path_factory
        self.up: Dict[str, object] = {}
        self.failed: Dict[str, BaseException] = {}
        self.lock: Optional[MachineLock] = None

    def get(self, what: str, make, available, required_in_ci: bool = False):
        """The cluster called `what`, made by `make(workdir)` and started; a skip (a failure in CI
        where `required_in_ci`) naming why `available()` says it cannot run here."""
        if what in self.up:
            return self.up[what]
        if what in self.failed:
            raise AssertionError(f"{what} did not start earlier in this session") from self.failed[what]
        why = available()
        if why:
            if required_in_ci and os.environ.get("CI"):
                raise AssertionError(f"CI must run the {what}: {why}")
            pytest.skip(why)
        if self.lock is None:
            self.lock = MachineLock(CLUSTER_LOCK).__enter__()
        try:
            c = make(self.tmp.mktemp(what.split()[0].lower())).start()
        except BaseException as exc:
            self.failed[what] = exc
            raise
        print(f"\n{what} up in {c.startup_seconds:.2f} s")
        self.up[what] = c
        return c

    def stop(self) -> None:
        try:
            for c in reversed(list(self.up.values())):
                c.stop()  # type: ignore[attr-defined]
        finally:
            if self.lock is not None:
                self.lock.__exit__(None, None, None)


@pytest.fixture(scope="session")
def cluster_pool(tmp_path_factory) -> Iterator[ClusterPool]:
    pool = ClusterPool(tmp_path_factory)
    yield pool
    pool.stop()


@pytest.fixture
def slurm_cluster(cluster_pool):
    """The real 4-node Slurm cluster (tests/cluster/slurm.py), one per session; CI must run it."""
    from cluster.slurm import SlurmCluster, available
    return cluster_pool.get("slurm cluster", SlurmCluster, available, required_in_ci=True)


class OtherUser:
    """A second local user: the attacker on a shared node (another account, same /tmp)."""

    def __init__(self, name: str, uid: int, gid: int) -> None:
        self.name, self.uid, self.gid = name, uid, gid

    def sh(self, script: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """Run a POSIX sh script as this user (no groups, a minimal environment)."""
        argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--",
                "/bin/sh", "-c", script]
        env = {"PATH": BASE_PATH, "HOME": "/nonexistent", "LANG": "C.UTF-8"}
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, **kw)
        if check and p.returncode != 0:
            raise AssertionError(f"as {self.name}: {script!r} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
        return p


@pytest.fixture(scope="session")
def other_user() -> OtherUser:
    """A real second account (created once, as root: CI runs as root) to plant files as."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        if os.environ.get("CI"):
            raise AssertionError("CI runs as root with setpriv: the second-user tests must run")
        pytest.skip("needs root (to create a second local user) and setpriv")
    name = "jobenvmallory"
    with MachineLock("/tmp/jobenv-test-user.lock"):  # xdist workers: one useradd
        if subprocess.run(["id", "-u", name], capture_output=True).returncode != 0:
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name], check=True,
                           capture_output=True)
    import pwd
    pw = pwd.getpwnam(name)
    return OtherUser(name, pw.pw_uid, pw.pw_gid)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A fresh world-writable sticky directory shaped like /tmp, reachable by every user
    (pytest's own tmp_path sits under a private 0700 directory)."""
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="jobenv-shared-", dir="/tmp"))
    d.chmod(0o1777)
    yield d
    subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False)
