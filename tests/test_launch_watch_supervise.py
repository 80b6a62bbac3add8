"""`jobenv launch` on this host with real launchers and processes: supervision, the failure
summary, retries, per-rank logs, the `launch` executable under timeout/nohup/child scripts."""
from __future__ import annotations

import os
import re
import shlex
import signal
import time
from pathlib import Path

import pytest

from cluster.e2e import left_running
from launchkit import BIN, RESTORE, fresh_env, save, shell, tools

pytestmark = pytest.mark.e2e


@pytest.fixture
def job(tmp_path):
    """A local job of 2 ranks saved with the MPICH wheel's mpiexec; env for fresh shells."""
    if not (BIN / "mpiexec").exists():
        pytest.skip("the mpich wheel is not installed")
    home = tmp_path / "home"
    home.mkdir()
    bindir = tools(tmp_path / "bin")
    env = fresh_env(home, f"{bindir}:/usr/bin:/bin")
    save(env, "--ranks-per-host", "2")
    return env


def runs(env) -> list:
    return sorted(p for p in (Path(env["JOBENV_HOME"]) / "runs").glob("*/*") if p.is_dir())


def test_success_passes_output_and_exit_code(job):
    p = shell(job, "jobenv launch -- sh -c 'echo out-$PMI_RANK; echo err-$PMI_RANK >&2'")
    assert p.returncode == 0, p.stderr
    assert {"out-0", "out-1"} <= set(p.stdout.split()) and {"out-0", "out-1"}.isdisjoint(p.stderr.split())
    assert sorted(w for w in (p.stdout + p.stderr).split() if w.startswith("err-")) == ["err-0", "err-1"]


def test_dry_run_and_n_is_not_dry_run(job):
    p = shell(job, "jobenv launch --dry-run -n 1 -- hostname")
    mpiexec = job["PATH"].split(":")[0] + "/mpiexec"  # the launcher recorded at save, by absolute path
    assert p.returncode == 0 and p.stdout.split()[:3] == [mpiexec, "-n", "1"], p.stdout + p.stderr
    p = shell(job, "jobenv launch -n 1 -- sh -c 'echo ran $PMI_SIZE'")
    assert p.returncode == 0 and p.stdout.split() == ["ran", "1"], p.stderr


def test_bad_requests_are_one_line_errors(job):
    for args, words in ((["--nhosts", "2"], "only 1 host"), (["--hosts", "elsewhere"], "'elsewhere' is not in job"),
                        (["--launcher-args", "'unclosed"], "--launcher-args")):
        p = shell(job, "jobenv launch " + " ".join(shlex.quote(a) for a in args) + " -- true")
        assert p.returncode in (2, 5) and words in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_failed_rank_is_named_with_host_code_and_last_lines(job, tmp_path):
    rank = tmp_path / "rank.sh"
    rank.write_text("echo start-$RANK\nif [ $RANK = 1 ]; then printf 'bad byte \\377 here\\n'; echo dying; exit 3; fi\n"
                    "sleep 2\n")
    p = shell(job, f"jobenv launch -- sh {rank}")
    assert p.returncode != 0
    host = os.uname().nodename
    assert f"jobenv: rank 1 on {host} failed first: exit code 3" in p.stderr, p.stderr
    assert "jobenv:   | dying" in p.stderr and "bad byte" in p.stderr
    print(p.stderr)  # the README quotes this
    p = shell(job, f"jobenv launch --label -- sh {rank}")
    assert "jobenv: last lines of rank 1:\njobenv:   | [1] start-1\n" in p.stderr, p.stderr
    assert "[0]" not in p.stderr.split("last lines of rank 1:")[1]


