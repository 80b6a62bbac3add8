"""`jobenv runs list|show|prune` on run directories made by real launches (a local job, the
MPICH wheel's mpiexec, the selftest on gloo), retention, and run directories planted with
links, FIFOs, huge and ill-typed files."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import mpich
from launchkit import fresh_env, need_torch, save, tools

pytestmark = pytest.mark.e2e
HOSTILE = "<script>alert(1)</script>"


def jobenv(env: Dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jobenv", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def launched_job(d: Path, **extra: str) -> Dict[str, str]:
    """A saved local job of 2 ranks launched through the MPICH wheel's mpiexec."""
    mpich()
    home = d / "home"
    home.mkdir(parents=True)
    env = fresh_env(home, f"{tools(d / 'bin')}:/usr/bin:/bin", **extra)
    save(env, "--ranks-per-host", "2")
    return env


def runs_json(env: Dict[str, str], *args: str, skipped: int = 0) -> List[dict]:
    """`runs list --json`, which warns of nothing but `skipped` entries that are no run."""
    p = jobenv(env, "runs", "list", "--json", *args)
    assert p.returncode == 0 and only_skips(p.stderr, skipped), p.stderr
    return json.loads(p.stdout)


def only_skips(stderr: str, n: int) -> bool:
    lines = stderr.splitlines()
    return len(lines) == n and all(ln.startswith("jobenv: warning: skipping ") for ln in lines)


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Dict[str, str]:
    """Four real launches: the selftest (torch, gloo) on 1 and 2 ranks, a failing rank, a hostile command."""
    need_torch()
    env = launched_job(tmp_path_factory.mktemp("runs"))
    for size in ("1", "2"):
        p = jobenv(env, "launch", "-n", size, "--", "python3", "-m", "jobenv.selftest", "-q")
        assert p.returncode == 0, p.stdout + p.stderr
    assert jobenv(env, "launch", "--", "sh", "-c", 'test "$PMI_RANK" != 1 || exit 3').returncode == 3
    assert jobenv(env, "launch", "--", "echo", HOSTILE).returncode == 0
    return env


def test_list_names_every_launch_newest_first(history):
    runs = runs_json(history)
    assert [r["command"] for r in runs] == [["echo", HOSTILE], ["sh", "-c", 'test "$PMI_RANK" != 1 || exit 3'],
                                            ["python3", "-m", "jobenv.selftest", "-q"],
                                            ["python3", "-m", "jobenv.selftest", "-q"]]
    assert [r["nranks"] for r in runs] == [2, 2, 2, 1]
    for r in runs:
        assert r["nhosts"] == 1 and r["launcher"] == "mpiexec" and r["attempt"] == 0
        assert r["duration"] > 0 and r["run"].startswith("local-")
    assert [r["exit"] for r in runs] == [0, 3, 0, 0]
    first = runs[1]["first_failure"]
    assert (first["rank"], first["exit"], first["signal"]) == (1, 3, None) and first["description"] == "exit code 3"
    assert runs[0]["first_failure"] is None
    table = jobenv(history, "runs").stdout  # `jobenv runs` alone lists
    assert table.splitlines()[0].split()[:3] == ["run", "started", "attempt"] and HOSTILE in table
    assert runs_json(history, "-j", runs[0]["job"]) == runs and runs_json(history, "-j", "nosuchjob") == []


def test_show_gives_the_selftest_phases_of_every_rank(history):
    selftest = runs_json(history)[2]["run"]
    data = json.loads(jobenv(history, "runs", "show", "--json", selftest).stdout)
    assert data["timeline_source"].startswith("phases reported") and len(data["ranks"]) == 2
    for r in data["ranks"]:
        assert list(r["phases"]) == ["launch", "interpreter", "imports", "rendezvous", "first_collective",
                                     "first_step"]
        assert r["phases"]["imports"] > 0
    text = jobenv(history, "runs", "show", selftest.split("/")[1]).stdout  # the name alone is enough
    for word in ("python3 -m jobenv.selftest -q", "rendezvous", "first_step", "slowest rank", "start-up phases"):
        assert word in text, text
    assert [line.split() for line in text.splitlines() if line.startswith("outcome ")] == [["outcome", "ok"]]


