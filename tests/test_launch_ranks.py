"""Reading what ranks left behind (tolerant of torn and hostile files), the summaries, and the
`launch` program's text."""
from __future__ import annotations

import os
import time
import subprocess

from jobenv.launch.plan import executable

from jobenv.launch import ranks
from jobenv.launch.verdict.summary import failure_count
from jobenv.rank import ledger
from jobenv.rank.ends import describe, first_failure, host_silent, infer_vanished, stopped_after, words
from jobenv.rank.verdict import Verdict
from launchkit import ending, set_ending
from jobenv.launch.plan.sizing import choose
from jobenv.launch.types import Request


def write(d, name, text):
    (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())


def test_read_and_first_failure(tmp_path):
    write(tmp_path, "host-node1.ledger", "start 0 90 1 100 2 10.0\nstart 1 91 1 101 2 10.1\nend 1 exit:3 12.5\n"
                                         "end 0 exit:0 19.0\nhook 0 100 7 10.5\nclean 0 18.0\n")
    write(tmp_path, "host-node2.ledger", "start 2 92 1 102 2 10.2\nend 2 signal:11 12.0\n"
                                         "start 3 93 1 103 2 10.3\n"  # still running
                                         "start 4 94 1 104 2 1\xff\nstart x 1 2 3 4 5 6\nend 5\n\xfe garbage\n"
                                         "start 5 95 104 1.0\nend 5 SIGSEGV 12.0\n"  # the old wrapper's: not read
                                         "ack 7 stacks 11.0\nend 6 exit:0")  # torn: written half-way
    write(tmp_path, "host-node2.beat", "11.0\n")
    for junk in ("host-.ledger", "host-node3.ledger.tmp", "rank-4.exit", "notes.txt"):
        write(tmp_path, junk, b"start 9 1 1 2 2 3.0\n")
    state = ranks.read(str(tmp_path))
    assert sorted(state.ranks) == [0, 1, 2, 3]
    r0 = state.ranks[0]
    assert (r0.pid, r0.wrapper_pid, r0.hook_pid, r0.clean, r0.clean_pid, r0.lost) == (100, 90, None, True, 100, False)
    assert sorted(state.hosts) == ["node1", "node2"] and state.hosts["node2"].ranks == [2, 3]
    assert state.hosts["node2"].beat and state.hosts["node1"].beat is None
    assert state.hosts["node2"].acks == {7: 11.0}
    first = first_failure(state)
    assert (first.rank, first.host, ending(first)) == (2, "node2", ("signal", 11))
    size = choose(["node1", "node2", "node3"], 2, Request(), "j")
    assert ranks.unfinished(state, size.nranks, size.host_of) == [
        "rank 3 on node2 still running", "rank 4 never started (placed on node3)",
        "rank 5 never started (placed on node3)"]
    assert ranks.read(str(tmp_path / "missing")).ranks == {}


def test_the_hook_to_signal_is_the_newest_running_one_with_its_start_time(tmp_path):
    """hook_pid/hook_start: what the host agent signals for a stack, the rank's newest hooked
    Python until it writes `clean`; a hook line without a start time is not a line of the format
    (nothing is read of it); hostile numbers are ASCII digits of bounded length or nothing."""
    write(tmp_path, "host-n1.ledger",
          "hook 0 100 5000 1.0\nclean 0 2.0\nhook 0 101 5100 3.0\n"  # prep.py exited, train.py runs
          "hook 1 200 6000 1.0\nclean 1 2.0\n"  # its only Python is exiting
          "hook 2 300 1.0\n"  # older hook: no start time
          "hook 3 400 \u0663\u0663 1.0\nhook 4 500 123456789012345678901 1.0\nhook 5 1234567890 7 1.0\n"
          "hook 6 600 7000 1.0\nhook 6 601 1.0\n"  # an older line supersedes too
          "hook 7 700 8000 1.0\n")
    state = ranks.read(str(tmp_path))
    got = {r: (s.hook_pid, s.hook_start, s.clean) for r, s in state.ranks.items()}
    assert got == {0: (101, 5100, False), 1: (None, None, True), 6: (600, 7000, False), 7: (700, 8000, False)}


def test_keeper_exit_records_are_normalized(tmp_path):
    """exit:N and signal:S, nothing else: the old wrapper's hedges (either:15, unknown:15) are no
    end of this format."""
    write(tmp_path, "host-node1.ledger", "end 0 exit:0 5.0\n")
    write(tmp_path, "host-node2.ledger", "end 1 signal:9 4.0\nend 2 exit:3 3.0\nend 3 either:15 6.0\n"
                                         "end 4 unknown:15 6.0\n")
    state = ranks.read(str(tmp_path))
    assert sorted(state.ranks) == [0, 1, 2] and [ending(state.ranks[r]) for r in range(3)] == \
        [("exit", 0), ("signal", 9), ("exit", 3)]
    assert [state.ranks[r].status for r in range(3)] == [0, 137, 3]
    assert [set_ending(ledger.RankState(0), end).status for end in
            ("exit:0", "exit:3", "signal:9", "signal:15", "lost", "vanished")] == [0, 3, 137, 143, None, None]
    assert not state.ranks[0].failed and first_failure(state).rank == 2
    assert words(state.ranks[1]) == "signal 9 (SIGKILL)"


