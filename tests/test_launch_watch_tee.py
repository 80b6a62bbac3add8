"""`--log-dir` keeps every rank's output in its log and still shows rank 0's (or `--tee RANKS`)
on the terminal, in a restored bash under the MPICH wheel's mpiexec."""
from __future__ import annotations

import pytest

from jobenv.core.errors import BadInput
from jobenv.launch.watch.tee import parse_ranks
from launchkit import RESTORE, local_job, shell

SAY = "sh -c 'echo first-$RANK; sleep 0.5; printf last-$RANK'"  # the last line has no newline


@pytest.fixture
def job(tmp_path):
    return local_job(tmp_path, 3)


def test_log_dir_still_shows_rank_0(tmp_path, job):
    p = shell(job, f"{RESTORE} && launch --log-dir logs {SAY}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "first-0\nlast-0\n", p.stdout
    for r in range(3):
        assert (tmp_path / "logs" / f"rank-{r}.log").read_text() == f"first-{r}\nlast-{r}"


def test_log_dir_on_a_terminal_shows_rank_0(tmp_path, job):
    """On a pseudo-terminal (an interactive login) rank 0's lines reach the screen as they come."""
    import os
    import pty
    import subprocess
    import time

    master, slave = pty.openpty()
    argv = ["env", "-i", *[f"{k}={v}" for k, v in job.items()], "/bin/bash", "--norc", "--noprofile", "-c",
            f"{RESTORE} && launch --log-dir logs sh -c 'echo early-$RANK; sleep 3; echo late-$RANK'"]
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path)
    os.close(slave)
    seen, start, early_at = b"", time.monotonic(), None
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal's other end closed: the launch is over
            break
        seen += chunk
        if early_at is None and b"early-0" in seen:
            early_at = time.monotonic() - start
    os.close(master)
    assert proc.wait(timeout=60) == 0, seen
    text = seen.decode(errors="replace")
    assert "early-0" in text and "late-0" in text and "early-1" not in text and "late-1" not in text, text
    assert early_at is not None and early_at < time.monotonic() - start - 1.5, "rank 0's first line came only at the end"


def test_tee_names_the_ranks_shown(tmp_path, job):
    p = shell(job, f"{RESTORE} && launch --log-dir logs --tee 1-2 {SAY}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[1] first-1", "[1] last-1", "[2] first-2", "[2] last-2"], p.stdout
    p = shell(job, f"{RESTORE} && launch --log-dir logs --tee none {SAY}", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "", p.stdout


def test_tee_without_log_dir_is_refused(job):
    p = shell(job, f"{RESTORE} && launch --tee 0 true")
    assert p.returncode == 2 and "--tee only acts with --log-dir" in p.stderr and p.stderr.count("\n") == 1


@pytest.mark.parametrize("text,ranks", [("0", {0}), ("0,3", {0, 3}), ("1-3", {1, 2, 3}), ("all", None),
                                        ("none", set())])
def test_parse_ranks(text, ranks):
    assert parse_ranks(text) == ranks


@pytest.mark.parametrize("text", ["", "a", "3-1", "-1", "1,,2", "0-99999999"])
def test_parse_ranks_refuses(text):
    with pytest.raises(BadInput):
        parse_ranks(text)


@pytest.mark.parametrize("label", [False, True])
def test_a_long_line_without_newline_is_copied_once_in_bounded_memory(tmp_path, label):
    """A 48 MiB write with no newline (a `\\r` progress bar): the follower re-copied the whole
    unfinished line at every read (37 s, 162 MiB); now one rank's bytes pass straight through and
    several ranks' lines are held below CHUNK, a longer one going out in pieces."""
    import io
    import time

    from jobenv.launch.watch.tee import CHUNK, Follower

    size = 48 << 20
    (tmp_path / "rank-0.log").write_bytes(b"")
    out = io.BytesIO()
    f = Follower(str(tmp_path), [0, 1] if label else [0], out)
    t0 = time.monotonic()
    with open(tmp_path / "rank-0.log", "ab") as log:
        for _ in range(size // CHUNK):
            log.write(b"\r" + b"x" * (CHUNK - 1))
            log.flush()
            f.sweep()
            assert all(len(p) < CHUNK for p in f.partial.values())
    f.sweep(final=True)
    assert time.monotonic() - t0 < 10
    text = out.getvalue()
    body = text.replace(b"[0] ", b"").replace(b"\n", b"")
    assert len(body) == size and text.endswith(b"\n")
