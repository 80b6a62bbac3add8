"""Hostile input into real shells: values of any bytes an environment can hold, often
starting with the `=`, `:` or `~` that zsh expands, and host names.  Through the plan's
renderers in bash, zsh (with hostile options), dash and fish, and through the real CLI:
values round-trip byte for byte; nothing runs; a bad host name is refused at save with
nothing written."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import REPO, need

EXAMPLES = int(os.environ.get("JOBENV_FUZZ_CLI_EXAMPLES", "25"))
env_text = st.tuples(st.sampled_from(["", "", "=", "~", ":", "a:=", "=~", "x=~/", "~+"]),
                     st.binary(max_size=30)).map(
    lambda t: t[0] + t[1].replace(b"\0", b"").decode("utf-8", "surrogateescape"))
hostish = st.one_of(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9](\.[a-z0-9]{1,5})?", fullmatch=True), env_text)
DUMP = (f"{sys.executable} -c 'import os,sys; sys.stdout.buffer.write(repr(sorted((k, v) for k, v in "
        "os.environb.items() if k.startswith(b\"PBS_\"))).encode())'")


ZSH_HOSTILE = "setopt CSH_JUNKIE_QUOTES RC_QUOTES MAGIC_EQUAL_SUBST EQUALS SH_WORD_SPLIT GLOB_SUBST NO_UNSET"
# shell -> (flags, how a user restores, options set first)
CLI_SHELLS = {
    "bash": (["--norc", "--noprofile"], "source <({get}) && {dump}", ""),
    "zsh": (["-f"], "source <({get} --shell zsh) && {dump}", ZSH_HOSTILE + "; "),
    "dash": ([], 'eval "$({get} --shell sh)" && {dump}', ""),
    "fish": (["--no-config"], "{get} --shell fish | source; and {dump}", ""),
}


@pytest.mark.parametrize("shell", list(CLI_SHELLS))
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
    from jobenv.core.hostlist import is_valid_host

    # nodefile semantics: one name per line, surrounding whitespace and blank/# lines ignored
    names = [ln.strip() for ln in host.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if not names or not all(is_valid_host(n) for n in names):
        assert p.returncode == 5 and len(p.stderr.strip().splitlines()) == 1 and b"Traceback" not in p.stderr
        assert not os.path.exists(os.path.join(store, "jobs", "pbs-7.fuzz.json"))
        return
    assert p.returncode == 0, p.stderr
    flags, how, prologue = CLI_SHELLS[shell]
    script = prologue + how.format(get=f"{sys.executable} -m jobenv get --job 7.fuzz --allow-stale", dump=DUMP)
    bare = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "JOBENV_HOME": store, "PYTHONPATH": str(REPO)}
    q = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in bare.items()], exe, *flags, "-c", script],
                       capture_output=True, cwd=tmp)
    assert q.returncode == 0, q.stderr
    got = dict(eval(q.stdout.decode()))  # repr of bytes pairs printed by our own dump
    for k, v in job.items():
        if k != "PBS_NODEFILE":
            assert got[k.encode()] == v.encode("utf-8", "surrogateescape")
    assert not canary.exists()


# Renderer level: many more examples, one shell process each (JOBENV_FUZZ_EXAMPLES in CI).
RENDER_EXAMPLES = int(os.environ.get("JOBENV_FUZZ_EXAMPLES", "60"))
RENDER_SHELLS = {  # id -> (dialect, program, flags, prologue)
    "bash": ("bash", "bash", ["--norc", "--noprofile"], ""),
    "zsh-hostile": ("zsh", "zsh", ["-f"], ZSH_HOSTILE),
    "dash": ("sh", "dash", [], ""),
    "fish": ("fish", "fish", ["--no-config"], ""),
}


@pytest.mark.parametrize("which", list(RENDER_SHELLS))
@settings(max_examples=RENDER_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(values=st.lists(env_text, min_size=1, max_size=4), launch_value=env_text)
def test_renderers_round_trip_bytes(tmp_path_factory, which, values, launch_value):
    from jobenv.restore import plan
    from jobenv.restore import shell
    from jobenv.store.record import JobRecord

    dialect, program, flags, prologue = RENDER_SHELLS[which]
    exe = need(program)
    tmp = tmp_path_factory.mktemp("render")
    canary = tmp / "canary"
    vals = [v.replace("X", f"$(touch {canary})`touch {canary}`") for v in values]
    env = {f"SLURM_V{i}": v for i, v in enumerate(vals)}
    rec = JobRecord(scheduler="slurm", jobid="1", machine="m", hosts=["n1"], gpus_per_host=0, ranks_per_host=1,
                    hostfile=launch_value, launch=["srun", launch_value], env=env, created_at="t", created_on="n1",
                    launch_env={"MPICH_X": launch_value})
    p = plan.build(rec, "/r.json", {}, jobenv_argv=["true"])
    snippet = tmp / "snippet"
    snippet.write_bytes(shell.render(dialect, p).encode("utf-8", "surrogateescape"))
    out = tmp / "dump"
    names = [*env, "MPICH_X", "HOSTFILE", "DIST_LAUNCH"]
    if program == "fish":
        script = f"source {snippet}\nfor v in {' '.join(names)}; printf '%s\\0' $$v; end > {out}"
    else:
        loop = f"for v in {' '.join(names)}; do eval \"printf '%s\\\\0' \\\"\\${{$v}}\\\"\"; done > {out}"
        script = "; ".join(x for x in (prologue, f". {snippet}", loop) if x)
    r = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", exe, *flags, "-c", script], capture_output=True,
                       timeout=60, cwd=tmp)
    assert r.returncode == 0, r.stderr
    got = out.read_bytes().split(b"\0")[:-1]
    want = [p.set[k] for k in names]
    assert got == [v.encode("utf-8", "surrogateescape") for v in want]
    assert not canary.exists()