def test_ledgers_are_read_incrementally_and_a_torn_line_waits_for_its_end(tmp_path):
    led = tmp_path / "host-n1.ledger"
    led.write_bytes(b"start 0 10 1 11 2 1.0\nend 0 sig")
    reader = ranks.Ledgers(str(tmp_path))
    assert reader.poll().ranks[0].how is None
    with open(led, "ab") as f:
        f.write(b"nal:9 2.0\nlost 1 3.0\n")
    state = reader.poll()
    assert ending(state.ranks[0]) == ("signal", 9) and ending(state.ranks[1]) == ("lost", None) and state.ranks[1].lost
    assert describe("lost").startswith("lost: its wrapper vanished")


def test_a_huge_ledger_is_read_in_bounded_pieces(tmp_path):
    """A ledger flooded by user code (the run directory is the user's) costs at most
    LEDGER_BYTES per read; the newest lines (the ends) are the ones kept."""
    with open(tmp_path / "host-n1.ledger", "wb") as f:
        f.write(b"start 0 10 1 11 2 1.0\n")
        f.write(b"x" * (ledger.LEDGER_BYTES * 3) + b"\n")  # one endless line
        f.write(b"end 0 exit:4 9.0\n")
    state = ranks.read(str(tmp_path))
    assert ending(state.ranks[0]) == ("exit", 4) and state.ranks[0].started == 1.0


def test_vanished_ranks_name_their_host_unless_a_failure_was_recorded_first(tmp_path):
    """After the launch: a rank with no end and no `lost` vanished with its agent; all of a
    host's ranks so: the host was lost, at its last beat.  A failure recorded before that
    beat (+ BEAT_S) stays first: the others may have died of it."""
    write(tmp_path, "host-n1.ledger", "start 0 10 1 11 2 1.0\nstart 1 12 1 13 2 1.0\nend 1 signal:15 30.0\n")
    write(tmp_path, "host-n2.ledger", "start 2 20 1 21 2 1.0\nstart 3 22 1 23 2 1.0\n")
    for host, beat in (("n1", 30.0), ("n2", 20.0)):
        write(tmp_path, f"host-{host}.beat", "")
        os.utime(tmp_path / f"host-{host}.beat", (beat, beat))
    state = ranks.read(str(tmp_path))
    assert first_failure(state).rank == 1  # nothing inferred while it runs
    assert sorted(r.rank for r in infer_vanished(state)) == [0, 2, 3]
    first = first_failure(state)
    assert (first.host, first.ended) == ("n2", 20.0) and host_silent(state, "n2") == [2, 3]
    assert host_silent(state, "n1") == []
    assert ranks.host_lost("n2", [2, 3], None) == "host n2 lost: ranks 2,3 stopped reporting"
    state.ranks[1].ended = 20.5  # within a beat of n2's last: it may have come first
    assert first_failure(state).rank == 1


def test_lines_of_a_rank_in_each_launchers_labels():
    cases = {"srun": [" 0: a", "10: b", " 1: c"], "mpich": ["[0] a", "[10] b", "[1] c"],
             "openmpi": ["[1,0]<stdout>:a", "[1,10]<stderr>:b", "[1,1]<stdout>:c"],
             "torchrun": ["[default0]:a", "[default10]:b", "[default1]:c"]}
    for fam, lines in cases.items():
        assert ranks.lines_of(lines + ["unlabelled"], fam, 10) == [lines[1]], fam
    assert ranks.lines_of(["[0] a"], "unknown", 0) == []


def test_describe():
    """Words are made from the integers the ledger reader gives, never parsed back: the keeper's
    `exit:N`/`signal:S` are the only ends (jobenv.rank.lines refuses any other spelling)."""
    assert describe("exit", 3) == "exit code 3"
    assert describe("exit", 137) == "exit code 137 (128+9: SIGKILL?)"
    assert describe("signal", None, 11) == "signal 11 (SIGSEGV)"
    assert describe("signal", None, 9) == "signal 9 (SIGKILL)"
    assert describe("signal", None, 64) == "signal 64"  # no name known: the number as it is
    assert describe(None) == "no end recorded"
    from jobenv.rank.lines import parse
    assert [parse(f"end 0 {t} 1.0") is not None for t in ("exit:143", "signal:15", "signal:9", "SIGSEGV", "lost",
                                                         "signal:99999", "exit:" + "9" * 40, "-1")] \
        == [True, True, True, False, False, False, False, False]


