"""Parity: shell/jobenv.sh's `getjobenv` (which may skip Python) reaches exactly the verdicts
of `source <(jobenv get)` over a table of store states.

Each state starts from a store whose cached snippet is valid (so getjobenv's fast path
would be taken), then changes something the way a careless user or another user could.
Both paths then run in fresh `env -i` shells; their exit status, the job they restored,
their warnings and whether anything foreign ran must agree.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, need
from jobenv.store import cache as getcache

from test_get import put

SHELLS = ["bash", "zsh"]


def _env(home: Path, tmp: Path, host: str = "n1") -> dict:
    return {"HOME": str(home), "JOBENV_HOME": str(home / ".jobenv"), "PYTHONPATH": str(REPO),
            "PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "LANG": "C.UTF-8", "JOBENV_HOSTNAME": host}


def _wrapper(tmp: Path) -> None:
    (tmp / "bin").mkdir(exist_ok=True)
    w = tmp / "bin" / "jobenv"
    w.write_text(f"#!/bin/sh\nexec {sys.executable} -m jobenv \"$@\"\n")
    w.chmod(0o755)


def _snippet(env: dict) -> Path:
    return Path(env["JOBENV_HOME"]) / "cache" / f"host-{env['JOBENV_HOSTNAME']}.sh"


# Each mutation takes (env, tmp) and changes the primed store.
def ok(env, tmp):
    pass


def snippet_appended_by_another(env, tmp):
    s = _snippet(env)
    s.chmod(0o620)
    with open(s, "a") as f:
        f.write(f"touch {tmp / 'PWNED'}\n")


def snippet_appended_mode_kept(env, tmp):
    with open(_snippet(env), "a") as f:
        f.write(f"touch {tmp / 'PWNED'}\n")


def snippet_is_a_symlink(env, tmp):
    s = _snippet(env)
    evil = tmp / "evil.sh"
    evil.write_bytes(s.read_bytes())
    evil.chmod(0o600)
    s.unlink()
    s.symlink_to(evil)


def record_group_writable(env, tmp):
    os.chmod(_record(env), 0o660)


def env_file_group_writable(env, tmp):
    envf = _record(env)[: -len(".json")] + ".env"
    if os.path.exists(envf):
        os.chmod(envf, 0o666)
        with open(envf, "a") as f:
            f.write(f"touch {tmp / 'PWNED'}\n")


def home_is_a_symlink(env, tmp):
    h = Path(env["JOBENV_HOME"])
    real = tmp / "elsewhere"
    h.rename(real)
    h.symlink_to(real)


def jobs_dir_world_writable(env, tmp):
    os.chmod(store_jobs(env), 0o777)


def schema_99(env, tmp):
    p = _record(env)
    text = Path(p).read_text().replace('"schema_version": 2', '"schema_version": 99')
    tmpf = p + ".new"
    Path(tmpf).write_text(text)
    os.chmod(tmpf, 0o600)
    os.replace(tmpf, p)


def truncated(env, tmp):
    with open(_record(env), "r+") as f:
        f.truncate(40)


def ended(env, tmp):
    p = _record(env)
    text = Path(p).read_text().replace('"state": "live"', '"state": "ended"')
    Path(p + ".new").write_text(text)
    os.chmod(p + ".new", 0o600)
    os.replace(p + ".new", p)


def another_newer_record(env, tmp):
    put(env, "200", created_at="2027-01-01T00:00:00+0000")


def no_records(env, tmp):
    os.unlink(_record(env))


def expired_verdict(env, tmp):
    s = _snippet(env)
    lines = s.read_text().split("\n")
    lines[3] = f"# until {int(time.time()) - 1}"
    assert lines[2].startswith("# since ")
    s.write_text("\n".join(lines))


def ancestor_world_writable(env, tmp):
    """A directory above JOBENV_HOME made 0777: another user could swap the store (exit 6)."""
    os.chmod(Path(env["JOBENV_HOME"]).parent, 0o777)


def clock_stepped_back(env, tmp):
    """The snippet and the verdict were written while the clock read an hour later; it has
    been stepped back since, and the scheduler now says the job has ended (exit 4)."""
    squeue = tmp / "bin" / "squeue"
    squeue.write_text("#!/bin/sh\necho RUNNING\n")
    squeue.chmod(0o755)
    os.unlink(_record(env))
    put(env, "100")
    ahead = tmp / "ahead"
    ahead.mkdir()
    (ahead / "sitecustomize.py").write_text("import time\n_t = time.time\ntime.time = lambda: _t() + 3600\n")
    p = subprocess.run([sys.executable, "-m", "jobenv", "get"], env={**env, "PYTHONPATH": f"{ahead}:{REPO}"},
                       capture_output=True, text=True)
    assert p.returncode == 0 and "'--job' '100'" in _snippet(env).read_text(), p.stderr
    squeue.write_text("#!/bin/sh\necho COMPLETED\n")


def other_host(env, tmp):
    env["JOBENV_HOSTNAME"] = "elsewhere"


def user_setting(env, tmp):
    """A login shell's own Slurm setting: not another job's, so kept by both paths."""
    env["SLURM_MPI_TYPE"] = "pmix"


def site_setting(env, tmp):
    env["SLURM_CONF"] = str(tmp / "slurm.conf")


def in_another_job(env, tmp):
    env.update(SLURM_JOB_ID="99", SLURM_NODELIST="n9", SLURM_MPI_TYPE="pmix")


def stale_job_without_id(env, tmp):
    """A Slurm job's host list, its id gone: still another job's variables (JOB_MARKERS)."""
    env.update(SLURM_NODELIST="n9", SLURM_NTASKS_PER_NODE="4", SLURM_MPI_TYPE="pmix")


def cobalt_job_by_nodefile(env, tmp):
    env.update(COBALT_NODEFILE=str(tmp / "cobalt.555"), COBALT_PARTNAME="n1")


def modules_loaded(env, tmp):
    """The snippet was computed with no modules: this shell's differ, and get warns of it."""
    env["LOADEDMODULES"] = "gcc/12:cuda/12"