def test_show_on_a_terminal_draws_the_timeline(history):
    """On a TTY (script(1) gives one) the rich chart follows the tables: a bar per rank."""
    p = subprocess.run(["script", "-qec", f"{sys.executable} -m jobenv runs show last", "/dev/null"],
                       env={**history, "TERM": "xterm", "COLUMNS": "120"}, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout
    assert "timeline" in p.stdout and "slowest start-up" in p.stdout and "\u2588" in p.stdout


def test_show_of_an_unknown_run_is_one_line(history):
    p = jobenv(history, "runs", "show", "../../etc")
    assert p.returncode == 3 and p.stderr.startswith("jobenv: error: no run") and p.stderr.count("\n") == 1


def test_retention_by_count_is_applied_by_launch(tmp_path):
    env = launched_job(tmp_path, JOBENV_RUNS_KEEP="2")
    for _ in range(3):
        assert jobenv(env, "launch", "--", "true").returncode == 0
    runs = runs_json(env)
    assert len(runs) == 2 and len(list((Path(env["JOBENV_HOME"]) / "runs").glob("*/*"))) == 2
    assert jobenv(env, "runs", "prune", "--keep", "1").stdout.endswith("1 run removed\n")
    assert [r["run"] for r in runs_json(env)] == [runs[0]["run"]]


def test_retention_by_age(tmp_path):
    env = launched_job(tmp_path)
    assert jobenv(env, "launch", "--", "true").returncode == 0
    assert jobenv(env, "launch", "--", "true").returncode == 0
    old, new = runs_json(env)[::-1]
    os.utime(old["path"], (time.time() - 40 * 86400,) * 2)
    assert jobenv(env, "runs", "prune", "--dry-run").stdout == f"would remove {old['run']}\n1 run to remove\n"
    assert jobenv(env, "launch", "--", "true").returncode == 0  # launch prunes: 30 days by default
    assert old["run"] not in [r["run"] for r in runs_json(env)] and not Path(old["path"]).exists()
    assert new["run"] in [r["run"] for r in runs_json(env)]


def test_hostile_run_directories(tmp_path):
    """Links are neither listed nor followed (prune removes no target; each is skipped with a
    warning), a FIFO summary does not block, an oversized or ill-typed summary reads as
    absent fields, never a traceback."""
    env = launched_job(tmp_path)
    assert jobenv(env, "launch", "--", "true").returncode == 0
    real = Path(runs_json(env)[0]["path"])
    jobdir = real.parent
    outside = tmp_path / "precious"
    (outside / "20200101-000000-1-a0").mkdir(parents=True)
    (outside / "20200101-000000-1-a0" / "keep").write_text("x")
    (jobdir / "20200101-000000-2-a0").symlink_to(outside / "20200101-000000-1-a0")
    (jobdir.parent / "local-linked").symlink_to(outside)
    fifo = jobdir / "20200101-000000-3-a0"
    fifo.mkdir()
    os.mkfifo(fifo / "summary.json")
    big = jobdir / "20200101-000000-4-a0"
    big.mkdir()
    (big / "summary.json").write_text(json.dumps({"command": ["x" * (2 << 20)]}))
    typed = jobdir / "20200101-000000-5-a0"
    typed.mkdir()
    (typed / "summary.json").write_text(json.dumps({"command": "\x1b]0;pwned\x07", "exit": "x", "nranks": -5,
                                                    "first_failure": [1], "started": "soon", "hosts": 7,
                                                    "launcher": "\x1b[2J", "job": "\x1b]0;x\x07"}))
    (typed / "phases.json").write_text(json.dumps({"ranks": [{"rank": "0", "phases": {"imports": -1}}, 5,
                                                             {"rank": 1e300, "phases": {}}]}))
    linked = jobdir / "20200101-000000-6-a0"
    linked.mkdir()
    (linked / "summary.json").symlink_to(real / "summary.json")
    runs = runs_json(env, skipped=2)  # the two links
    names = {r["run"].split("/", 1)[1] for r in runs}
    assert names == {real.name, fifo.name, big.name, typed.name, linked.name}
    by = {r["run"].split("/", 1)[1]: r for r in runs}
    assert by[linked.name]["state"] == by[big.name]["state"] == by[fifo.name]["state"] == "no summary"
    assert by[typed.name]["command"] == [] and by[typed.name]["exit"] is None and by[typed.name]["nranks"] == 0
    for name in names:
        p = jobenv(env, "runs", "show", name, timeout=30)
        assert p.returncode == 0 and only_skips(p.stderr, 2) and "\x1b" not in p.stdout, (name, p.stderr)
    p = jobenv(env, "runs", "prune", "--keep", "0", "--days", "1")
    assert p.returncode == 0 and only_skips(p.stderr, 2), p.stderr
    assert (outside / "20200101-000000-1-a0" / "keep").read_text() == "x"
    assert (jobdir / "20200101-000000-2-a0").is_symlink() and (jobdir.parent / "local-linked").is_symlink()
    assert not big.exists() and not typed.exists()


def test_a_runs_directory_of_another_user_is_refused(tmp_path, other_user):
    """Listing or pruning trusts the runs directory as the store is trusted: yours alone."""
    env = launched_job(tmp_path)
    assert jobenv(env, "launch", "--", "true").returncode == 0
    base = Path(env["JOBENV_HOME"]) / "runs"
    os.chown(base, other_user.uid, other_user.gid)
    for args in (["runs"], ["runs", "prune", "--keep", "0"], ["report", "last", "--html", str(tmp_path / "r.html")]):
        p = jobenv(env, *args)
        assert p.returncode == 6 and p.stderr.startswith("jobenv: error: runs directory ") and \
            "owned by uid" in p.stderr and p.stderr.count("\n") == 1, (args, p.stderr)
    assert len(list(base.glob("*/*"))) == 1
    os.chown(base, os.getuid(), os.getgid())
    base.chmod(0o777)
    p = jobenv(env, "runs")
    assert p.returncode == 6 and "writable by others" in p.stderr


def test_each_attempt_of_a_retried_launch_is_a_run(tmp_path):
    env = launched_job(tmp_path)
    assert jobenv(env, "launch", "--retries", "1", "--", "false").returncode == 1
    runs = runs_json(env)
    assert [(r["attempt"], r["exit"], r["command"]) for r in runs] == [(1, 1, ["false"]), (0, 1, ["false"])]
    assert runs[0]["run"].endswith("-a1") and runs[1]["run"].endswith("-a0")
    assert runs[0]["run"].split("-")[-2] == runs[1]["run"].split("-")[-2]  # one launch: the same pid


def test_no_entry_under_runs_changes_a_launch_or_breaks_the_history(tmp_path):
    """History is advisory (issue 24): a rank that makes a directory shaped like a run whose
    name no clock gives, beside its own, or plants links, FIFOs, garbage and deep JSON there,
    neither changes the launch's exit code nor crashes `runs`, `runs prune` or `report`;
    an entry that is no run is skipped with one warning line."""
    env = launched_job(tmp_path)
    plant = ('[ "$PMI_RANK" = 0 ] || exit 0; d=$(dirname "$JOBENV_RUN_DIR"); set -e; mkdir "$d/20261399-250000-7-a0"; '
             'mkfifo "$d/20200101-000000-8-a0"; ln -s / "$d/20200101-000000-9-a0"; '
             'python3 -c "print(\'[\' * 200000)" > "$JOBENV_RUN_DIR/phases.json"')
    p = jobenv(env, "launch", "--", "sh", "-c", plant)
    assert p.returncode == 0 and not p.stderr, p.stderr
    p = jobenv(env, "launch", "--", "true")  # and the launches after it
    assert p.returncode == 0 and not p.stderr, p.stderr
    p = jobenv(env, "launch", "--", "false")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    listed = json.loads(jobenv(env, "runs", "list", "--json").stdout)
    assert [r["exit"] for r in listed] == [1, 0, 0]
    jobdir = Path(listed[0]["path"]).parent
    odd = {"20261399-250000-7-a0": "its name holds no date", "20200101-000000-8-a0": "not a directory",
           "20200101-000000-9-a0": "not a directory"}
    for args in (["runs"], ["runs", "list", "--json"], ["runs", "show", "last"],
                 ["report", "all", "--html", str(tmp_path / "r.html")], ["runs", "prune", "--keep", "1"]):
        p = jobenv(env, *args)
        lines = p.stderr.splitlines()
        assert p.returncode == 0 and len(lines) == 3, (args, p.stderr)
        for name, why in odd.items():
            assert sum(f"jobenv: warning: skipping {jobdir / name}: " in ln and why in ln for ln in lines) == 1, \
                (args, p.stderr)
    assert all((jobdir / name).exists() or (jobdir / name).is_symlink() for name in odd)  # prune leaves them
    assert len(json.loads(jobenv(env, "runs", "list", "--json").stdout)) == 1


def test_report_honours_the_umask_and_writes_what_is_no_file_in_place(tmp_path, other_user, shared_tmp):
    """Issue 24: the report was made 0644 whatever the umask, and `--html /dev/null` (as root)
    renamed a regular file over /dev/null; `/dev/stdout` is standard output, nothing after it."""
    env = launched_job(tmp_path)
    assert jobenv(env, "launch", "--", "echo", "--token=s3cret").returncode == 0
    out = shared_tmp / "report.html"
    p = subprocess.run([sys.executable, "-m", "jobenv", "report", "--html", str(out)], env=env, capture_output=True,
                       text=True, timeout=120, umask=0o077)
    assert p.returncode == 0 and "s3cret" in out.read_text() and oct(out.stat().st_mode & 0o777) == "0o600", p.stderr
    seen = other_user.sh(f"cat {out}", check=False)
    assert seen.returncode != 0 and "s3cret" not in seen.stdout
    p = jobenv(env, "report", "--html", "/dev/stdout")
    assert p.returncode == 0 and p.stdout.startswith("<!DOCTYPE html>") and p.stdout.endswith("</html>\n"), p.stderr
    assert "s3cret" in p.stdout and not p.stderr
    fifo = tmp_path / "page"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    p = jobenv(env, "report", "--html", str(fifo))
    assert p.returncode == 0 and p.stdout == f"wrote {fifo} (1 run)\n", p.stderr
    assert reader.communicate(timeout=60)[0].startswith("<!DOCTYPE html>") and fifo.is_fifo()
    link = tmp_path / "link.html"
    link.symlink_to(out)
    p = jobenv(env, "report", "--html", str(link))
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and "name that file itself" in p.stderr, p.stderr


def test_a_ledger_no_one_can_write_does_not_stop_a_failover(tmp_path):
    """The bad-host ledger is history too: a rank that leaves a directory where its lock
    goes makes the failover warn, and the retry runs all the same."""
    env = launched_job(tmp_path)
    body = ('if [ "$JOBENV_RESTART_COUNT" = 0 ] && [ "$PMI_RANK" = 1 ]; then '
            'mkdir "$(dirname "$JOBENV_RUN_DIR")/bad-hosts.json.lock"; kill -9 $$; fi')
    p = jobenv(env, "launch", "--retries", "1", "--exclude-failed", "--", "sh", "-c", body)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "warning: bad-host ledger " in p.stderr and "not updated" in p.stderr and "retrying (2 of 2)" in p.stderr
