"""The supervisor's quiet poll (jobenv.rank.ledger.Ledgers.step): news read, a batch of beats
stat'ed in turn, a cost that does not grow with the hosts.  (The ledger lines themselves:
tests/test_launch_ranks.py.)"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobenv.rank import ledger

REPO = Path(__file__).resolve().parents[1]


def fill(d, hosts, t=10.0):
    for h in range(hosts):
        (d / f"host-n{h}.ledger").write_text(f"start {h} 9{h} 1 8{h} 2 {t}\n")
        (d / f"host-n{h}.beat").write_text("1\n")
        os.utime(d / f"host-n{h}.beat", (t, t))


def test_a_step_reads_a_ledger_on_its_news_only_and_takes_the_news(tmp_path):
    fill(tmp_path, 3)
    led = ledger.Ledgers(str(tmp_path))
    assert led.step() == ["n0", "n1", "n2"] and sorted(led.state.ranks) == [0, 1, 2]
    with open(tmp_path / "host-n1.ledger", "a") as f:
        f.write("end 1 exit:3 12.0\n")
    led.step()
    assert led.state.ranks[1].how is None  # no news, no read: nothing stat'ed but news/ and the beats
    (tmp_path / "news").mkdir()
    (tmp_path / "news" / "n1").touch()
    led.step()
    assert (led.state.ranks[1].how, led.state.ranks[1].code) == ("exit", 3) and os.listdir(tmp_path / "news") == []


def test_a_rotation_looks_at_every_host_and_finds_new_ones(tmp_path):
    fill(tmp_path, 250)
    led = ledger.Ledgers(str(tmp_path))
    looked = [led.step() for _ in range(3)]
    assert [len(x) for x in looked] == [100, 100, 50] and len({h for x in looked for h in x}) == 250
    fill(tmp_path, 251)  # a host whose agent never left news
    assert "n250" not in led.state.hosts
    led.step()
    assert led.state.ranks[250].host == "n250"  # the next rotation's listing


def test_news_through_a_link_is_not_taken(tmp_path):
    """`news` a link to another directory of the user's: its files are never removed."""
    fill(tmp_path, 1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "n0").write_text("keep\n")
    (tmp_path / "news").symlink_to(elsewhere)
    ledger.Ledgers(str(tmp_path)).step()
    assert (elsewhere / "n0").read_text() == "keep\n"


CHILD = """
import sys
from jobenv.rank.ledger import Ledgers
led = Ledgers(sys.argv[1])
for _ in range(int(sys.argv[3])):
    getattr(led, sys.argv[2])()
"""


def _stats(d, how, polls):
    """newfstatat/statx calls of `polls` polls (strace -c)."""
    out = d.parent / f"strace-{how}-{polls}"
    subprocess.run(["strace", "-f", "-c", "-o", str(out), sys.executable, "-c", CHILD, str(d), how, str(polls)],
                   check=True, capture_output=True, cwd=REPO)
    counts = re.findall(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(?:newfstatat|statx|stat|lstat)$",
                        out.read_text(), re.M)
    return sum(map(int, counts))


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_a_quiet_step_stats_a_batch_not_every_host(tmp_path):
    """1,000 hosts: a quiet `poll` stats 2,000 files; a quiet `step` at most STEP_HOSTS beats and
    the few files of a rotation's start, whatever the hosts."""
    run = tmp_path / "run"
    run.mkdir()
    fill(run, 1000)
    steps = 10  # one rotation: its listing, then 10 batches
    per_step = (_stats(run, "step", 1 + steps) - _stats(run, "step", 1)) / steps
    per_poll = (_stats(run, "poll", 1 + steps) - _stats(run, "poll", 1)) / steps
    assert per_poll >= 2000 and per_step <= ledger.STEP_HOSTS + 5, (per_poll, per_step)
