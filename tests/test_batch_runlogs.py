"""`jobenv logs` of a saved job: every launch into it from run history, each with its rank
logs (real launches: a local job, the MPICH wheel's mpiexec), and run records whose noted
log directory or rank logs were planted."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import mpich
from launchkit import fresh_env, save, tools

pytestmark = pytest.mark.e2e
SAY = 'echo "$0 launch: rank $PMI_RANK"'


def said(out: str, what: str = " launch: rank ") -> List[str]:
    """The ranks' lines (not the headings, which quote the command)."""
    return [ln for ln in out.splitlines() if what in ln and not ln.startswith("--- run ")]


def jobenv(env: Dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobenv", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def saved_job(d: Path) -> Dict[str, str]:
    """A saved local job of 2 ranks (the MPICH wheel's mpiexec)."""
    mpich()
    home = d / "home"
    home.mkdir(parents=True)
    env = fresh_env(home, f"{tools(d / 'bin')}:/usr/bin:/bin")
    save(env, "--ranks-per-host", "2")
    return env


def launch(env: Dict[str, str], name: str, *flags: str) -> None:
    p = jobenv(env, "launch", "-n", "2", *flags, "--", "sh", "-c", SAY, name)
    assert p.returncode == 0, p.stdout + p.stderr


def runs(env: Dict[str, str]) -> List[dict]:
    """The job's runs, oldest first."""
    return list(reversed(json.loads(jobenv(env, "runs", "list", "--json").stdout)))


def run_dir(env: Dict[str, str], run: dict) -> Path:
    return Path(env["JOBENV_HOME"]) / "runs" / run["run"]


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> Dict[str, str]:
    """Launched into three times: --log-dir first/, without --log-dir, --log-dir second/."""
    d = tmp_path_factory.mktemp("runlogs")
    env = saved_job(d)
    launch(env, "first", "--log-dir", str(d / "first"))
    launch(env, "unlogged")
    launch(env, "second", "--log-dir", str(d / "second"))
    return env


def test_every_launch_into_a_saved_job_with_its_rank_logs_oldest_first(launched):
    job = runs(launched)[0]["job"]
    p = jobenv(launched, "logs", "-j", job)
    assert p.returncode == 0 and not p.stderr, p.stdout + p.stderr
    assert said(p.stdout) == ["first launch: rank 0", "first launch: rank 1", "second launch: rank 0", "second launch: rank 1"]
    headings = [ln for ln in p.stdout.splitlines() if ln.startswith("--- run ")]
    assert [h.split()[2] for h in headings] == [r["run"] + ":" for r in runs(launched)]
    assert "first/rank-1.log <==" in p.stdout and "second/rank-0.log <==" in p.stdout
    # the launch without --log-dir: one line naming it and how to keep logs next time
    hint = headings[1]
    assert "unlogged" in hint and "no per-rank logs" in hint and "--log-dir DIR" in hint and "--tee" in hint
    one = jobenv(launched, "logs", "-j", job, "--rank", "1")
    assert one.returncode == 0, one.stderr
    assert said(one.stdout) == \
        ["first launch: rank 1", "second launch: rank 1"]
    assert "rank-0.log" not in one.stdout
    assert jobenv(launched, "logs").stdout == p.stdout  # no -j: the newest saved job
    follow = jobenv(launched, "logs", "-f", timeout=30)  # nothing runs: prints and returns
    assert follow.returncode == 0 and follow.stdout == p.stdout, follow.stderr


def test_a_retried_launch_shows_each_attempt_from_where_it_was_set_aside(tmp_path):
    env = saved_job(tmp_path)
    p = jobenv(env, "launch", "-n", "2", "--retries", "1", "--log-dir", str(tmp_path / "logs"), "--",
               "sh", "-c", 'echo "attempt $JOBENV_RESTART_COUNT rank $PMI_RANK"; exit 3')
    assert p.returncode == 3, p.stderr
    out = jobenv(env, "logs", "--rank", "0")
    assert out.returncode == 0, out.stderr
    assert said(out.stdout, "attempt ") == ["attempt 0 rank 0", "attempt 1 rank 0"]
    assert "logs/attempt-1/rank-0.log <==" in out.stdout and "(2 ranks, failed: exit 3)" in out.stdout


def test_a_later_launch_with_the_same_log_dir_replaced_the_earlier_logs(tmp_path):
    env = saved_job(tmp_path)
    launch(env, "old", "--log-dir", str(tmp_path / "logs"))
    launch(env, "new", "--log-dir", str(tmp_path / "logs"))
    out = jobenv(env, "logs").stdout
    first, second = runs(env)
    assert f"--- run {first['run']}: sh -c" in out and f"replaced by run {second['run']}'s (same --log-dir)" in out
    assert said(out) == ["new launch: rank 0", "new launch: rank 1"]


def test_planted_rank_logs_are_skipped_and_never_block(tmp_path):
    env = saved_job(tmp_path)
    logs = tmp_path / "logs"
    launch(env, "real", "--log-dir", str(logs))
    (logs / "rank-1.log").unlink()
    os.mkfifo(logs / "rank-1.log")  # opening it for reading would block forever
    (tmp_path / "secret").write_text("do not show\n")
    (logs / "rank-2.log").symlink_to(tmp_path / "secret")
    p = jobenv(env, "logs", timeout=30)
    assert p.returncode == 0 and "real launch: rank 0" in p.stdout and "do not show" not in p.stdout
    warned = p.stderr.splitlines()
    assert len(warned) == 2 and all(w.startswith("jobenv: warning: skipping ") and "not a regular file" in w
                                    for w in warned), p.stderr


def test_a_noted_log_dir_of_another_user_or_a_link_is_refused(tmp_path, other_user, shared_tmp):
    env = saved_job(tmp_path)
    launch(env, "mine", "--log-dir", str(tmp_path / "logs"))
    theirs = shared_tmp / "theirs"
    other_user.sh(f"mkdir -m 755 {theirs} && echo 'planted line' > {theirs}/rank-0.log && chmod 644 {theirs}/rank-0.log")
    note = run_dir(env, runs(env)[0]) / "logdir.json"
    note.write_text(json.dumps({"log_dir": str(theirs)}))  # a rank rewrote its run directory's note
    p = jobenv(env, "logs")
    assert p.returncode == 0 and "planted line" not in p.stdout, p.stdout
    assert f"not read: log directory {theirs} is owned by uid {other_user.uid}" in p.stdout
    note.unlink()
    note.symlink_to(tmp_path / "elsewhere")  # a note is never read through a link
    (tmp_path / "elsewhere").write_text(json.dumps({"log_dir": str(theirs)}))
    p = jobenv(env, "logs")
    assert "planted line" not in p.stdout and "no per-rank logs" in p.stdout, p.stdout
    base = Path(env["JOBENV_HOME"]) / "runs"  # run history of another user: one line, exit 6
    os.chown(base, other_user.uid, other_user.gid)
    p = jobenv(env, "logs")
    assert p.returncode == 6 and p.stdout == "" and p.stderr.count("\n") == 1 and "owned by uid" in p.stderr, p.stderr
    os.chown(base, os.getuid(), os.getgid())


def test_follow_stops_when_the_newest_launch_ends(tmp_path):
    env = saved_job(tmp_path)
    logs = tmp_path / "logs"
    started = subprocess.Popen([sys.executable, "-m", "jobenv", "launch", "-n", "2", "--log-dir", str(logs), "--",
                                "sh", "-c", 'for i in 1 2 3 4; do echo "tick $i rank $PMI_RANK"; sleep 1; done'],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reaper = threading.Thread(target=started.wait)  # reaped as it ends: a zombie would look alive
    reaper.start()
    try:
        deadline = time.monotonic() + 30
        while not (logs / "rank-1.log").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        p = jobenv(env, "logs", "-f", timeout=60)
    finally:
        reaper.join(timeout=60)
    assert p.returncode == 0, p.stderr
    assert said(p.stdout, "tick 4") == ["tick 4 rank 0", "tick 4 rank 1"]
    headings = [ln.split(": ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("--- run ")]
    assert headings[0] == "running" and headings[-1].endswith("(2 ranks, ok)") and len(headings) == 2, p.stdout
