"""A run summary's verdict read back (jobenv.history.outcome): version 2 as recorded, hostile
fields as absent, version 1 summaries by the rule of their day."""
from __future__ import annotations

from jobenv.history.outcome import first_failure, verdict


def test_a_recorded_verdict_is_read_as_it_was_decided():
    s = {"version": 2, "outcome": "failed", "cause": "rank", "exit": 143}
    assert verdict(s, True, 143) == ("failed", "rank")  # a rank's own SIGTERM: never "interrupted"
    assert verdict({"outcome": "interrupted", "cause": "signal"}, True, 130) == ("interrupted", "signal")
    assert verdict({}, False, None) == ("interrupted", "none")  # no summary: the launch was killed


def test_hostile_fields_read_as_absent():
    assert verdict({"outcome": "pwned", "cause": "rank", "exit": 0}, True, 0) == ("ok", "none")
    assert verdict({"outcome": ["failed"], "cause": {}}, True, 3) == ("failed", "launcher")
    ff = first_failure({"rank": -4, "host": "\x1b]0;x\x07", "exit": "3", "signal": 999, "how": "boom"})
    assert ff == {"rank": 0, "host": "\\x1b]0;x\\x07", "how": None, "exit": None, "signal": None,
                  "description": "3"}  # the terminal escape made printable; a string is no exit code
    assert first_failure("rank 1") is None


def test_version_1_summaries_read_by_their_days_rule():
    assert verdict({"version": 1, "exit": 143, "interrupted": False}, True, 143) == ("interrupted", "signal")
    assert verdict({"version": 1, "exit": 130, "interrupted": True}, True, 130) == ("interrupted", "signal")
    assert verdict({"version": 1, "exit": 124, "expired": "timeout"}, True, 124) == ("interrupted", "timeout")
    v1 = {"version": 1, "exit": 3, "first_failure": {"rank": 1, "host": "h", "exit": "exit code 3"}}
    assert verdict(v1, True, 3) == ("failed", "rank")
    assert verdict({"version": 1, "exit": 1, "first_failure": None}, True, 1) == ("failed", "launcher")
    assert first_failure(v1["first_failure"]) == {"rank": 1, "host": "h", "how": None, "exit": None, "signal": None,
                                                   "description": "exit code 3"}
