"""`jobenv init SHELL --install`: one marked line in the shell's rc file, and a brand-new
shell with an empty environment (no venv on PATH) that then restores a job and launches."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, jobenv_program, need
from jobenv import init_install
from jobenv.errors import BadInput


def test_line_is_added_once_and_replaced_when_jobenv_moved():
    first = init_install.rc_line("bash", "/a/.venv/bin/jobenv", False)
    text = "export EDITOR=vi\n"
    once = init_install.updated(text, first)
    assert once == text + first + "\n"
    assert init_install.updated(once, first) is None  # idempotent
    moved = init_install.rc_line("bash", "/b/my venv/bin/jobenv", True)
    again = init_install.updated(once + "alias ll='ls -l'\n", moved)
    assert again is not None and again.count(init_install.MARK) == 1
    assert again.splitlines() == ["export EDITOR=vi", moved, "alias ll='ls -l'"]
    assert "'/b/my venv/bin/jobenv' init bash --auto" in moved


def test_rc_files_per_shell():
    env = {"HOME": "/h", "ZDOTDIR": "/z", "XDG_CONFIG_HOME": "/c"}
    assert init_install.rc_file("bash", env) == "/h/.bashrc"
    assert init_install.rc_file("zsh", env) == "/z/.zshrc"
    assert init_install.rc_file("fish", env) == "/c/fish/conf.d/jobenv.fish"
    with pytest.raises(BadInput, match=r"\$ENV"):
        init_install.rc_file("sh", env)


def test_a_relative_or_unknown_jobenv_is_refused(tmp_path):
    with pytest.raises(BadInput, match="absolute path"):
        init_install.install("bash", "", False, {"HOME": str(tmp_path)})
    assert not (tmp_path / ".bashrc").exists()


SHELL_RUN = {
    "bash": ["-i", "-c"],
    "zsh": ["-i", "-c"],
    "fish": ["-i", "-c"],
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_brand_new_shell_finds_jobenv_restores_and_launches(tmp_path, shell):
    """The issue's first-day wall: after --install, `env -i HOME=... PATH=/usr/bin:/bin SHELL -i`
    has getjobenv (jobenv by its absolute path), restores the saved job and runs `launch`."""
    need(shell)
    home = tmp_path / "home"
    home.mkdir()
    exe = jobenv_program(tmp_path)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb"}
    for _ in range(2):  # twice: still one line
        p = subprocess.run([str(exe), "init", shell, "--install"], env=env, capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
        assert p.returncode == 0, p.stderr
    rc = Path(init_install.rc_file(shell, env))
    assert rc.read_text().count(init_install.MARK) == 1 and str(exe) in rc.read_text()
    if shell == "bash":  # a line of the user's own stays
        rc.write_text("export KEEP=me\n" + rc.read_text())
    # a saved job: the venv's own MPI launcher must be reachable by absolute path, as `save` records it
    save_env = dict(env, PATH=f"{os.path.dirname(sys.executable)}:/usr/bin:/bin")
    subprocess.run([str(exe), "save", "--quiet"], env=save_env, check=True, capture_output=True, timeout=60)
    prog = 'python3 -c "import os; print(\'rank\', os.environ[\'RANK\'], \'of\', os.environ[\'WORLD_SIZE\'])"'
    script = f"getjobenv; and launch -n 1 -- {prog}" if shell == "fish" else f"getjobenv && launch -n 1 -- {prog}"
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], need(shell), *SHELL_RUN[shell], script],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 0 of 1" in p.stdout, p.stdout + p.stderr  # the issue's `launch -n 1 -- CMD`
    if shell == "bash":
        assert "export KEEP=me" in rc.read_text()


def test_a_user_level_install_is_found_by_a_new_shell(tmp_path):
    """The documented alternative to a venv: `pip install --user` puts jobenv in ~/.local/bin;
    `--install` pins that program, and a new shell with nothing on PATH restores through it."""
    import sysconfig

    if (Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").exists():
        pytest.skip("this Python refuses `pip install --user` (PEP 668): pipx is the user-level way there")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb",
           "PYTHONUSERBASE": str(home / ".local"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    src = tmp_path / "src"  # a copy: building in place would leave build/ in the checkout
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        if (REPO / rel).is_file():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes((REPO / rel).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--user", "--no-deps", "--no-build-isolation",
                    str(src)], env=env, check=True, capture_output=True, timeout=300)
    exe = home / ".local" / "bin" / "jobenv"
    assert exe.exists()
    subprocess.run([str(exe), "init", "bash", "--install"], env=env, check=True, capture_output=True, timeout=60)
    assert str(exe) in (home / ".bashrc").read_text()
    p = subprocess.run(["env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin", "TERM=dumb", "bash", "-i", "-c",
                        'type getjobenv >/dev/null && "$JOBENV_EXE" --version'],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "jobenv" in p.stdout, p.stdout + p.stderr
