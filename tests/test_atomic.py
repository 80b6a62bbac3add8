"""jobenv.core.atomic's writers (issue 24 findings 4 and 5): files honour the umask, and a path
the user names that is not a regular file (standard output, a FIFO, a character device)
is written in place, never renamed over; a link to a regular file is refused."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import REPO
from jobenv.core.atomic import write_atomic, write_output
from jobenv.core.errors import BadInput

PAGE = b"<!DOCTYPE html><p>token=s3cret</p>\n"


def umask(mask: int):
    """Run the body with this process's umask set to `mask`."""
    class _Umask:
        def __enter__(self) -> None:
            self.old = os.umask(mask)

        def __exit__(self, *exc: object) -> None:
            os.umask(self.old)
    return _Umask()


def mode(p: Path) -> int:
    return stat.S_IMODE(os.lstat(p).st_mode)


def test_files_get_the_umask_never_more(shared_tmp, other_user):
    """With umask 077 another user reads none of them (a report, a script holding a token);
    with 022 they are 0644 and 0755, as the shell would make them."""
    with umask(0o077):
        write_output(str(shared_tmp / "report.html"), PAGE)
        write_output(str(shared_tmp / "job.sh"), PAGE, executable=True)
        write_atomic(str(shared_tmp / "program"), PAGE, mode=0o755)
    assert (mode(shared_tmp / "report.html"), mode(shared_tmp / "job.sh"), mode(shared_tmp / "program")) == \
        (0o600, 0o700, 0o700)
    for name in ("report.html", "job.sh", "program"):
        p = other_user.sh(f"cat {shared_tmp / name}", check=False)
        assert p.returncode != 0 and "s3cret" not in p.stdout, name
    with umask(0o022):
        write_output(str(shared_tmp / "report.html"), PAGE)  # replacing: the umask of now
        write_output(str(shared_tmp / "job.sh"), PAGE, executable=True)
    assert (mode(shared_tmp / "report.html"), mode(shared_tmp / "job.sh")) == (0o644, 0o755)
    with umask(0o177):  # the owner's bits a file needs come back, nobody else's
        write_atomic(str(shared_tmp / "program"), PAGE, mode=0o755)
    assert mode(shared_tmp / "program") == 0o700


def test_a_kept_mode_is_kept_exactly(tmp_path):
    """`jobenv init --install` rewrites an rc file with the mode it had."""
    with umask(0o077):
        write_atomic(str(tmp_path / "rc"), b"x", mode=0o640, exact_mode=True)
    assert mode(tmp_path / "rc") == 0o640


def test_a_character_device_is_written_in_place(tmp_path):
    """As root, `--html /dev/null` used to rename a regular file over /dev/null.  A private
    node of /dev/null's device stands in for it here (the machine's stays untouched)."""
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    link = tmp_path / "to-null"
    link.symlink_to(null)
    for p in (null, link):
        assert write_output(str(p), PAGE) is False
    assert stat.S_ISCHR(os.lstat(null).st_mode) and link.is_symlink() and sorted(os.listdir(tmp_path)) == ["null", "to-null"]


def test_a_fifo_gets_the_content(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output(str(fifo), PAGE)
    reader.join(10)
    assert got == [PAGE] and stat.S_ISFIFO(os.lstat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]


@pytest.mark.parametrize("where", ["pipe", "file"])
def test_dev_stdout_is_standard_output(tmp_path, where):
    """`/dev/stdout` puts the page on standard output, whatever that is: a pipe, or a
    regular file the shell opened (written where the shell's offset says, not replaced)."""
    code = ("import sys; from jobenv.core.atomic import write_output; print('before', flush=True); "
            f"said = write_output('/dev/stdout', {PAGE!r}); print(said)")
    argv = [sys.executable, "-c", code]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    if where == "pipe":
        out = subprocess.run(argv, env=env, capture_output=True, timeout=60).stdout
    else:
        target = tmp_path / "out.html"
        with open(target, "wb") as f:
            subprocess.run(argv, env=env, stdout=f, timeout=60, check=True)
        out = target.read_bytes()
        assert os.listdir(tmp_path) == ["out.html"]
    assert out == b"before\n" + PAGE + b"True\n"


def test_dev_stderr_is_standard_error_even_a_regular_file(tmp_path):
    code = f"from jobenv.core.atomic import write_output; print(write_output('/dev/stderr', {PAGE!r}))"
    with open(tmp_path / "err", "wb") as err:
        p = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                           stderr=err, timeout=60)
    assert p.stdout == b"False\n" and (tmp_path / "err").read_bytes() == PAGE


def test_links_to_files_and_to_nothing_are_refused(tmp_path):
    """A link is never followed to a file that would be replaced (one planted in /tmp would
    aim the write at the victim's file): name the file itself."""
    precious = tmp_path / "bashrc"
    precious.write_text("mine\n")
    (tmp_path / "report.html").symlink_to(precious)
    (tmp_path / "dangling.html").symlink_to(tmp_path / "nothing")
    with pytest.raises(BadInput, match="symbolic link to the regular file .*bashrc: name that file itself"):
        write_output(str(tmp_path / "report.html"), PAGE)
    with pytest.raises(BadInput, match="a symbolic link to nothing"):
        write_output(str(tmp_path / "dangling.html"), PAGE)
    assert precious.read_text() == "mine\n" and not (tmp_path / "nothing").exists()
    assert (tmp_path / "report.html").is_symlink()
    os.mkdir(tmp_path / "d")
    with pytest.raises(BadInput, match="neither a regular file, a FIFO nor a character device"):
        write_output(str(tmp_path / "d"), PAGE)


def test_a_fifo_another_user_planted_is_refused(shared_tmp, other_user):
    """Another user's FIFO at the name in /tmp would read the page: refused, never opened
    (opening it would block until they read)."""
    other_user.sh(f"mkfifo {shared_tmp / 'report.html'}")
    with pytest.raises(BadInput, match="belongs to uid"):
        write_output(str(shared_tmp / "report.html"), PAGE)
