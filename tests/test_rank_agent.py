"""The host agent's side of the quiet poll (jobenv/rank/agent.py): its beat moves one file's
mtime and never the run directory's, and news/<H> comes when, and only when, the ledger grew."""
from __future__ import annotations

import os
import signal
import time

from jobenv.launch import ranks
from test_launch_requests import _end, _start
from test_launch_supervise import _until
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
        assert ranks.read(str(run)).ranks[1].exit == "signal 9"
    finally:
        _end(run, procs)


def test_news_is_told_once_per_growth_and_never_through_a_link(tmp_path):
    """A rank planted `news` as a link to another directory: nothing is made there."""
    from jobenv.rank.agent import Agent

    a = Agent(str(tmp_path), "n1", str(tmp_path / "agent-n1"))
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
