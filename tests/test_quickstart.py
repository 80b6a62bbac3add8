"""The README's first command, run exactly as written, in a fresh copy of the repository.

A newcomer on a fresh Debian machine copies that one line; if it fails for them (PEP 668,
a missing extra, a renamed command) this test fails first.  It makes its own venv and
installs into it, so it takes a minute or two; it runs in CI (the README promises it).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import REPO

pytestmark = pytest.mark.e2e


def quickstart_command(readme: str) -> str:
    """The fenced bash block under '**1. Install' in the Quickstart section."""
    section = readme[readme.index("## Quickstart"):]
    first = section[section.index("**1. Install"):]
    m = re.search(r"```bash\n(.+?)\n```", first, re.S)
    assert m, "README Quickstart has no ```bash block under **1. Install"
    return m.group(1).strip()


def test_quickstart_block_is_one_command():
    cmd = quickstart_command((REPO / "README.md").read_text())
    assert "\n" not in cmd and "python3 -m venv" in cmd and "launch python3 -m jobenv.selftest" in cmd


def test_readme_first_command_as_written(tmp_path):
    if not os.environ.get("CI") and not os.environ.get("JOBENV_QUICKSTART"):
        pytest.skip("makes a venv and installs jobenv (~1 min): runs in CI or with JOBENV_QUICKSTART=1")
    cmd = quickstart_command((REPO / "README.md").read_text())
    clone = tmp_path / "jobenv"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = REPO / rel
        if src.is_file():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / rel)
    home = tmp_path / "home"
    home.mkdir()
    # a newcomer's login shell: HOME, a PATH whose python3 is this interpreter's, nothing of ours
    bindir = tmp_path / "py"
    bindir.mkdir()
    (bindir / "python3").symlink_to(sys.executable)
    env = {"HOME": str(home), "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    # the machine's pip settings (index mirrors, certificates) are the newcomer's too
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    if os.geteuid() == 0:  # Open MPI refuses root; the MPICH wheel does not care
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    t0 = time.monotonic()
    p = subprocess.run(["bash", "-c", cmd], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "jobenv selftest PASSED" in p.stdout, p.stdout[-3000:]
    assert (clone / ".venv" / "bin" / "jobenv").exists()
    # the light first command: no torch, no CUDA (a 4.7 GB venv on a clean machine before)
    site = list((clone / ".venv" / "lib").glob("python3*/site-packages"))[0]
    heavy = sorted(d.name for d in site.iterdir() if d.name.startswith(("torch", "nvidia", "triton")))
    assert not heavy, heavy
    size = sum(f.stat().st_size for f in (clone / ".venv").rglob("*") if f.is_file() and not f.is_symlink())
    assert size < 400 << 20, f"the venv holds {size >> 20} MiB"
    print(f"quickstart: {elapsed:.0f} s, venv {size >> 20} MiB")
