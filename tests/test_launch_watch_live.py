"""Naming failures while the launch runs (jobenv.launch.watch.live), on the quiet poll: a rank's end
by its host's news, a lost host within LOST_S plus a rotation, a host whose agent alone died; a
failure is named at once while other ranks still run, and when every rank has already ended the
launch is ending anyway and the failure summary alone names it (no fourth line)."""
from __future__ import annotations

import math
import os

from jobenv.launch.watch import live
from jobenv.rank import ledger
from jobenv.launch.watch.live import FAIL_GRACE_S, Live
from test_rank_ledger import fill


def _news(d, host, line):
    with open(d / f"host-{host}.ledger", "a") as f:
        f.write(line + "\n")
    (d / "news").mkdir(exist_ok=True)
    (d / "news" / host).touch()


def test_a_failed_rank_is_named_at_the_poll_after_its_news(tmp_path):
    fill(tmp_path, 300)
    said: list = []
    w = live.Live(str(tmp_path), said.append)
    assert not w.poll(0.0) and said == []
    _news(tmp_path, "n217", "end 217 signal:9 12.0")
    w.poll(1.0)
    assert said == ["rank 217 on n217 failed: signal 9 (SIGKILL)"]


def test_a_lost_host_is_named_within_lost_s_and_a_rotation_and_not_before(tmp_path):
    hosts = 250
    fill(tmp_path, hosts)
    said: list = []
    w = live.Live(str(tmp_path), said.append)
    rotation = math.ceil(hosts / ledger.STEP_HOSTS)
    t = 0.0
    while not said and t < 60:
        for h in range(hosts):
            if h != 123:  # every agent beats but n123's
                os.utime(tmp_path / f"host-n{h}.beat", (100 + t, 100 + t))
        w.poll(t)
        t += live.POLL_S
    assert said == ["host n123 lost: rank 123 stopped reporting at " + said[0].rpartition(" at ")[2]], said
    assert live.LOST_S <= t <= live.LOST_S + (rotation + 1) * live.POLL_S, t


def test_a_host_whose_agent_died_after_its_ranks_ended_is_not_lost(tmp_path):
    """Its ends came without news (no agent to leave it): read before the host is named."""
    fill(tmp_path, 2)
    said: list = []
    w = live.Live(str(tmp_path), said.append)
    w.poll(0.0)
    with open(tmp_path / "host-n1.ledger", "a") as f:
        f.write("end 1 exit:0 12.0\n")
    for t in range(1, 30):
        os.utime(tmp_path / "host-n0.beat", (100 + t, 100 + t))
        w.poll(float(t))
    assert said == [] and (w.ledgers.state.ranks[1].how, w.ledgers.state.ranks[1].code) == ("exit", 0)


def _ledger(d, text):
    (d / "host-n1.ledger").write_text(text)
    (d / "host-n1.beat").write_text("")


def test_a_failure_beside_running_ranks_is_named_at_once_and_ends_the_launch_after_the_grace(tmp_path):
    _ledger(tmp_path, "start 0 10 11 20 21 1.0\nstart 1 12 13 22 23 1.0\nend 1 exit:3 2.0\n")
    said = []
    live = Live(str(tmp_path), said.append)
    assert live.poll(100.0) is False
    assert said == ["rank 1 on n1 failed: exit code 3"]
    assert live.poll(100.0 + FAIL_GRACE_S) is True


def test_a_failure_of_every_rank_at_once_is_left_to_the_summary_but_still_ends_the_launch(tmp_path):
    _ledger(tmp_path, "start 0 10 11 20 21 1.0\nstart 1 12 13 22 23 1.0\nend 0 exit:2 2.0\nend 1 exit:2 2.0\n")
    said = []
    live = Live(str(tmp_path), said.append)
    assert live.poll(100.0) is False and said == []
    assert live.poll(100.0 + FAIL_GRACE_S) is True  # a launcher that lingers is still ended
    assert not hasattr(live, "final") and os.path.exists(tmp_path / "host-n1.ledger")


class _Clock:
    """A fake monotonic clock whose `sleep` advances it and lets `agents(now)` act."""

    def __init__(self, agents) -> None:
        self.now, self.agents, self.sleeps = 0.0, agents, 0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s
        self.sleeps += 1
        self.agents(self.now)


def test_settle_waits_for_a_live_agents_lost_and_not_for_a_dead_host(tmp_path):
    """Hydra killed n0's keepers (its agent lives, beats, and writes `lost` two beats later);
    every process of n1 was killed (its beat stays still): settle returns once n0 has written."""
    fill(tmp_path, 2)

    def agents(now: float) -> None:
        os.utime(tmp_path / "host-n0.beat", (10 + now, 10 + now))
        if now >= 2.0 and "lost" not in (tmp_path / "host-n0.ledger").read_text():
            with open(tmp_path / "host-n0.ledger", "a") as f:
                f.write(f"lost 0 {12 + now}\n")

    clock = _Clock(agents)
    live.settle(str(tmp_path), clock, clock.sleep)
    state = ledger.read(str(tmp_path))
    assert state.ranks[0].how == "lost" and state.ranks[1].how is None
    assert 2.0 <= clock.now < live.SETTLE_S, clock.now


def test_settle_gives_up_on_hosts_whose_beats_stay_still_and_skips_a_run_with_every_end(tmp_path):
    fill(tmp_path, 2)  # srun's teardown took every host's agent with it: nobody will write
    clock = _Clock(lambda now: None)
    live.settle(str(tmp_path), clock, clock.sleep)
    assert live.DEAD_AFTER_S <= clock.now < live.DEAD_AFTER_S + 0.5, clock.now
    for h in range(2):
        with open(tmp_path / f"host-n{h}.ledger", "a") as f:
            f.write(f"end {h} exit:3 12.0\n")
    clock = _Clock(lambda now: None)
    live.settle(str(tmp_path), clock, clock.sleep)
    assert clock.sleeps == 0
