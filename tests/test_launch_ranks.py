"""Reading what ranks left behind (tolerant of torn and hostile files), the summaries, and the
`launch` program's text."""
from __future__ import annotations

import os
import subprocess

from jobenv.launch import executable, ranks
from jobenv.launch.sizing import Request, choose


def write(d, name, text):
    (d / name).write_bytes(text if isinstance(text, bytes) else text.encode())


def test_read_and_first_failure(tmp_path):
    write(tmp_path, "rank-0.start", "0 node1 100 10.0\n")
    write(tmp_path, "rank-0.exit", "0 node1 0 19.0\n")
    write(tmp_path, "rank-1.start", "1 node1 101 10.1\n")
    write(tmp_path, "rank-1.exit", "1 node1 3 12.5\n")
    write(tmp_path, "rank-2.start", "2 node2 102 10.2\n")
    write(tmp_path, "rank-2.exit", "2 node2 SIGSEGV 12.0\n")
    write(tmp_path, "rank-3.start", "3 node2 103 10.3\n")  # still running
    for junk in ("rank-4.exit", "rank-x.start", "rank-5.start.tmp", "notes.txt"):
        write(tmp_path, junk, b"\xff\xfe garbage")
    write(tmp_path, "rank-6.exit", "")  # torn: written half-way
    state = ranks.read(str(tmp_path))
    assert sorted(state.ranks) == [0, 1, 2, 3]
    first = ranks.first_failure(state)
    assert (first.rank, first.host, first.exit) == (2, "node2", "SIGSEGV")
    size = choose(["node1", "node2", "node3"], 2, Request(), "j")
    assert ranks.unfinished(state, size.nranks, size.host_of) == [
        "rank 3 on node2 still running", "rank 4 never started (placed on node3)",
        "rank 5 never started (placed on node3)"]
    assert ranks.read(str(tmp_path / "missing")).ranks == {}


def test_wrapper_exit_records_are_normalized(tmp_path):
    write(tmp_path, "rank-0.exit", "0 node1 exit:0 5.0\n")
    write(tmp_path, "rank-1.exit", "1 node2 signal:9 4.0\n")
    write(tmp_path, "rank-2.exit", "2 node2 exit:3 3.0\n")
    state = ranks.read(str(tmp_path))
    assert [state.ranks[r].exit for r in range(3)] == ["0", "signal 9", "3"]
    assert not state.ranks[0].failed and ranks.first_failure(state).rank == 2
    assert ranks.describe_exit(state.ranks[1].exit) == "signal 9 (SIGKILL)"


def test_lines_of_a_rank_in_each_launchers_labels():
    cases = {"srun": [" 0: a", "10: b", " 1: c"], "mpich": ["[0] a", "[10] b", "[1] c"],
             "openmpi": ["[1,0]<stdout>:a", "[1,10]<stderr>:b", "[1,1]<stdout>:c"],
             "torchrun": ["[default0]:a", "[default10]:b", "[default1]:c"]}
    for fam, lines in cases.items():
        assert ranks.lines_of(lines + ["unlabelled"], fam, 10) == [lines[1]], fam
    assert ranks.lines_of(["[0] a"], "unknown", 0) == []


def test_describe_exit():
    assert ranks.describe_exit("3") == "exit code 3"
    assert ranks.describe_exit("137") == "exit code 137 (128+9: SIGKILL?)"
    assert ranks.describe_exit("SIGSEGV") == "signal SIGSEGV"
    assert ranks.describe_exit("signal 11") == "signal 11 (SIGSEGV)"
    assert ranks.describe_exit("SIG9") == "signal 9 (SIGKILL)"


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
    assert sorted(os.listdir(d)) == ["hostfile"]


def test_launch_program_survives_hostile_paths(tmp_path):
    odd = tmp_path / "it's $(odd) dir"
    (odd / "jobenv").mkdir(parents=True)
    (odd / "jobenv" / "__init__.py").write_text("")
    (odd / "jobenv" / "__main__.py").write_text("import sys\ndef main(argv):\n    print(argv)\n    return 0\n")
    (odd / "jobenv" / "fastlaunch.py").write_text("def run(argv):\n    return None\n")
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

    from jobenv.errors import BadRecord

    d = tmp_path / "h" / "bin"
    d.mkdir(parents=True)
    d.chmod(0o777)
    with pytest.raises(BadRecord, match="writable by others"):
        executable.install({"JOBENV_HOME": str(tmp_path / "h")}, "#!/bin/sh\n")


def test_names_int_cannot_read_and_fifos_are_skipped_never_fatal(tmp_path):
    """The run directory is shared with user code: `rank-².start` ('²' is isdigit(), int()
    refuses it) raised ValueError, and a FIFO named `rank-9.exit` (or a rank's log) blocked
    open() for ever, in the snapshot taken at --timeout and in the summary."""
    write(tmp_path, "rank-0.start", "0 node1 100 10.0\n")
    write(tmp_path, "rank-\u00b2.start", "0 h 1 2\n")
    write(tmp_path, "rank-\u0663.exit", "0 h exit:0 2\n")  # Arabic-Indic three
    os.mkfifo(tmp_path / "rank-9.exit")
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
    assert ranks.rank_of("rank-12.log", "rank-", ("log",)) == 12
    assert ranks.rank_of("rank-\u00b2.log", "rank-", ("log",)) is None


def test_each_attempts_logs_are_set_aside_and_a_new_launch_clears_them_without_following_links(tmp_path):
    import pytest

    from jobenv.errors import BadInput

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
