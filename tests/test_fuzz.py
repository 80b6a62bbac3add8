"""Hostile input through the real CLI into real shells: captured values and host names of
any bytes an environment can hold.  Values round-trip byte for byte; nothing runs; a bad
host name is refused at save with nothing written."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import REPO, need

EXAMPLES = int(os.environ.get("JOBENV_FUZZ_CLI_EXAMPLES", "25"))
env_text = st.binary(max_size=30).map(lambda b: b.replace(b"\0", b"").decode("utf-8", "surrogateescape"))
hostish = st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9](\.[a-z0-9]{1,5})?", fullmatch=True), env_text)
DUMP = (f"{sys.executable} -c 'import os,sys; sys.stdout.buffer.write(repr(sorted((k, v) for k, v in "
        "os.environb.items() if k.startswith(b\"PBS_\"))).encode())'")


@pytest.mark.parametrize("shell", ["bash", "zsh"])
@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(env_text, min_size=1, max_size=3), host=hostish)
def test_cli_round_trip(tmp_path_factory, shell, values, host):
    exe = need(shell)
    tmp = tmp_path_factory.mktemp("fuzz")
    canary = tmp / "canary"
    values = [v.replace("X", f"$(touch {canary})`touch {canary}`") for v in values]
    nodefile = tmp / "nodefile"
    nodefile.write_bytes((host + "\n").encode("utf-8", "surrogateescape"))
    store = str(tmp / "store")
    job = {"PBS_JOBID": "7.fuzz", "PBS_NODEFILE": str(nodefile),
           **{f"PBS_FUZZ_{i}": v for i, v in enumerate(values)}}
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "JOBENV_HOME": store, "PYTHONPATH": str(REPO), **job}
    p = subprocess.run([sys.executable, "-m", "jobenv", "save", "--quiet"], env=env, capture_output=True)
    from jobenv.hostlist import is_valid_host

    # nodefile semantics: one name per line, surrounding whitespace and blank/# lines ignored
    names = [l.strip() for l in host.splitlines() if l.strip() and not l.strip().startswith("#")]
    if not names or not all(is_valid_host(n) for n in names):
        assert p.returncode == 5 and len(p.stderr.strip().splitlines()) == 1 and b"Traceback" not in p.stderr
        assert not os.path.exists(os.path.join(store, "jobs", "pbs-7.fuzz.json"))
        return
    assert p.returncode == 0, p.stderr
    flags = ["--norc", "--noprofile"] if shell == "bash" else ["-f"]
    script = f"source <({sys.executable} -m jobenv get --job 7.fuzz --allow-stale) && {DUMP}"
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "JOBENV_HOME": store, "PYTHONPATH": str(REPO)}
    q = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in bare.items()], exe, *flags, "-c", script],
                       capture_output=True, cwd=tmp)
    assert q.returncode == 0, q.stderr
    got = dict(eval(q.stdout.decode()))  # repr of bytes pairs printed by our own dump
    for k, v in job.items():
        if k != "PBS_NODEFILE":
            assert got[k.encode()] == v.encode("utf-8", "surrogateescape")
    assert not canary.exists()