def store_jobs(env):
    return os.path.join(env["JOBENV_HOME"], "jobs")


def _record(env):
    return os.path.join(store_jobs(env), "local-n1.json")


STATES = [ok, snippet_appended_by_another, snippet_appended_mode_kept, snippet_is_a_symlink,
          record_group_writable, env_file_group_writable, home_is_a_symlink, jobs_dir_world_writable,
          schema_99, truncated, ended, another_newer_record, no_records, expired_verdict,
          ancestor_world_writable, clock_stepped_back, other_host,
          user_setting, site_setting, in_another_job, stale_job_without_id, cobalt_job_by_nodefile,
          modules_loaded]


SHOW = " ".join(f"{v}=${{{v}-}}" for v in ("JOBENV_JOBID", "SLURM_MPI_TYPE", "SLURM_CONF", "SLURM_JOB_ID",
                                            "SLURM_NTASKS_PER_NODE", "COBALT_PARTNAME"))


def _run(shell_name: str, env: dict, tmp: Path, how: str) -> tuple:
    exe = need(shell_name)
    flags = ["--norc", "--noprofile"] if shell_name == "bash" else ["-f"]
    if how == "getjobenv":
        script = f'source {REPO}/shell/jobenv.sh; getjobenv; echo "rc=$? {SHOW}"'
    else:  # what a user writes, with the exit status that `source <(...)` would lose
        script = f'_s="$(jobenv get)"; _rc=$?; [ $_rc -ne 0 ] || eval "$_s"; echo "rc=$_rc {SHOW}"'
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], exe, *flags, "-c", script],
                       capture_output=True, text=True, cwd=tmp, timeout=120)
    warnings = sorted(line for line in p.stderr.splitlines() if line.startswith("jobenv:"))
    return p.stdout.strip().splitlines()[-1], warnings, (tmp / "PWNED").exists()


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """One primed store per state, built together so one RACY wait serves them all."""
    base = tmp_path_factory.mktemp("parity")
    out = {}
    for state in STATES:
        tmp = base / state.__name__
        home = tmp / "home"
        home.mkdir(parents=True)
        _wrapper(tmp)
        env = _env(home, tmp)
        subprocess.run([sys.executable, "-m", "jobenv", "save", "--quiet"], env=env, check=True)
        Path(env["JOBENV_HOME"], "cache").mkdir(mode=0o700)
        out[state.__name__] = (tmp, env)
    time.sleep(getcache.RACY + 0.3)
    for _tmp, env in out.values():
        p = subprocess.run([sys.executable, "-m", "jobenv", "get"], env=env, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    return out


@pytest.mark.parametrize("state", STATES, ids=[s.__name__ for s in STATES])
def test_getjobenv_and_get_agree(primed, state):
    tmp, env = primed[state.__name__]
    env = dict(env)
    assert _snippet(env).exists()
    if state is ok:  # a local job's verdict holds a day, the snippet a minute: the files it relied on
        until = int(_snippet(env).read_text().splitlines()[3][len("# until "):])
        assert until <= time.time() + getcache.VERDICT_TTL + 1
    state(env, tmp)
    results = {}
    for shell_name in SHELLS:
        for how in ("getjobenv", "get"):
            results[(shell_name, how)] = _run(shell_name, env, tmp, how)
    first = results[("bash", "get")]
    for k, r in results.items():
        assert r == first, (k, r, first)
    assert not first[2], "something foreign ran"
    if state is ok:
        assert first[0] == "rc=0 JOBENV_JOBID=n1 SLURM_MPI_TYPE= SLURM_CONF= SLURM_JOB_ID= SLURM_NTASKS_PER_NODE= " \
                           "COBALT_PARTNAME="
    if state is user_setting:
        assert first[0].startswith("rc=0 JOBENV_JOBID=n1 SLURM_MPI_TYPE=pmix SLURM_CONF= ") and not first[1]
    if state in (stale_job_without_id, cobalt_job_by_nodefile):  # that job's variables are cleared
        assert first[0].endswith(" SLURM_NTASKS_PER_NODE= COBALT_PARTNAME=") and first[0].startswith("rc=0 ")
        assert any("another job" in w for w in first[1]), first
    if state is ancestor_world_writable:
        assert first[0].startswith("rc=6 "), first
    if state is clock_stepped_back:
        assert first[0].startswith("rc=4 "), first
    if state is modules_loaded:
        assert first[0].startswith("rc=0 ") and any("modules are loaded here" in w for w in first[1]), first


def _primed_with_broken_jobenv(tmp_path: Path, home: Path) -> dict:
    """Job 100 saved, its snippet written by `jobenv get`, then a `jobenv` that only fails
    (exit 99): a shell that restores job 100 took the fast path."""
    _wrapper(tmp_path)
    env = _env(home, tmp_path)
    put(env, "100")
    Path(env["JOBENV_HOME"], "cache").mkdir(mode=0o700)
    time.sleep(getcache.RACY + 0.3)
    subprocess.run([sys.executable, "-m", "jobenv", "get"], env=env, check=True, capture_output=True)
    (tmp_path / "bin" / "jobenv").write_text("#!/bin/sh\nexit 99\n")
    return env


def test_fast_path_skips_python(tmp_path, home):
    """With a valid snippet, getjobenv does not start Python (a broken `jobenv` proves it)."""
    env = _primed_with_broken_jobenv(tmp_path, home)
    (home / "new-file").write_text("")  # $HOME's times change all day: the proof holds of its owner and mode
    for shell_name in SHELLS:
        assert _run(shell_name, env, tmp_path, "getjobenv")[0].startswith("rc=0 JOBENV_JOBID=100 ")
        mine = _run(shell_name, {**env, "SLURM_MPI_TYPE": "pmix"}, tmp_path, "getjobenv")[0]
        assert mine.startswith("rc=0 JOBENV_JOBID=100 SLURM_MPI_TYPE=pmix "), mine  # a user's own setting
        site = _run(shell_name, {**env, "SLURM_CONF": "/x"}, tmp_path, "getjobenv")[0]
        assert site.startswith("rc=99 "), site  # a site variable: the plan may differ, so Python decides
        for other in ({"SLURM_NODELIST": "n9"}, {"COBALT_NODEFILE": "/x/cobalt.5"}, {"LOADEDMODULES": "gcc/12"}):
            r = _run(shell_name, {**env, **other}, tmp_path, "getjobenv")[0]
            assert r.startswith("rc=99 "), (other, r)  # another job's marks, other modules: Python decides
    mods = {**env, "LOADEDMODULES": "gcc/12:cuda/12"}
    (tmp_path / "bin" / "jobenv").write_text(f"#!/bin/sh\nexec {sys.executable} -m jobenv \"$@\"\n")
    subprocess.run([sys.executable, "-m", "jobenv", "get"], env=mods, check=True, capture_output=True)
    (tmp_path / "bin" / "jobenv").write_text("#!/bin/sh\nexit 99\n")
    for shell_name in SHELLS:  # a snippet computed with these modules serves shells with them
        r = _run(shell_name, mods, tmp_path, "getjobenv")
        assert r[0].startswith("rc=0 JOBENV_JOBID=100 "), r
        assert _run(shell_name, env, tmp_path, "getjobenv")[0].startswith("rc=99 ")  # and only those


def test_fast_path_above_a_store_with_odd_names(tmp_path):
    """Directories above the store named with `|/`, `%`, spaces and quotes keep the fast path
    (the proof's `# above SIG|PATH` lines split at the first `|/`), and a chmod of one voids it."""
    home = tmp_path / "we ird|" / "%s 'dir\""
    home.mkdir(parents=True)
    env = _primed_with_broken_jobenv(tmp_path, home)
    for shell_name in SHELLS:
        assert _run(shell_name, env, tmp_path, "getjobenv")[0].startswith("rc=0 JOBENV_JOBID=100 ")
    os.chmod(home.parent, 0o775)
    for shell_name in SHELLS:
        assert _run(shell_name, env, tmp_path, "getjobenv")[0].startswith("rc=99 ")


def test_fast_path_refuses_a_cache_directory_others_can_write(tmp_path, home):
    """Python never reads or writes a cache directory that group or others can write
    (getcache.cache_dir): another user could swap the snippet in it.  The proof holds of
    cache/ too, so a chmod 0777 of it sends the shell to `jobenv get` (here a broken one)."""
    env = _primed_with_broken_jobenv(tmp_path, home)
    for shell_name in SHELLS:
        assert _run(shell_name, env, tmp_path, "getjobenv")[0].startswith("rc=0 JOBENV_JOBID=100 ")
    os.chmod(Path(env["JOBENV_HOME"]) / "cache", 0o777)
    for shell_name in SHELLS:
        r = _run(shell_name, env, tmp_path, "getjobenv")[0]
        assert r.startswith("rc=99 "), (shell_name, r)


def test_fast_path_sources_the_snippet_it_proved(tmp_path, home, other_user):
    """The snippet is swapped for another user's file the moment the proof's `stat` has
    looked at it (a `stat` on PATH that renames it over the snippet after the real one ran:
    the window an attacker who can write cache/ races for).  getjobenv sources the file it
    proved, from the descriptor it opened, never the name again; and that descriptor is
    closed afterwards (a user's own descriptor 9 is left as it was)."""
    env = _primed_with_broken_jobenv(tmp_path, home)
    evil = tmp_path / "evil.sh"
    evil.write_text(f"touch {tmp_path / 'PWNED'}\n")
    os.chown(evil, other_user.uid, other_user.gid)
    swap = tmp_path / "bin" / "stat"
    swap.write_text(f'#!/bin/sh\n/usr/bin/stat "$@"; rc=$?\n[ -e {evil} ] && mv {evil} {_snippet(env)}\nexit $rc\n')
    swap.chmod(0o755)
    fd9 = 'if { : <&9; } 2>/dev/null; then echo "fd9=$(cat <&9)"; else echo fd9=closed; fi'
    for shell_name in SHELLS:
        exe = need(shell_name)
        flags = ["--norc", "--noprofile"] if shell_name == "bash" else ["-f"]
        for mine in ("", "exec 9<<'X'\nmine\nX\n"):
            script = f'{mine}source {REPO}/shell/jobenv.sh; getjobenv; echo "rc=$? {SHOW}"; {fd9}'
            p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], exe, *flags, "-c", script],
                               capture_output=True, text=True, cwd=tmp_path, timeout=120)
            assert not (tmp_path / "PWNED").exists(), (shell_name, p.stdout, p.stderr)
            out = p.stdout.splitlines()
            assert out[0].startswith("rc=0 JOBENV_JOBID=100 ") and out[1] == ("fd9=mine" if mine else "fd9=closed"), \
                (shell_name, p.stdout, p.stderr)
            subprocess.run([sys.executable, "-m", "jobenv", "get"], env={**env, "PATH": "/usr/bin:/bin"},
                           check=True, capture_output=True)  # the snippet again, for the next shell
            evil.write_text(f"touch {tmp_path / 'PWNED'}\n")
            os.chown(evil, other_user.uid, other_user.gid)


