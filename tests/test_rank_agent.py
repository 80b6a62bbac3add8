"""The host agent's side of the quiet poll (jobenv/rank/agent.py): its beat moves one file's
mtime and never the run directory's, and news/<H> comes when, and only when, the ledger grew."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from jobenv.launch import ranks
from jobenv.rank.keeper import started
from test_launch_watch_requests import _end, _start
from test_launch_watch_supervise import _until
from test_rankwrap import HOST, POSIX_SHELLS


def test_a_quiet_host_moves_only_its_beat_and_a_rank_end_leaves_news_at_once(tmp_path):
    run, procs = _start(tmp_path, POSIX_SHELLS[0])
    news = run / "news" / HOST
    try:
        assert _until(news.exists, 5), "no news of the ranks' starts"
        os.unlink(news)  # as the supervisor takes it
        time.sleep(1.5)  # a beat for the hook lines read after the news
        news.unlink(missing_ok=True)
        beat, where = os.stat(run / f"host-{HOST}.beat").st_mtime_ns, os.stat(run).st_mtime_ns
        time.sleep(2.5)
        assert os.stat(run / f"host-{HOST}.beat").st_mtime_ns > beat, "the agent stopped beating"
        assert os.stat(run).st_mtime_ns == where, "a beat changed the run directory (a rename)"
        assert not news.exists(), "news without a ledger line"
        os.kill(ranks.read(str(run)).ranks[1].pid or 0, signal.SIGKILL)
        t = time.monotonic()
        assert _until(news.exists, 5) and time.monotonic() - t < 1.5, "the end's news waited for a beat"
        assert (ranks.read(str(run)).ranks[1].how, ranks.read(str(run)).ranks[1].signal) == ("signal", 9)
    finally:
        _end(run, procs)


def test_news_is_told_once_per_growth_and_never_through_a_link(tmp_path):
    """A rank planted `news` as a link to another directory: nothing is made there."""
    from jobenv.rank.agent import Agent

    a = Agent(str(tmp_path), "n1", str(tmp_path / "agent-n1"), started)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "news").symlink_to(elsewhere)
    (tmp_path / "host-n1.ledger").write_text("start 0 1 2 3 4 5.0\n")
    a.tell()
    assert os.listdir(elsewhere) == []
    (tmp_path / "news").unlink()
    a.tell()
    assert os.listdir(tmp_path / "news") == ["n1"]
    os.unlink(tmp_path / "news" / "n1")
    a.tell()  # nothing appended since: no news
    assert os.listdir(tmp_path / "news") == []
    with open(tmp_path / "host-n1.ledger", "a") as f:
        f.write("end 0 exit:0 6.0\n")
    a.tell()
    assert os.listdir(tmp_path / "news") == ["n1"]


def ranks_in_groups(tmp_path, n=2):
    """`n` wrapped ranks, each leading its own process group as Hydra's proxy makes them, once
    each has written its `start` and the host's agent runs."""
    from test_launch_watch_requests import PY, RANK, WRAPPER

    run = tmp_path / "run"
    run.mkdir()
    procs = []
    for r in range(n):
        env = {"PATH": "/usr/bin:/bin", "JOBENV_RUN_DIR": str(run), "PMI_RANK": str(r), "PMI_SIZE": str(n),
               "JOBENV_PYTHON": PY}
        procs.append(subprocess.Popen([POSIX_SHELLS[0], WRAPPER, PY, "-c", RANK, str(tmp_path / f"got{r}")],
                                      env=env, stdin=subprocess.DEVNULL, start_new_session=True))
    assert _until(lambda: len(ranks.read(str(run)).ranks) == n and (run / f"agent-{HOST}").exists(), 20)
    return run, procs


def every_rank_lost_then_the_agent_ends(run):
    assert _until(lambda: all(r.how == "lost" for r in ranks.read(str(run)).ranks.values()), 10), \
        ranks.read(str(run)).ranks
    assert _until(lambda: not (run / f"agent-{HOST}").exists(), 5), "the agent outlived the host's ranks"


def test_a_keeper_killed_with_its_process_group_is_recorded_lost_by_the_agent(tmp_path):
    """Hydra's proxy, after one rank failed, ends the others by SIGKILL to each rank's process
    group (seen on the real PBS: `EXIT CODE: 9`).  The agent was forked by one of those keepers;
    in its own session it outlives the group and writes `lost` for each keeper killed outright,
    so that `jobenv kill` from any host reads every rank as ended."""
    run, procs = ranks_in_groups(tmp_path)
    try:
        agent = int((run / f"agent-{HOST}").read_text().split()[0])
        assert os.getsid(agent) not in {os.getsid(p.pid) for p in procs}
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        every_rank_lost_then_the_agent_ends(run)
    finally:
        _end(run, procs)