def test_gpu_bind_follows_the_profile(tmp_path):
    home = tmp_path / "home"
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True)
    (d / "gpus.yaml").write_text("name: gpus\nscheduler: local\nlaunchers:\n  - argv: [mpiexec, -n, '{nranks}']\n"
                                 "gpus_per_host: 2\ngpu_bind: {var: CUDA_VISIBLE_DEVICES, map: reverse}\n")
    env = fresh_env(home, f"{tools(tmp_path / 'bin')}:/usr/bin:/bin", JOBENV_GPUS_PER_HOST="2")
    save(env, "--profile", "gpus")
    p = shell(env, "jobenv launch --gpu-bind -- sh -c 'echo $LOCAL_RANK:$CUDA_VISIBLE_DEVICES'")
    assert p.returncode == 0 and sorted(p.stdout.split()) == ["0:1", "1:0"], p.stdout + p.stderr
    p = shell(env, "jobenv launch -- sh -c 'echo ${CUDA_VISIBLE_DEVICES-unset}'")
    assert p.stdout.split() == ["unset", "unset"]  # opt-in
    save(env, "--profile", "local")
    p = shell(env, "jobenv launch --gpu-bind -- true")
    assert p.returncode == 5 and "declares no gpu_bind" in p.stderr


def test_an_unknown_launcher_is_one_error_line_not_mpichs_flags(tmp_path):
    """A profile whose launcher no family row names: exit 5, one line, nothing run."""
    home = tmp_path / "home"
    d = home / ".config" / "jobenv" / "profiles"
    d.mkdir(parents=True)
    (d / "cray.yaml").write_text("name: cray\nscheduler: local\nlaunchers:\n  - argv: [aprun, -n, '{nranks}']\n")
    bindir = tools(tmp_path / "bin")
    (bindir / "aprun").write_text(f"#!/bin/sh\necho ran > {tmp_path}/ran\n")
    (bindir / "aprun").chmod(0o755)
    env = fresh_env(home, f"{bindir}:/usr/bin:/bin")
    save(env, "--profile", "cray")
    for args in ("", "-n 1 "):
        p = shell(env, f"jobenv launch {args}-- true")
        assert p.returncode == 5 and p.stderr.startswith("jobenv: error: launcher 'aprun' is not one jobenv knows")
        assert p.stderr.count("\n") == 1 and not (tmp_path / "ran").exists(), p.stderr


def test_timeout_names_the_rank_that_never_finished(job):
    t = time.monotonic()
    p = shell(job, "jobenv launch --timeout 6 -- sh -c 'if [ $RANK = 1 ]; then sleep 300; fi; echo done-$RANK'")
    took = time.monotonic() - t
    assert p.returncode == 124 and took < 60, (took, p.stderr)
    assert "launch ran past --timeout 6 s: killed it" in p.stderr
    assert re.search(r"never finished: rank 1 on \S+ still running", p.stderr), p.stderr
    assert "rank 0" not in p.stderr.split("never finished:")[1]


def test_idle_timeout_kills_a_silent_launch(job):
    # a sleep no other test (or another checkout's tests on this machine) runs: counted below
    p = shell(job, "jobenv launch --idle-timeout 5 -- sh -c 'echo hi; sleep 300.117'")
    assert p.returncode == 124 and "printed nothing for --idle-timeout 5 s" in p.stderr, p.stderr
    assert not left_running("sleep 300.117"), "the launch's processes were not all killed"


def test_retries_keep_each_attempts_logs_and_count_restarts(job, tmp_path):
    marker = tmp_path / "failed-once"
    logs = tmp_path / "logs"
    script = (f"echo line-$RANK restart=$JOBENV_RESTART_COUNT of $JOBENV_MAX_RESTARTS; "
              f"if [ $RANK = 0 ] && [ ! -e {marker} ]; then touch {marker}; exit 7; fi")
    p = shell(job, f"jobenv launch --retries 1 --log-dir {logs} -- sh -c '{script}'")
    assert p.returncode == 0, p.stderr
    assert "failed first: exit code 7" in p.stderr and "retrying (2 of 2)" in p.stderr
    assert sorted(str(f.relative_to(logs)) for f in logs.rglob("*")) == \
        ["attempt-1", "attempt-1/rank-0.log", "attempt-1/rank-1.log", "rank-0.log", "rank-1.log"]
    assert (logs / "attempt-1" / "rank-1.log").read_text() == "line-1 restart=0 of 1\n"
    assert (logs / "rank-1.log").read_text() == "line-1 restart=1 of 1\n"
    assert len(runs(job)) == 2  # one run directory per attempt
    # a local job: no scheduler's count applies (SLURM_RESTART_COUNT is a Slurm job's), jobenv's resubmissions do
    p = shell(job, f"SLURM_RESTART_COUNT=5 JOBENV_RESUBMITS=2 jobenv launch --log-dir {logs} -- sh -c '{script}'")
    assert p.returncode == 0, p.stderr  # a new launch: the previous one's attempts are gone
    assert sorted(f.name for f in logs.iterdir()) == ["rank-0.log", "rank-1.log"]
    assert (logs / "rank-1.log").read_text() == "line-1 restart=2 of 0\n"