def test_fast_path_holds_in_a_translated_locale(tmp_path, home):
    """GNU stat translates `%F` (LANGUAGE=de: 'Verzeichnis'); the proof records the English
    words, so the shell runs its `stat` in the C locale and the fast path holds."""
    if not Path("/usr/share/locale/de/LC_MESSAGES/coreutils.mo").exists():
        pytest.skip("coreutils has no German catalogue here")
    env = _primed_with_broken_jobenv(tmp_path, home)
    for shell_name in SHELLS:
        assert _run(shell_name, env, tmp_path, "getjobenv")[0].startswith("rc=0 JOBENV_JOBID=100 ")
        r = _run(shell_name, {**env, "LANGUAGE": "de", "LC_ALL": "C.UTF-8"}, tmp_path, "getjobenv")[0]
        assert r.startswith("rc=0 JOBENV_JOBID=100 "), (shell_name, r)


def test_the_fast_path_gate_names_the_plan_s_variables():
    """shell/jobenv.sh lists a job's marks and the site variables by hand: they are the Python ones."""
    import re

    from jobenv import schedulers
    from jobenv.restore import plan

    text = (REPO / "shell" / "jobenv.sh").read_text()
    gate = text[text.index("# a job's marks: schedulers.JOB_MARKERS"):text.index('|| return 1\n    d="')]
    ids = set(re.findall(r"\$\{(\w+)-\}", gate))
    site = set(re.findall(r"\$\{(\w+)\+x\}", gate))
    assert ids == {v for names in schedulers.JOB_MARKERS.values() for v in names}
    assert site == set(plan.SITE_VARS)


def test_zsh_without_records_does_not_abort_zshrc(tmp_path, home):
    """A glob with no match aborted the user's .zshrc."""
    exe = need("zsh")
    _wrapper(tmp_path)
    env = _env(home, tmp_path)
    os.makedirs(store_jobs(env), mode=0o700)
    os.chmod(env["JOBENV_HOME"], 0o700)
    zdot = tmp_path / "zdot"
    zdot.mkdir()
    (zdot / ".zshrc").write_text(f"source {REPO}/shell/jobenv.sh\ngetjobenv\necho rc-survived\n")
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in {**env, "ZDOTDIR": str(zdot)}.items()],
                        exe, "-i", "-c", "echo after-rc"], capture_output=True, text=True, timeout=60)
    assert "rc-survived" in p.stdout and "after-rc" in p.stdout, p.stdout + p.stderr
    assert shutil.which("zsh")