def test_tail_is_lenient(tmp_path):
    log = tmp_path / "rank-1.log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(30)) + b"caf\xe9 \x1b[31mred\r\n")
    got = ranks.tail(str(log), 3)
    assert got == ["line 28", "line 29", "caf\ufffd \\x1b[31mred"]
    log.write_bytes(b"")
    assert ranks.tail(str(log)) == [] and ranks.tail(str(tmp_path / "none")) == []


def test_compact():
    assert ranks.compact(["a", "b"]) == "a; b"
    assert ranks.compact([str(i) for i in range(10)], 3) == "0; 1; 2; and 7 more"


def test_run_dirs_and_private_files(tmp_path):
    d = ranks.make_run_dir(str(tmp_path / "runs"), "a0")
    assert oct(os.stat(d).st_mode & 0o777) == "0o700"
    f = os.path.join(d, "hostfile")
    ranks.write_private(f, "node1\n")
    ranks.write_private(f, "node2\n")
    assert open(f).read() == "node2\n" and oct(os.stat(f).st_mode & 0o777) == "0o600"
    assert sorted(os.listdir(d)) == ["hostfile", "supervisor"]
    host, pid, when = open(os.path.join(d, "supervisor")).read().split()  # who runs the attempt
    assert host == os.uname().nodename and int(pid) == os.getpid() and abs(float(when) - time.time()) < 60


def test_launch_program_survives_hostile_paths(tmp_path):
    odd = tmp_path / "it's $(odd) dir"
    (odd / "jobenv").mkdir(parents=True)
    (odd / "jobenv" / "__init__.py").write_text("")
    (odd / "jobenv" / "__main__.py").write_text("import sys\ndef main(argv):\n    print(argv)\n    return 0\n")
    (odd / "jobenv" / "launchflow.py").write_text("def run(argv):\n    return None\n")
    import sys

    text = executable.program_text(sys.executable, str(odd))
    path = executable.install({"JOBENV_HOME": str(tmp_path / "h")}, text)
    assert path == str(tmp_path / "h" / "bin" / "launch") and os.access(path, os.X_OK)
    env = {"PATH": "/usr/bin:/bin", "JOBENV_JOBID": "12 34"}
    out = subprocess.run([path, "a b", "$(x)", "--", "-n"], env=env, capture_output=True, text=True).stdout
    assert out.strip() == str(["launch", "--job", "12 34", "--", "a b", "$(x)", "--", "-n"])
    out = subprocess.run([path, "x"], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True).stdout
    assert out.strip() == str(["launch", "--", "x"])
    mtime = os.stat(path).st_mtime_ns
    executable.install({"JOBENV_HOME": str(tmp_path / "h")}, text)
    assert os.stat(path).st_mtime_ns == mtime  # unchanged: not rewritten


def test_launch_program_refuses_a_bin_dir_others_can_write(tmp_path):
    import pytest

    from jobenv.core.errors import BadRecord

    d = tmp_path / "h" / "bin"
    d.mkdir(parents=True)
    d.chmod(0o777)
    with pytest.raises(BadRecord, match="writable by others"):
        executable.install({"JOBENV_HOME": str(tmp_path / "h")}, "#!/bin/sh\n")


def test_names_int_cannot_read_and_fifos_are_skipped_never_fatal(tmp_path):
    """The run directory is shared with user code: a rank `²` ('²' is isdigit(), int()
    refuses it) raised ValueError, and a FIFO named like a ledger (or a rank's log) blocked
    open() for ever, in the snapshot taken at --timeout and in the summary."""
    write(tmp_path, "host-node1.ledger", "start 0 1 1 100 2 10.0\nstart \u00b2 1 2 3\nend \u0663 exit:0 2\n")
    os.mkfifo(tmp_path / "host-node9.ledger")
    os.mkfifo(tmp_path / "host-node9.beat")
    os.mkfifo(tmp_path / "rank-1.log")
    (tmp_path / "rank-2.log").mkdir()
    done = {}

    def body():
        done["state"] = ranks.read(str(tmp_path))
        done["tails"] = [ranks.tail(str(tmp_path / n)) for n in ("rank-1.log", "rank-2.log")]

    import threading

    t = threading.Thread(target=body, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "blocked on a FIFO"
    assert sorted(done["state"].ranks) == [0] and done["tails"] == [[], []]
    assert done["state"].hosts["node9"].beat is None
    assert ranks.rank_of("rank-12.log", "rank-", ("log",)) == 12
    assert ranks.rank_of("rank-\u00b2.log", "rank-", ("log",)) is None


def test_each_attempts_logs_are_set_aside_and_a_new_launch_clears_them_without_following_links(tmp_path):
    import pytest

    from jobenv.core.errors import BadInput

    logs, elsewhere = tmp_path / "logs", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "rank-0.log").write_text("not a log of ours\n")
    d = ranks.prepare_log_dir(str(logs))
    for r in (0, 1):
        (logs / f"rank-{r}.log").write_text(f"attempt 1 rank {r}\n")
    (logs / "notes.txt").write_text("mine\n")
    ranks.set_aside(d, 1)
    assert sorted(os.listdir(logs)) == ["attempt-1", "notes.txt"]
    assert (logs / "attempt-1" / "rank-1.log").read_text() == "attempt 1 rank 1\n"
    assert oct(os.stat(logs / "attempt-1").st_mode & 0o777) == "0o700"
    (logs / "rank-0.log").write_text("attempt 2\n")
    with pytest.raises(BadInput, match="cannot keep attempt 1's logs"):
        ranks.set_aside(d, 1)  # never into a directory that is there already
    os.symlink(elsewhere, logs / "attempt-2")
    ranks.prepare_log_dir(str(logs))  # the next launch: the earlier attempts' logs go
    assert sorted(os.listdir(logs)) == ["attempt-2", "notes.txt"]  # a link named like one is not ours
    assert (elsewhere / "rank-0.log").read_text() == "not a log of ours\n"


def test_a_rank_vanished_beside_a_recorded_failure_is_collateral(tmp_path):
    """One host: rank 1 recorded SIGKILL; rank 0 left no end because the launcher then killed
    it with its wrapper.  Its host was alive to record rank 1's end, so rank 1 is first, even
    when the agent's last beat (late on a loaded node) came well before that end."""
    write(tmp_path, "host-n1.ledger", "start 0 10 1 11 2 1.0\nstart 1 12 1 13 2 1.0\nend 1 signal:9 12.0\n")
    write(tmp_path, "host-n1.beat", "")
    os.utime(tmp_path / "host-n1.beat", (9.0, 9.0))
    state = ranks.read(str(tmp_path))
    assert [r.rank for r in infer_vanished(state)] == [0]
    first = first_failure(state)
    assert (first.rank, ending(first)) == (1, ("signal", 9))


def test_ranks_stopped_after_the_first_failure_are_counted_apart(tmp_path):
    """One fault, then the launcher's teardown: rank 1 exits 3; ranks 0 and 2 are TERMed
    (one by its signal, one as a shell's 143) after it, rank 3 vanishes on the same live
    host, rank 4 was SIGKILLed *before* rank 1 (a failure of its own), rank 5 segfaults after.
    On n2 the launcher killed wrappers and agent alike: rank 6 lost (its agent saw it),
    rank 7 vanished, its host's last beat just before the first failure.  Rank 8 died of SIGINT
    after it: stopped too."""
    write(tmp_path, "host-n1.ledger", "start 0 1 1 2 2 1.0\nstart 1 3 1 4 2 1.0\nstart 2 5 1 6 2 1.0\nstart 3 7 1 8 2 1.0\n"
                                      "start 4 9 1 10 2 1.0\nstart 5 11 1 12 2 1.0\n"
                                      "end 4 signal:9 4.0\nend 1 exit:3 5.0\nend 0 signal:15 5.5\n"
                                      "end 2 exit:143 5.6\nend 5 signal:11 5.7\n"
                                      "start 8 13 1 14 2 1.0\nend 8 signal:2 5.8\n")
    write(tmp_path, "host-n1.beat", "")
    write(tmp_path, "host-n2.ledger", "start 6 1 1 2 2 1.0\nstart 7 3 1 4 2 1.0\nlost 6 4.5\n")
    write(tmp_path, "host-n2.beat", "")
    os.utime(tmp_path / "host-n2.beat", (3.5, 3.5))
    state = ranks.read(str(tmp_path))
    infer_vanished(state)
    first = first_failure(state)
    assert first.rank == 4
    assert stopped_after(state, first) == [0, 2, 3, 6, 7, 8]
    assert failure_count(verdict(state), 9) == "(3 of 9 ranks failed; 6 were stopped after it)"
    alone = ranks.read(str(tmp_path))
    alone.ranks = {n: alone.ranks[n] for n in (1, 2)}
    assert failure_count(verdict(alone), 2) == \
        "(1 of 2 ranks failed; 1 was stopped after it)"


def verdict(state):
    """A failed attempt's verdict on `state` as read (nothing inferred)."""
    first = first_failure(state)
    return Verdict("failed", "rank", 1, 1, len(state.ranks), state, first=first, stopped=stopped_after(state, first))