def test_spare_nodes_and_exclude_failed_need_retries(job):
    for flag in ("--spare-nodes 1", "--exclude-failed"):
        p = shell(job, f"jobenv launch {flag} -- true")
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        assert f"jobenv: error: {flag.split()[0]} needs --retries N" in p.stderr


@pytest.mark.parametrize("program,fault", [
    ("python3 -c 'import no_such_module_jobenv'", "import error"),
    ("python3 -c 'if True print(1)'", "syntax error"),
    ("sh -c 'echo usage: prog [-h] >&2; exit 2'", "usage (exit 2)"),
])
def test_retries_stop_when_the_failure_is_the_programs_own(job, program, fault):
    """A missing module, a syntax error, a command-line error: the next attempt would fail the
    same way, so --retries stops after the first (an exit 3, or a full disk, retries: below)."""
    p = shell(job, f"jobenv launch --retries 3 -- {program}")
    assert p.returncode != 0 and p.stderr.count(f"jobenv: not retrying: {fault}: ") == 1, p.stderr
    assert "retrying (2 of 4)" not in p.stderr and len(runs(job)) == 1, p.stderr
    p = shell(job, "jobenv launch --retries 1 -- sh -c 'echo No space left on device >&2; exit 1'")
    assert "retrying (2 of 2)" in p.stderr and "not retrying" not in p.stderr, p.stderr
    # a line that only mentions an error, a chained cause, an exit 2 with no usage line: retried
    for program in ("sh -c 'echo plugin skipped \\(ImportError: no cuda\\), using fallback; exit 1'",
                    "python3 -c 'try:\n import nosuch_jobenv\nexcept ImportError:\n raise RuntimeError(1)'",
                    "python3 /no/such/train.py"):
        p = shell(job, f"jobenv launch --retries 1 -- {program}")
        assert "retrying (2 of 2)" in p.stderr and "not retrying" not in p.stderr, p.stderr


def test_the_launch_ends_with_its_last_rank_not_at_the_agents_next_second(job):
    """The launcher (Hydra's proxy, a Slurm step) waits for the host agent too, which used to
    see the host's last rank end only at its next once-a-second scan: every launch and every
    retry ran up to a second long.  A wrapper now wakes it as its rank ends."""
    delays = []
    for _ in range(3):
        p = shell(job, "jobenv launch -- sh -c 'sleep 0.3'")
        done = time.time()
        assert p.returncode == 0, p.stderr
        newest = max(runs(job), key=lambda d: d.stat().st_mtime)
        ends = [float(line.split()[-1]) for f in newest.glob("host-*.ledger")
                for line in f.read_text().splitlines() if line.startswith("end ")]
        assert len(ends) == 2, ends
        delays.append(done - max(ends))
    assert min(delays) < 0.4, delays  # ~0.7 s before (the agent slept on after the ranks' 0.3 s)


def test_retries_stop_at_the_limit(job):
    p = shell(job, "jobenv launch --retries 2 -- sh -c 'exit 5'")
    assert p.returncode == 5 and p.stderr.count("retrying") == 2, p.stderr


def test_label_prefixes_output_with_the_rank(job):
    p = shell(job, "jobenv launch --label -- sh -c 'echo hello'")
    assert p.returncode == 0 and sorted(p.stdout.split()) == ["[0]", "[1]", "hello", "hello"], p.stdout


def test_launcher_args_pass_through(job):
    p = shell(job, "jobenv launch --dry-run --launcher-args='-genv FOO \"a b\"' -- true")
    assert "-genv FOO 'a b'" in p.stdout, p.stdout
    p = shell(job, "jobenv launch --launcher-args='-genv FOO \"a b\"' -- sh -c 'echo \"[$FOO]\"'")
    assert p.stdout.split("\n")[:2] == ["[a b]", "[a b]"], p.stdout + p.stderr


