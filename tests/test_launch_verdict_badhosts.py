"""The bad-host ledger (jobenv.launch.verdict.badhosts): entries kept across writers, a hostile file
read as nothing (with one warning), and the line `jobenv show` prints per entry."""
from __future__ import annotations

import json
import os

from jobenv.launch.verdict import badhosts

ENTRY = {"host": "node2", "rank": 3, "how": "signal 9 (SIGKILL)", "evidence": "named", "run": "x-a0", "why": ""}


def test_entries_accumulate_and_are_described(tmp_path):
    warned = []
    badhosts.add(str(tmp_path), ENTRY, {}, warned.append)
    badhosts.add(str(tmp_path), dict(ENTRY, host="node4", rank=None, how="exit code 4", evidence="guessed"), {},
                 warned.append)
    got = badhosts.load(str(tmp_path), warned.append)
    assert [e["host"] for e in got] == ["node2", "node4"] and badhosts.retired(got + got) == ["node2", "node4"]
    assert badhosts.describe(got[0]).startswith("node2: signal 9 (SIGKILL) of rank 3, named; run x-a0 at ")
    assert badhosts.describe(got[1]).startswith("node4: exit code 4, guessed; run x-a0 at ")
    assert oct(os.stat(badhosts.path(str(tmp_path))).st_mode & 0o777) == "0o600" and not warned


def test_a_file_that_is_no_ledger_is_one_warning_and_bad_entries_are_skipped(tmp_path):
    warned = []
    p = tmp_path / badhosts.NAME
    assert badhosts.load(str(tmp_path), warned.append) == [] and not warned  # none yet
    p.write_bytes(b"\xff{not json")
    assert badhosts.load(str(tmp_path), warned.append) == [] and len(warned) == 1
    assert "cannot be read" in warned[0] and "ignoring it" in warned[0]
    p.write_text(json.dumps({"retired": [dict(ENTRY, at=1.0), dict(ENTRY, host="a b;rm", at=1.0),
                                         dict(ENTRY, at="soon"), dict(ENTRY, how="x" * 9999, at=1.0), 7]}))
    assert [e["host"] for e in badhosts.load(str(tmp_path), warned.append)] == ["node2"]
    os.unlink(p)
    os.mkfifo(p)  # a FIFO named like the ledger never blocks a launch
    assert badhosts.load(str(tmp_path), warned.append) == [] and len(warned) == 2


def test_a_ledger_no_launch_can_describe_is_skipped(tmp_path):
    """The ranks can write beside their run: a time localtime cannot take (huge, NaN,
    negative) or JSON nested past the parser's recursion never reaches `describe`."""
    warned = []
    p = tmp_path / badhosts.NAME
    p.write_text('{"retired": [' + ", ".join(json.dumps(dict(ENTRY, at=at)) for at in (1e300, -5, 2.0)) +
                 ', {"host": "node2", "at": NaN}]}')
    got = badhosts.load(str(tmp_path), warned.append)
    assert [e["at"] for e in got] == [2.0] and [badhosts.describe(e)[:5] for e in got] == ["node2"] and not warned
    p.write_text("[" * 100000)
    assert badhosts.load(str(tmp_path), warned.append) == [] and len(warned) == 1 and "cannot be read" in warned[0]
