"""jobenv.launchflow, the `launch` flow and the `launch` program's fast path (jobenv.fastlaunch
before its rename): a program an older `jobenv save` wrote, which imports jobenv.fastlaunch,
still runs the same way, on the fast path, against this jobenv."""
from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, base_env
from jobenv.launch.plan import executable


def programs(tmp_path):
    """(the `launch` program a save writes now, the one an older save wrote), both pinned to REPO."""
    new = executable.program_text(sys.executable, str(REPO))
    old = new.replace("from jobenv.launchflow import run as f", "from jobenv.fastlaunch import run as f")
    assert old != new and "jobenv.fastlaunch" in old
    paths = []
    for name, text in (("new", new), ("old", old)):
        p = tmp_path / name / "launch"
        p.parent.mkdir()
        p.write_text(text)
        p.chmod(0o755)
        paths.append(str(p))
    return paths


def test_a_launch_program_written_by_an_older_save_still_takes_the_fast_path(tmp_path, home):
    """No job to launch in (inside a Slurm job that was never saved: outside any job, launch would
    run on this host as torchrun does): both programs give the same one-line error and exit code
    from the fast path (click never loads: PYTHONPROFILEIMPORTTIME lists every import); without
    the old name the older program would end in a ModuleNotFoundError traceback."""
    env = base_env(home, {"PYTHONPROFILEIMPORTTIME": "1", "SLURM_JOB_ID": "4242"})
    env.pop("PYTHONPATH")  # the programs pin jobenv's directory themselves
    got = []
    for path in programs(tmp_path):
        p = subprocess.run([path, "true"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        modules = {ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
        assert "jobenv.launchflow" in modules and "click" not in modules, p.stderr
        said = [ln for ln in p.stderr.splitlines() if not ln.startswith("import time:")]
        got.append((p.returncode, said))
    assert got[0] == got[1] and got[0][0] != 0 and len(got[0][1]) == 1 and got[0][1][0].startswith("jobenv: "), got


def test_the_old_name_is_the_same_function():
    from jobenv import fastlaunch, launchflow

    assert fastlaunch.run is launchflow.run and os.path.dirname(fastlaunch.__file__) == os.path.dirname(
        launchflow.__file__)