def test_non_utf8_output_passes_through_byte_for_byte(job):
    p = shell(job, "jobenv launch -n 1 -- printf 'caf\\351 \\377\\n'")
    assert p.returncode == 0 and p.stdout.encode("utf-8", "surrogateescape") == b"caf\xe9 \xff\n"


def test_launch_program_under_timeout_nohup_and_child_scripts(job, tmp_path):
    child = tmp_path / "child.sh"
    child.write_text("#!/bin/sh\nlaunch sh -c 'echo child-$PMI_RANK'\n")
    child.chmod(0o755)
    out = tmp_path / "nohup.out"
    p = shell(job, f"{RESTORE} && type -P launch && timeout 120 launch sh -c 'echo t-$PMI_RANK' && "
                   f"nohup launch sh -c 'echo n-$PMI_RANK' > {out} 2>&1 && {child}")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split()
    assert lines[0] == job["JOBENV_HOME"] + "/bin/launch"
    assert sorted(lines[1:]) == ["child-0", "child-1", "t-0", "t-1"]
    assert sorted(out.read_text().split()) == ["n-0", "n-1"]


def test_timeout_1_stops_the_whole_launch(job):
    t = time.monotonic()
    p = shell(job, f"{RESTORE} && timeout 5 launch sh -c 'sleep 300.189'; echo rc=$?")
    assert p.stdout.strip().endswith("rc=124") and time.monotonic() - t < 60, p.stdout + p.stderr
    assert not left_running("sleep 300.189"), "the launch's processes were not all killed"


def test_log_dir_is_the_users_own_and_never_followed_through_a_link(job, other_user, shared_tmp):
    """Another user's log directory (with `rank-0.log` linked to the victim's ~/.bashrc) is
    refused before any rank runs; a missing one is created private; an old link in the
    user's own directory is removed, never written through."""
    victim = Path(job["HOME"]) / ".bashrc"
    victim.write_text("keep me\n")
    theirs = shared_tmp / "logs"
    other_user.sh(f"mkdir -m 777 {theirs} && ln -s {victim} {theirs}/rank-0.log")
    p = shell(job, f"jobenv launch --log-dir {theirs} -- sh -c 'echo owned'")
    assert victim.read_text() == "keep me\n", "a rank wrote through the planted link"
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and f"uid {other_user.uid}" in p.stderr, p.stderr
    mine = shared_tmp / "mine"
    p = shell(job, f"jobenv launch --log-dir {mine} -- sh -c 'echo ran-$RANK'")
    assert p.returncode == 0 and (mine / "rank-1.log").read_text() == "ran-1\n", p.stderr
    assert mine.stat().st_mode & 0o777 == 0o700 and mine.stat().st_uid == os.getuid()
    (mine / "rank-0.log").unlink()
    (mine / "rank-0.log").symlink_to(victim)
    p = shell(job, f"jobenv launch --log-dir {mine} -- sh -c 'echo again-$RANK'")
    assert p.returncode == 0 and victim.read_text() == "keep me\n", p.stderr
    assert not (mine / "rank-0.log").is_symlink() and (mine / "rank-0.log").read_text() == "again-0\n"


def test_an_inherited_log_dir_is_never_trusted(job, other_user, shared_tmp):
    """JOBENV_LOG_DIR already in the environment (a nested launch, a user's export) reached
    the wrapper unchecked, unlike --log-dir: every rank's output went into another user's
    world-writable directory.  The launch sets the wrapper's protocol variables itself."""
    theirs = shared_tmp / "logs"
    other_user.sh(f"mkdir -m 777 {theirs}")
    p = shell({**job, "JOBENV_LOG_DIR": str(theirs)}, "jobenv launch -- sh -c 'echo secret-$RANK'")
    leaked = other_user.sh(f"ls {theirs}; cat {theirs}/rank-* 2>/dev/null", check=False).stdout
    assert p.returncode == 0 and p.stdout.count("secret-") == 2 and leaked == "", (p.stdout, p.stderr, leaked)


def _marked(token: str) -> list:
    """Pids whose environment holds JOBENV_TEST_TOKEN=token (a launch's every process)."""
    needle = f"\0JOBENV_TEST_TOKEN={token}\0".encode()
    out = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and needle in b"\0" + Path(f"/proc/{name}/environ").read_bytes() + b"\0":
                out.append(int(name))
        except OSError:
            pass
    return out


