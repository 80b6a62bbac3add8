"""Every ending of a launch, said the same way everywhere (issue 31): the launch's exit code, its
printed summary, `runs list`, `runs show --json` (outcome, cause, exit, the first failure's exit and
signal as numbers) and the report's mark all come from the one verdict (jobenv.rank.verdict).
Real launches of a local 2-rank job through the MPICH wheel's mpiexec; a signal to the launch is
sent as a user would (^C to its process group, TERM to it, `jobenv kill`, pre-emption's USR1)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from launchkit import local_job
from test_rank_teardown import BOMB

pytestmark = pytest.mark.e2e

RANK1 = 'test "$PMI_RANK" != 1 || {}; sleep 20'
# (name, launch arguments, how to end it from outside or None, exit code, outcome, cause,
#  the first failure's (exit, signal) or None, a line the summary prints)
CASES = [
    ("all-ok", ["--", "true"], None, 0, "ok", "none", None, None),
    ("rank-exits-3", ["--", "sh", "-c", RANK1.format("exit 3")], None, 3, "failed", "rank", (3, None),
     "rank 1 on {host} failed first: exit code 3"),
    ("own-sigterm", ["--", "sh", "-c", RANK1.format("kill -TERM $$")], None, 143, "failed", "rank", (None, 15),
     "rank 1 on {host} failed first: signal 15 (SIGTERM)"),
    ("own-sigkill", ["--", "sh", "-c", RANK1.format("kill -KILL $$")], None, 137, "failed", "rank", (None, 9),
     "rank 1 on {host} failed first: signal 9 (SIGKILL)"),
    ("own-sigsegv", ["--", "sh", "-c", RANK1.format("kill -SEGV $$")], None, 139, "failed", "rank", (None, 11),
     "rank 1 on {host} failed first: signal 11 (SIGSEGV)"),
    ("teardown-abort", ["--", "python3", "{bomb}"], None, 0, "ok", "none", None,
     "then ended during interpreter teardown: signal 6 (SIGABRT); counted as a success"),
    ("timeout", ["--timeout", "3", "--", "sleep", "60"], None, 124, "interrupted", "timeout", None,
     "launch ran past --timeout 3 s: killed it"),
    ("idle-timeout", ["--idle-timeout", "3", "--", "sleep", "60"], None, 124, "interrupted", "idle-timeout", None,
     "launch printed nothing for --idle-timeout 3 s: killed it"),
    ("ctrl-c", ["--", "sleep", "60"], "^C", 130, "interrupted", "signal", None, "interrupted: "),
    ("term-to-launch", ["--", "sleep", "60"], "TERM", 143, "interrupted", "signal", None, "stopped by SIGTERM: "),
    ("jobenv-kill", ["--", "sleep", "60"], "kill", 143, "interrupted", "signal", None, "stopped by SIGTERM: "),
    ("preempted", ["--requeue", "--grace", "1", "--", "sleep", "60"], "USR1", 138, "interrupted", "preempted", None,
     "pre-empted: SIGUSR1 passed to the ranks"),
]


def _started(home: Path, n: int, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while sum(ln.startswith("start ") for f in home.glob("runs/*/*/host-*.ledger")
              for ln in f.read_text().splitlines()) < n:
        assert time.time() < deadline, "the ranks never started"
        time.sleep(0.1)


def _launch(env, args, end, home: Path):
    p = subprocess.Popen(["jobenv", "launch", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    if end is not None:
        _started(home, 2)
        if end == "^C":  # a terminal's ^C: SIGINT to the launch's whole process group
            os.killpg(p.pid, signal.SIGINT)
        elif end == "kill":
            k = subprocess.run(["jobenv", "kill"], env=env, capture_output=True, text=True, timeout=60)
            assert k.returncode == 0, k.stderr
        else:
            p.send_signal(getattr(signal, f"SIG{end}"))
    out, err = p.communicate(timeout=90)
    return p.returncode, err


def _jobenv(env, *args: str) -> str:
    p = subprocess.run(["jobenv", *args], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return local_job(tmp_path_factory.mktemp("endings"), 2)


@pytest.mark.parametrize("name,args,end,code,outcome,cause,first,said", CASES, ids=[c[0] for c in CASES])
def test_every_ending_is_said_the_same_everywhere(job, tmp_path, name, args, end, code, outcome, cause, first, said):
    home = Path(job["JOBENV_HOME"])
    bomb = tmp_path / "bomb.py"
    bomb.write_text(BOMB + "print('done', flush=True)\n")
    for old in home.glob("runs/*/*"):  # this case's run alone (the job is shared by the cases)
        subprocess.run(["rm", "-rf", str(old)], check=True)
    rc, err = _launch(job, [a.format(bomb=bomb) for a in args], end, home)
    host = os.uname().nodename
    assert rc == code, (rc, err)
    if said:
        assert said.format(host=host) in err, err
    shown = json.loads(_jobenv(job, "runs", "show", "--json", "last"))
    assert (shown["outcome"], shown["cause"], shown["exit"]) == (outcome, cause, code), shown
    ff = shown["first_failure"]
    assert (None if ff is None else (ff["exit"], ff["signal"])) == first, shown
    if first is not None:
        assert ff["rank"] == 1 and ff["host"] == host, ff
    listed = json.loads(_jobenv(job, "runs", "list", "--json"))[0]
    assert (listed["outcome"], listed["cause"], listed["exit"], listed["state"]) == \
        (outcome, cause, code, shown["state"]), listed
    assert shown["state"] == "ok" if outcome == "ok" else shown["state"].startswith(f"{outcome}: "), shown
    page = tmp_path / "report.html"
    _jobenv(job, "report", "last", "--html", str(page))
    html = page.read_text()
    badges = re.findall(r'<span class="badge (\w+)">([^<]*)</span>', html)
    section = re.findall(r'<section class="(\w+)"><h2>', html)
    assert section == [outcome], section
    assert badges == ([] if outcome == "ok" else [(outcome, shown["state"])]), badges
