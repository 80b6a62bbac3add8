"""The supervisor's live watch (jobenv.launch.live) on ledgers as the rank keepers write them:
a failure is named at once while other ranks still run; when every rank has already ended
the launch is ending anyway and the failure summary alone names it (no fourth line)."""
from __future__ import annotations

import os

from jobenv.launch.live import FAIL_GRACE_S, Live


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