def _until(pred, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def _ranks_sleeping(token: str) -> int:
    """The ranks' `sleep 300`s (the host agent's `sleep 1` between beats carries the token too)."""
    n = 0
    for pid in _marked(token):
        try:
            n += Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00300\x00"
        except OSError:
            pass
    return n


@pytest.fixture
def tokened(job, tmp_path):
    """The job's env with a token every process of a launch inherits; whatever of it is
    still alive at the end is killed (by pid) so a failing test leaves nothing behind."""
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    yield {**job, "JOBENV_TEST_TOKEN": token}, token
    for pid in _marked(token):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def _popen_launch(env, script: str, **kw):
    import subprocess

    argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()], "/bin/bash", "--norc", "--noprofile", "-c",
            f"exec jobenv launch {script}"]
    return subprocess.Popen(argv, **kw)


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGQUIT", "SIGALRM"])
def test_no_rank_outlives_the_supervisor(tokened, tmp_path, sig):
    """Whatever kills `jobenv launch` (the OOM killer, Ctrl-\\, a stray signal), the
    launcher and every rank end within seconds instead of running on, reparented to init."""
    import subprocess

    env, token = tokened
    def no_core_and_default_signals():  # a suite run in a shell's background inherits SIGQUIT ignored
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for s in ("SIGQUIT", "SIGINT"):
            __import__("signal").signal(getattr(__import__("signal"), s), __import__("signal").SIG_DFL)

    p = _popen_launch(env, "-- sh -c 'sleep 300'", cwd=tmp_path, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, preexec_fn=no_core_and_default_signals)
    assert _until(lambda: _ranks_sleeping(token) == 2, 60), "the ranks never started"
    os.kill(p.pid, getattr(__import__("signal"), sig))
    p.wait(timeout=30)
    assert _until(lambda: not _marked(token), 15), [
        Path(f"/proc/{pid}/cmdline").read_bytes() for pid in _marked(token)]


def test_closed_stdout_is_output_for_nobody_not_a_missing_launcher(job):
    p = shell(job, "jobenv launch -- sh -c 'echo out-$RANK; echo err-$RANK >&2' >&-; echo rc=$? >&2")
    assert "cannot run" not in p.stderr and p.stderr.split()[-1] == "rc=0", p.stderr
    assert sorted(w for w in p.stderr.split() if w.startswith("err-")) == ["err-0", "err-1"]


