"""Every interpreter jobenv starts ignores the current directory: another local user plants
`json.py`, `runpy.py`, `sitecustomize.py` and a `jobenv/` package in a shared directory the
victim works in, and none of them runs, on the oldest and the newest Python at hand."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

from conftest import REPO
from jobenv.core.interpreter import code_argv, module_argv

# the pyenv interpreters beside the base one (3.9 is the oldest jobenv supports: no `-P` there)
PYTHONS = [sys.executable] + [p for p in (f"/root/.pyenv/versions/{v}/bin/python3" for v in ("3.9.18", "3.10.13"))
                              if os.access(p, os.X_OK)]
PLANTED = ("json.py", "runpy.py", "sitecustomize.py", "jobenv/__init__.py", "jobenv/__main__.py",
           "jobenv/selftest/__init__.py", "jobenv/selftest/__main__.py")


def plant(other_user, shared: Path) -> List[Path]:
    """As the other user: modules in `shared` that, imported by anyone, leave ran-UID there."""
    body = f"import os; open(os.path.join({str(shared)!r}, 'ran-%d' % os.getuid()), 'w').close()"
    script = "set -e; umask 022; mkdir -p jobenv/selftest\n" + "".join(
        f"printf '%s\\n' \"{body}\" > {name}\n" for name in PLANTED)
    other_user.sh(f"cd {shared} && {script}")
    assert all((shared / n).stat().st_uid == other_user.uid for n in PLANTED)
    return sorted(shared.glob("ran-*"))


def ran(shared: Path) -> List[str]:
    return sorted(p.name for p in shared.glob("ran-*"))


@pytest.mark.parametrize("python", PYTHONS)
def test_planted_modules_never_run(other_user, shared_tmp, python):
    assert plant(other_user, shared_tmp) == []
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}
    code = "import json, runpy; print(json.__file__, runpy.__file__, sys.argv[1:])"
    p = subprocess.run([*code_argv(python, code), "a b"], cwd=shared_tmp, env=env, capture_output=True, text=True)
    assert p.returncode == 0 and str(shared_tmp) not in p.stdout and p.stdout.endswith("['a b']\n"), p
    # the jobenv that runs is the one PYTHONPATH names (3.9 has no click: --version still prints)
    p = subprocess.run([*module_argv(python, "jobenv.core.interpreter")], cwd=shared_tmp, env=env, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert ran(shared_tmp) == []
    # the control: the plain forms do run what was planted (the attack is real)
    subprocess.run([python, "-c", "import json"], cwd=shared_tmp, env=env, capture_output=True)
    assert ran(shared_tmp) == [f"ran-{os.getuid()}"]


def test_pin_and_isolated():
    argv = code_argv("py", "print(1)", pin="/opt/j", isolated=True)
    assert argv[:3] == ["py", "-I", "-c"] and "sys.path.insert(0, '/opt/j'); print(1)" in argv[3]
    assert "\n" not in module_argv("py", "jobenv")[-1]  # `launch` is a one-line shell function
    p = subprocess.run(code_argv(sys.executable, "print(sys.path[0])", pin="/opt/j"), capture_output=True, text=True)
    assert p.stdout == "/opt/j\n"
