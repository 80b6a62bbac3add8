"""`jobenv stage`'s words for the hosts' reports (jobenv.stage.progress): one phrase per report,
one plain line per host when stderr is no terminal."""
from __future__ import annotations

from jobenv.stage import progress


def test_each_report_is_one_phrase():
    staged = {"ok": True, "prefix": "/local/env", "bytes": 3e6, "seconds": 2.0}
    assert progress.describe(staged) == "staged /local/env: 3.0 MB in 2.0 s, 1.5 MB/s, verified"
    assert progress.describe({**staged, "relay": {"source": "parent"}}).endswith("verified, received from a peer")
    assert progress.describe({**staged, "relay": {"source": "fallback", "fallback": "no relay started within 5 s"}}) \
        .endswith("read from the shared file system (relay: no relay started within 5 s)")
    assert progress.describe({"ok": True, "unchanged": True, "prefix": "/l", "entries": 7}) == \
        "unchanged /l (7 entries verified)"
    assert progress.describe({"ok": True, "removed": True, "prefix": "/l"}) == "removed /l"
    assert progress.describe({"ok": True, "would_remove": True, "prefix": "/l"}) == "would remove /l"
    assert progress.describe({"ok": False, "error": "disk full"}) == "FAILED: disk full"


def test_without_a_terminal_each_host_done_is_one_line(capsys):
    p = progress.Progress(2, 100, tty=False)
    p.event({"host": "n1", "event": "progress", "bytes": 50})
    p.event({"host": "n1", "ok": False, "error": "no space\nleft"})
    p.event({"host": "n2", "ok": True, "removed": True, "prefix": "/l"})
    p.stop()
    assert capsys.readouterr().out.splitlines() == [r"n1: FAILED: no space\nleft [1/2 hosts]", "n2: removed /l [2/2 hosts]"]
