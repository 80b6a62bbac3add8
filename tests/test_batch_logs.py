"""jobenv.batch.logs: which files `jobenv logs` shows, and every one read as hostile input."""
from __future__ import annotations

import os

from jobenv.batch import logs, runlogs


def collect(files, ended=lambda: True, follow=False, **kw):
    out = []
    logs.show(lambda: files, ended, follow, out.append, poll=0.01, check_every=0.0, **kw)
    return "".join(out)


def test_files_in_rank_order_and_one_rank(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    for r in (10, 2, 0):
        (d / f"rank-{r}.log").write_text(f"r{r}\n")
    (d / "rank-x.log").write_text("not a rank")
    (d / "rank-².log").write_text("not ascii digits")
    assert logs.rank_logs(str(d), None) == [str(d / f"rank-{r}.log") for r in (0, 2, 10)]
    assert logs.rank_logs(str(d), 2) == [str(d / "rank-2.log")]
    out, err = str(tmp_path / "job.out"), str(tmp_path / "job.err")
    sub = {"output": out, "error": err, "log_dir": str(d)}
    assert runlogs.items(sub, None, [], None) == [out, err] + logs.rank_logs(str(d), None)
    assert runlogs.items(sub, None, [], 2) == [str(d / "rank-2.log")]  # --rank: no batch output
    assert runlogs.items(None, out, [], None) == [out]


def test_escape_sequences_are_shown_not_acted_on(tmp_path):
    f = tmp_path / "rank-0.log"
    f.write_bytes(b"ok\n\x1b]0;owned\x07\x1b[2J\xff\nlast")
    text = collect([str(f)])
    assert "\x1b" not in text and "\x07" not in text and "\\x1b[2J" in text
    assert text.endswith("last") and "ok\n" in text


def test_fifo_device_and_link_are_never_read(tmp_path):
    fifo = tmp_path / "rank-0.log"
    os.mkfifo(fifo)  # opening it for reading would block forever
    link = tmp_path / "rank-1.log"
    secret = tmp_path / "secret"
    secret.write_text("do not show\n")
    link.symlink_to(secret)
    text = collect([str(fifo), str(link), "/dev/zero"])
    assert "do not show" not in text and text == ""


def test_follow_prints_what_is_added_until_the_job_ends(tmp_path):
    f = tmp_path / "job.out"
    f.write_text("one\n")
    calls = []

    def ended():
        calls.append(1)
        with open(f, "a") as fh:
            fh.write(f"line {len(calls)}\n" if len(calls) < 3 else "partial")
        return len(calls) >= 3

    text = collect([str(f)], ended, follow=True)
    assert text.splitlines()[1:] == ["one", "line 1", "line 2", "partial"]  # the unfinished line too, at the end


def test_a_huge_log_shows_its_end_only(tmp_path, monkeypatch):
    monkeypatch.setattr(logs, "FIRST", 1000)
    f = tmp_path / "job.out"
    f.write_text("".join(f"{i:09d}\n" for i in range(10000)))
    text = collect([str(f)])
    assert "000009999" in text and "000000001" not in text and len(text) < 1200


def test_follow_copies_a_long_unterminated_line_once(tmp_path):
    """`jobenv logs -f` on a log that grows by a line with no newline: the unfinished part was
    re-read and re-joined at every poll (404 MiB for a 96 MiB line); now it stays below CHUNK."""
    from jobenv.batch.logs import CHUNK, Follower

    path = tmp_path / "job.out"
    path.write_bytes(b"")
    got = []
    f = Follower(got.append)
    with open(path, "ab") as log:
        for _ in range(24):
            log.write(b"\r" + b"x" * (CHUNK // 2 - 1))
            log.flush()
            f.poll([str(path)])
            assert all(len(p) < CHUNK for p in f.partial.values())
    f.poll([str(path)], final=True)
    text = "".join(got)
    assert text.count("\\x0d") == 24 and text.count("x") == 24 * (CHUNK // 2 - 1) + 24  # \r shown escaped
