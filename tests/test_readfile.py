"""jobenv.core.readfile: the one reader of files named by the environment or a record."""
from __future__ import annotations

import os
import signal

import pytest

import fsutil
from jobenv.core.errors import BadInput
from jobenv.core.readfile import MAX_HOSTFILE_BYTES, NotRegular, Refused, read_bytes, read_regular


@pytest.fixture(autouse=True)
def no_hang():
    """A read that blocks (a FIFO) fails the test after 10 s instead of stalling the suite."""
    def expire(*_):
        raise TimeoutError("read_regular blocked")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_regular_file_is_read_whole_and_through_a_symlink(tmp_path):
    f = tmp_path / "hosts"
    f.write_bytes(b"n1\nn\xff2\n")
    link = tmp_path / "link"
    link.symlink_to(f)  # nodefiles and HOSTFILE copies are often reached through a link
    assert read_regular(str(link), 100, "hostfile") == "n1\nn\udcff2\n"
    assert read_bytes(str(f), 8) == b"n1\nn\xff2\n"


@pytest.mark.parametrize("kind,words", [
    ("fifo", "is a FIFO, not a regular file"), ("dev-zero", "is a character device, not a regular file"),
    ("directory", "is a directory, not a regular file"), ("dangling-symlink", "does not exist (a dangling"),
    ("one-10MB-line", "more than the 4 MiB"), ("sparse-300MB", "more than the 4 MiB"),
])
def test_anything_else_is_one_bad_input(tmp_path, kind, words):
    path = fsutil.hostile_file(tmp_path, kind)
    with pytest.raises(BadInput, match=r"^env file .*" + words.replace("(", r"\(")):
        read_regular(path, 4 << 20, "env file")


def test_the_limit_is_exact_and_the_kinds_are_told_apart(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10)
    assert read_bytes(str(f), 10) == b"x" * 10
    with pytest.raises(Refused) as exc:
        read_bytes(str(f), 9)
    assert not isinstance(exc.value, NotRegular)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegular):
        read_bytes(str(fifo), 10)
    with pytest.raises(FileNotFoundError):
        read_bytes(str(tmp_path / "missing"), 10)


def test_hostfile_limit_holds_a_million_hosts_of_the_longest_name():
    assert MAX_HOSTFILE_BYTES >= 1_000_000 * (253 + 1)


def test_a_device_is_refused_before_it_is_opened(tmp_path):
    """Merely opening some devices acts (a tape drive rewinds, /dev/watchdog arms), so a
    nodefile or HOSTFILE naming one is refused from its stat, never opened: a node with
    /dev/null's numbers, read under strace, shows no openat of it."""
    import shutil
    import stat
    import subprocess
    import sys

    from conftest import REPO

    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    dev = tmp_path / "tape"
    os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    trace = tmp_path / "trace"
    code = ("from jobenv.core.readfile import read_regular\nfrom jobenv.core.errors import BadInput\n"
            f"try:\n    read_regular({str(dev)!r}, 100, 'hostfile')\nexcept BadInput as e:\n    print(e)\n")
    p = subprocess.run(["strace", "-f", "-qq", "-e", "trace=openat,open", "-o", str(trace), sys.executable, "-c", code],
                       env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert "is a character device, not a regular file" in p.stdout, p.stdout + p.stderr
    assert str(dev) not in trace.read_text()


def test_a_name_replaced_between_the_stat_and_the_open_is_checked_again(tmp_path, monkeypatch):
    """The descriptor must be the file the name's stat judged (device and inode): a file
    replaced by rename in between (a concurrent save) is simply checked again; a name
    that never holds still is refused."""
    import jobenv.core.readfile as readfile

    f = tmp_path / "f"
    f.write_bytes(b"old\n")
    real_stat, swaps = os.stat, []

    def stat_then_swap(path, *a, **kw):
        st = real_stat(path, *a, **kw)
        if len(swaps) < limit:
            new = tmp_path / f"new{len(swaps)}"
            new.write_bytes(b"new%d\n" % len(swaps))
            os.rename(new, f)
            swaps.append(1)
        return st

    monkeypatch.setattr(readfile.os, "stat", stat_then_swap)
    limit = 1
    assert read_bytes(str(f), 100) == b"new0\n" and len(swaps) == 1
    limit, swaps[:] = 10, []
    with pytest.raises(Refused, match="replaced"):
        read_bytes(str(f), 100)