def test_an_unread_output_never_stalls_the_ranks_and_sigterm_ends_it(tokened, tmp_path):
    """10 MB per rank into a pipe nobody reads: the ranks still finish, and SIGTERM ends
    `jobenv launch` (it used to sit in write() forever, the launcher and ranks behind it)."""
    import subprocess

    env, token = tokened
    p = _popen_launch(env, f"-- sh -c 'head -c 10000000 /dev/zero; touch {tmp_path}/done-$RANK'",
                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert _until(lambda: len(list(tmp_path.glob("done-*"))) == 2, 60), "the ranks were held up by our output"
        p.send_signal(15)
        p.wait(timeout=20)
    finally:
        p.kill()
        p.stdout.close()


def test_timeout_also_ends_a_daemon_a_rank_started_with_setsid(tokened):
    env, token = tokened
    p = shell(env, "jobenv launch --timeout 4 -- sh -c 'setsid sleep 300 </dev/null >/dev/null 2>&1 & sleep 300'")
    assert p.returncode == 124, p.stderr
    assert _until(lambda: not _marked(token), 10), "a setsid'd daemon of a rank outlived --timeout"


@pytest.fixture
def ompi_tokened(tmp_path):
    """A local job launched by Debian's Open MPI (its ranks each in a process group of
    their own, out of reach of the launcher's group), with the token as in `tokened`."""
    if not Path("/usr/bin/mpirun.openmpi").exists():
        pytest.skip("Open MPI is not installed")
    from test_launch_e2e import OMPI_ENV, profile

    home = tmp_path / "home"
    profile(home, "ompi-here", "local", "[mpirun.openmpi, --oversubscribe, -n, '{nranks}']")
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    env = fresh_env(home, f"{tools(tmp_path / 'bin', mpi=False)}:/usr/bin:/bin", **OMPI_ENV,
                    JOBENV_TEST_TOKEN=token)
    save(env, "--profile", "ompi-here", "--ranks-per-host", "2")
    yield env, token
    for pid in _marked(token):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def test_no_open_mpi_rank_outlives_the_supervisor(ompi_tokened, tmp_path):
    import subprocess

    env, token = ompi_tokened
    p = _popen_launch(env, "-- sh -c 'sleep 300'", cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert _until(lambda: _ranks_sleeping(token) == 2, 60), p.stderr.read1() if p.poll() is not None else ""
    p.kill()
    p.wait(timeout=30)
    p.stderr.close()
    assert _until(lambda: not _marked(token), 15)


def test_exit_codes_of_128_plus_a_signal_are_exit_codes(tokened):
    """A rank that exits 147 (128 + SIGSTOP's number) ends like any failure instead of
    stopping its wrapper and hanging the launch; exit 143 is not reported as SIGTERM."""
    env, _ = tokened
    host = os.uname().nodename
    for code in (147, 143):
        t = time.monotonic()
        p = shell(env, f"timeout -s KILL 30 jobenv launch -- sh -c 'if [ $RANK = 1 ]; then exit {code}; fi'")
        assert time.monotonic() - t < 25 and p.returncode == code, (code, p.returncode, p.stderr)
        assert f"rank 1 on {host} failed first: exit code {code} (" in p.stderr, p.stderr


def test_run_directories_are_made_only_under_the_users_own(job, other_user, shared_tmp):
    """The store's `runs` linked to another user's directory: refused, nothing made there
    (its owner could swap our run directory for one of theirs under the ranks)."""
    theirs = shared_tmp / "runs"
    other_user.sh(f"mkdir -m 777 {theirs}")
    (Path(job["JOBENV_HOME"]) / "runs").symlink_to(theirs)
    p = shell(job, "jobenv launch -- sh -c 'echo ran'")
    assert "ran" not in p.stdout and list(theirs.iterdir()) == [], p.stdout + p.stderr
    assert p.returncode == 6 and f"uid {other_user.uid}" in p.stderr and p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("plant", [
    'printf "start \u00b2 1 2 3\\nend \u00b2 exit:3 4\\n" >> "$JOBENV_LEDGER"',
    'mkfifo "$JOBENV_RUN_DIR/host-node9.ledger" "$JOBENV_RUN_DIR/host-node9.beat"',
], ids=["superscript-digit", "fifo"])
def test_a_planted_record_name_neither_stops_the_timeout_nor_tracebacks(tokened, plant):
    """A rank writes a rank `²` ('²' is isdigit(), int() refuses it) or a FIFO named
    like a ledger into JOBENV_RUN_DIR: the snapshot taken at --timeout raised (or blocked),
    and supervise.run's `finally` waited for a launcher nobody had killed: --timeout 3
    never fired; after a failure the summary was a traceback, exit 1."""
    env, _ = tokened
    plant = f"if [ $RANK = 0 ]; then {plant}; fi"
    t = time.monotonic()
    p = shell(env, f"timeout -s KILL 40 jobenv launch --timeout 3 -- sh -c '{plant}; sleep 60'")
    took = time.monotonic() - t
    assert p.returncode == 124 and took < 30, (p.returncode, f"{took:.0f} s", p.stderr[-2000:])
    p = shell(env, f"timeout -s KILL 40 jobenv launch -- sh -c '{plant}; exit 3'")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr[-2000:]


def test_an_unread_stdout_does_not_hold_the_launch_past_its_timeout(tokened, tmp_path):
    """`jobenv launch --timeout 3 ... | (sleep 20)`: the ranks end, but waiting for our
    output to be written had no deadline, so the launch returned when the reader did.
    Past the --timeout the rest is given up, and counted as dropped."""
    import subprocess

    env, _ = tokened
    err = tmp_path / "err"
    with open(err, "wb") as ef:
        p = _popen_launch(env, "--timeout 3 -- sh -c 'head -c 4000000 /dev/zero'", cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=ef)
        t = time.monotonic()
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            p.kill()
            p.wait()
            p.stdout.close()
    took = time.monotonic() - t
    assert rc is not None and took < 15, (rc, f"{took:.0f} s", err.read_text()[-1000:])
    assert "bytes of output dropped" in err.read_text()


def test_a_directory_named_like_a_rank_log_is_one_error_line(job, tmp_path):
    """A directory `rank-0.log` in the --log-dir: removing the previous attempt's logs
    failed with `[Errno 21]` and exit 1; it is one line naming it, exit 5, before any rank."""
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o700)
    (logs / "rank-0.log").mkdir()
    p = shell(job, f"jobenv launch --log-dir {logs} -- sh -c 'echo ran'")
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "rank-0.log" in p.stderr, p.stderr
    assert "Errno" not in p.stderr and not (logs / "rank-1.log").exists()


def test_a_reader_gone_ends_the_launch_as_sigpipe_ends_a_plain_launcher(tokened):
    """`jobenv launch -- yes | head -1`: plain mpiexec dies of SIGPIPE and ends its ranks;
    our writer swallowed the EPIPE and the launch ran for ever, writing for nobody."""
    env, token = tokened
    t = time.monotonic()
    p = shell(env, "timeout -s KILL 30 jobenv launch -- sh -c 'yes out-$RANK' | head -1; "
                   "echo \"rc=${PIPESTATUS[0]}\" >&2")
    took = time.monotonic() - t
    assert p.stdout.startswith("out-") and took < 20, (f"{took:.0f} s", p.stderr[-1000:])
    assert p.stderr.split()[-1] == "rc=141", p.stderr[-1000:]
    assert _until(lambda: not _marked(token), 10), "ranks outlived the launch"


# ------------------------------------------------------------------ failures named as they happen
# -disable-auto-cleanup: Hydra leaves the other ranks running after one fails, as srun does
# without --kill-on-bad-exit (the others then wait in a collective for ever)
_LEAVE = "--launcher-args -disable-auto-cleanup"


@pytest.mark.parametrize("kill,how", [
    ("kill -9 $$", "signal 9 (SIGKILL)"),
    # kill -9 of a rank's wrapper: nothing of it records an end; its host's agent does
    ("kill -9 $PPID", "lost: its wrapper vanished"),
], ids=["rank", "wrapper"])
def test_a_rank_or_wrapper_killed_with_sigkill_is_named_at_once_and_the_rest_ended(tokened, kill, how):
    env, token = tokened
    t = time.monotonic()
    p = shell(env, f"timeout -s KILL 60 jobenv launch {_LEAVE} -- "
                   f"sh -c 'if [ $RANK = 1 ]; then sleep 1; {kill}; fi; sleep 300'")
    took = time.monotonic() - t
    host = os.uname().nodename
    # named at once by the live watch while rank 0 still runs; Hydra may end rank 0 within the
    # watch's first poll, and then the summary alone names it (jobenv.launch.watch.live)
    live = p.stderr.count(f"jobenv: rank 1 on {host} failed: {how}\n")
    assert live <= 1 and p.stderr.count("jobenv: ") <= 5 + live, p.stderr
    assert f"rank 1 on {host} failed first: {how}" in p.stderr and took < 20, (took, p.stderr)
    assert p.returncode != 0 and _until(lambda: not _marked(token), 15)


def test_every_process_of_the_host_killed_names_the_host(tokened):
    """kill -9 of the ranks, their wrappers and the host's agent (what a dead node leaves):
    no line from anything on the host; the summary names the host lost, at its last beat."""
    import subprocess

    env, token = tokened
    p = _popen_launch(env, f"{_LEAVE} -- sh -c 'sleep 300'", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert _until(lambda: _ranks_sleeping(token) == 2, 60), "the ranks never started"
    time.sleep(1.5)  # the agent's first beats
    launch = {p.pid} | {pid for pid in _marked(token)
                        if Path(f"/proc/{pid}/comm").read_text().strip() in ("mpiexec", "hydra_pmi_proxy", "python3")
                        or b"jobenv" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3]}
    doomed = set(_marked(token)) - launch
    for pid in doomed:  # a node dies at once: stopped first, no keeper outlives its program to write its end
        os.kill(pid, signal.SIGSTOP)
    for pid in doomed:
        os.kill(pid, 9)
    _, err = p.communicate(timeout=60)
    host = os.uname().nodename
    assert re.search(rf"host {host} lost: ranks 0,1 stopped reporting at \d\d:\d\d:\d\d first", err.decode()), err
