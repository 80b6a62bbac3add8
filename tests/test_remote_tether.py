"""The remote side of `--remote` (jobenv.remote.tether), run here as ssh would run it there:
`jobenv remote receive HEX` unpacks only inside its new directory; `remote exec` keeps the
words exact and returns the command's code; a call jobenv did not write is one line."""
from __future__ import annotations

import io
import subprocess
import sys
import tarfile

from conftest import base_env
from jobenv.remote.remotes import Remote
from jobenv.remote.ssh import MARKER, command_line


def _call(env, verb, payload, data=b""):
    hexed = command_line(Remote("r", "h", "jobenv", "w"), verb, payload).split()[-1]
    return subprocess.run([sys.executable, "-m", "jobenv", "remote", verb, hexed], env=env, input=data,
                          capture_output=True, timeout=60)


def _tar(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, body in members:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buf.getvalue()


def test_receive_unpacks_inside_only(tmp_path):
    env = base_env(tmp_path / "home")
    p = _call(env, "receive", {"dir": str(tmp_path / "copy")}, _tar([("a/b.py", b"ok")]))
    assert p.returncode == 0 and p.stderr == MARKER, p.stderr
    assert (tmp_path / "copy" / "a" / "b.py").read_bytes() == b"ok"
    p = _call(env, "receive", {"dir": str(tmp_path / "evil")}, _tar([("../outside.py", b"x")]))
    assert p.returncode != 0 and not (tmp_path / "outside.py").exists()
    p = _call(env, "receive", {"dir": str(tmp_path / "copy")}, _tar([("c", b"x")]))
    assert p.returncode == 5 and b"exists already" in p.stderr, p.stderr


def test_exec_keeps_words_and_code(tmp_path):
    """Its stdin held open (as the laptop's ssh holds it) until the command has ended by itself."""
    env = base_env(tmp_path / "home")
    odd = "it's $HOME `id` \\ \u00e9"
    hexed = command_line(Remote("r", "h", "jobenv", "w"), "exec", {"argv": ["runs", "show", odd], "cwd": None})
    p = subprocess.Popen([sys.executable, "-m", "jobenv", "remote", "exec", hexed.split()[-1]], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err = p.stderr.read()  # type: ignore[union-attr]
    rc = p.wait(timeout=60)
    p.stdin.close()  # type: ignore[union-attr]
    here = subprocess.run([sys.executable, "-m", "jobenv", "runs", "show", odd], env=env, capture_output=True)
    assert (rc, err) == (here.returncode, MARKER + here.stderr) and rc == 3, err


def test_a_call_jobenv_did_not_write_is_one_line(tmp_path):
    env = base_env(tmp_path / "home")
    p = subprocess.run([sys.executable, "-m", "jobenv", "remote", "exec", "zz"], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 7 and p.stderr == "jobenv: error: remote: the call is not one a jobenv wrote " \
                                             "(bad hex or JSON)\n", p.stderr
