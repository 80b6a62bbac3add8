"""`jobenv init SHELL --install`: one marked line in the shell's rc file, and a brand-new
shell with an empty environment (no venv on PATH) that then restores a job and launches."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, jobenv_program, need
from jobenv.restore import init_install
from jobenv.core.errors import BadInput


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
    assert init_install.login_file("zsh", env) == "/z/.zlogin" and init_install.login_file("fish", env) is None
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
    # `jobenv` itself, before getjobenv ran (it was "command not found" there)
    script = (f"jobenv list; and getjobenv; and launch -n 1 -- {prog}" if shell == "fish"
              else f"jobenv list && getjobenv && launch -n 1 -- {prog}")
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], need(shell), *SHELL_RUN[shell], script],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rank 0 of 1" in p.stdout, p.stdout + p.stderr  # the issue's `launch -n 1 -- CMD`
    assert "local" in p.stdout.split("rank 0 of 1")[0], p.stdout  # `jobenv list` named the saved job
    if shell == "bash":
        assert "export KEEP=me" in rc.read_text()


def test_a_user_level_install_is_found_by_a_new_shell(tmp_path):
    """The documented alternative to a venv: `pip install --user` puts jobenv in ~/.local/bin;
    `--install` pins that program, and a new shell with nothing on PATH restores through it."""
    import sysconfig

    if (Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").exists():
        pytest.skip("this Python refuses `pip install --user` (PEP 668): pipx is the user-level way there")
    # inside a venv, pip refuses --user: the user-level install is the base interpreter's
    python = sys.executable if sys.prefix == sys.base_prefix else getattr(sys, "_base_executable", "")
    # setuptools builds a wheel with its own bdist_wheel from 70.1 on, with the `wheel` package before
    builds = "import setuptools\ntry:\n    import setuptools.command.bdist_wheel\nexcept ImportError:\n    import wheel"
    if not python or subprocess.run([python, "-c", builds], capture_output=True).returncode:
        pytest.skip("the interpreter under this venv cannot build jobenv's wheel (no setuptools >= 70.1 nor `wheel`)")
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
    subprocess.run([python, "-m", "pip", "install", "-q", "--user", "--no-deps", "--no-build-isolation",
                    str(src)], env=env, check=True, capture_output=True, timeout=300)
    exe = home / ".local" / "bin" / "jobenv"
    assert exe.exists()
    subprocess.run([str(exe), "init", "bash", "--install"], env=env, check=True, capture_output=True, timeout=60)
    assert str(exe) in (home / ".bashrc").read_text()
    p = subprocess.run(["env", "-i", f"HOME={home}", "PATH=/usr/bin:/bin", "TERM=dumb", "bash", "-i", "-c",
                        'type getjobenv >/dev/null && "$JOBENV_EXE" --version'],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "jobenv" in p.stdout, p.stdout + p.stderr


def install_cli(tmp_path: Path, shell: str, **env: str) -> subprocess.CompletedProcess:
    """`jobenv init SHELL --install` run by this checkout's program, in `env` only."""
    full = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path / "home"), **env}
    return subprocess.run([str(jobenv_program(tmp_path)), "init", shell, "--install"], env=full,
                          capture_output=True, text=True, errors="surrogateescape", timeout=60)


def listing(*dirs: Path) -> list:
    return sorted(str(p) for d in dirs for p in d.rglob("*"))


# (shell, how the attacker (or a careless setup) shapes the shared dir; variable -> its path)
PLANTED = {
    "zsh: ZDOTDIR in a sticky /tmp, .zshrc planted -> a file of the victim's":
        ("zsh", "ln -s {victim} {shared}/.zshrc", {"ZDOTDIR": "{shared}"}),
    "bash: HOME in a sticky /tmp, .bashrc planted -> a file of the victim's":
        ("bash", "ln -s {victim} {shared}/.bashrc", {"HOME": "{shared}"}),
    "zsh: a dangling link planted -> a new file":
        ("zsh", "ln -s {new} {shared}/.zshrc", {"ZDOTDIR": "{shared}"}),
    "fish: XDG_CONFIG_HOME in the attacker's directories, a dangling link -> a new file":
        ("fish", "mkdir -p {shared}/xdg/fish/conf.d && chmod -R 777 {shared}/xdg && "
                 "ln -s {new} {shared}/xdg/fish/conf.d/jobenv.fish", {"XDG_CONFIG_HOME": "{shared}/xdg"}),
}


@pytest.mark.parametrize("case", list(PLANTED))
def test_an_rc_file_another_user_planted_is_refused_and_nothing_written(tmp_path, other_user, shared_tmp, case):
    """A link another user owns (in a sticky shared directory) or directories they own on the
    way to the rc file: one error line, exit 6, the victim's file byte-identical, no file made."""
    shell, plant, env = PLANTED[case]
    victim, new = tmp_path / "precious.conf", tmp_path / "created-by-victim.sh"
    victim.write_bytes(b"victim's own config\n")
    victim.chmod(0o600)
    (tmp_path / "home").mkdir()
    fill = {"victim": victim, "new": new, "shared": shared_tmp}
    other_user.sh(plant.format(**fill))
    jobenv_program(tmp_path)
    before = listing(tmp_path, shared_tmp)
    p = install_cli(tmp_path, shell, **{k: v.format(**fill) for k, v in env.items()})
    assert p.returncode == 6 and p.stderr.startswith("jobenv: error: ") and p.stderr.count("\n") == 1, p.stderr
    assert "owned by uid" in p.stderr and "rc file" in p.stderr and p.stdout == ""
    assert victim.read_bytes() == b"victim's own config\n" and not new.exists()
    assert listing(tmp_path, shared_tmp) == before


def test_a_link_in_a_directory_others_can_write_is_refused(tmp_path):
    """The user's own link, in a directory anyone may write (not sticky): another user could
    swap the link; and the user's own link leading into such a directory: they could swap
    the file.  Both refused, nothing written."""
    victim = tmp_path / "precious.conf"
    victim.write_bytes(b"keep\n")
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    (open_dir / ".zshrc").symlink_to(victim)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").symlink_to(open_dir / "bashrc")
    jobenv_program(tmp_path)
    before = listing(tmp_path)
    for shell, env in (("zsh", {"ZDOTDIR": str(open_dir)}), ("bash", {"HOME": str(home)})):
        p = install_cli(tmp_path, shell, **env)
        assert p.returncode == 6 and p.stderr.count("\n") == 1, p.stderr
        assert f"{open_dir}, above the rc file" in p.stderr and "writable by others and not sticky" in p.stderr
    assert victim.read_bytes() == b"keep\n" and listing(tmp_path) == before


def test_the_users_own_stow_link_still_installs(tmp_path):
    """Dotfile managers (stow, chezmoi) link ~/.bashrc into ~/dotfiles: a link of the user's
    own to a file of theirs, in directories only they can write, gets the line, stays a link."""
    home = tmp_path / "home"
    (home / "dotfiles" / "bash").mkdir(parents=True)
    (home / "dotfiles" / "bash" / ".bashrc").write_text("export KEEP=me\n")
    (home / ".bashrc").symlink_to("dotfiles/bash/.bashrc")  # relative, as stow makes it
    (home / ".config").symlink_to("dotfiles/config")  # fish: a dangling link of the user's, made on install
    for shell in ("bash", "fish"):
        p = install_cli(tmp_path, shell)
        assert p.returncode == 0, p.stderr
    assert (home / ".bashrc").is_symlink()
    text = (home / "dotfiles" / "bash" / ".bashrc").read_text()
    assert text.startswith("export KEEP=me\n") and text.count(init_install.MARK) == 1
    assert init_install.MARK in (home / "dotfiles" / "config" / "fish" / "conf.d" / "jobenv.fish").read_text()


def test_a_new_rc_file_gets_the_umask_and_an_old_one_keeps_its_mode(tmp_path):
    """Issue 24: a new rc file was made 0644 whatever the umask; one that exists keeps its mode."""
    home = tmp_path / "home"
    home.mkdir()
    old = os.umask(0o077)
    try:
        init_install.install("bash", "/opt/venv/bin/jobenv", False, {"HOME": str(home)})
        assert (home / ".bashrc").stat().st_mode & 0o777 == 0o600
        (home / ".bashrc").chmod(0o640)
        init_install.install("bash", "/opt/other/bin/jobenv", False, {"HOME": str(home)})  # the line moves
        assert (home / ".bashrc").stat().st_mode & 0o777 == 0o640 and "/opt/other" in (home / ".bashrc").read_text()
    finally:
        os.umask(old)


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_jobenv_on_path_wins_over_the_pinned_one(tmp_path, shell):
    """The `jobenv` function stands in only while PATH has none: a venv activated later (its
    bin first on PATH) runs its own jobenv; a user's own alias of jobenv is left alone."""
    need(shell)
    home = tmp_path / "home"
    home.mkdir()
    exe = jobenv_program(tmp_path)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb"}
    subprocess.run([str(exe), "init", shell, "--install"], env=env, check=True, capture_output=True, timeout=60)
    other = tmp_path / "other-venv" / "bin"
    other.mkdir(parents=True)
    (other / "jobenv").write_text("#!/bin/sh\necho OTHER \"$@\"\n")
    (other / "jobenv").chmod(0o755)
    if shell == "fish":
        script = f"jobenv --version; set -x PATH {other} $PATH; jobenv list"
    else:
        script = f"jobenv --version; PATH={other}:$PATH; jobenv list"
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], need(shell), "-i", "-c", script],
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert "jobenv" in lines[0] and lines[-1] == "OTHER list", p.stdout + p.stderr
    if shell != "fish":  # a user's alias of jobenv, made before the rc line, is not replaced
        rc = Path(init_install.rc_file(shell, env))
        rc.write_text("alias jobenv='echo ALIAS'\n" + rc.read_text())
        q = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], need(shell), "-i", "-c",
                            "jobenv list"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert q.stdout.strip() == "ALIAS list", q.stdout + q.stderr


DEBIAN_BASHRC = "case $- in\n    *i*) ;;\n      *) return;;\nesac\nalias ll='ls -l'\n"
DEBIAN_PROFILE = ('if [ -n "$BASH_VERSION" ]; then\n    if [ -f "$HOME/.bashrc" ]; then\n'
                  '        . "$HOME/.bashrc"\n    fi\nfi\n')


@pytest.mark.parametrize("start", ["fresh", "debian", "bash_profile", "bash_login"])
def test_a_login_bash_finds_jobenv_once(tmp_path, start):
    """Issue 33: a login bash reads the first of ~/.bash_profile, ~/.bash_login, ~/.profile
    and not ~/.bashrc (Debian's returns at once when not interactive): --install puts its
    line in the file bash reads, once, and `bash -l -c` (as a batch job's shell) and an
    interactive login bash both have getjobenv; the interactive one evaluates it once."""
    need("bash")
    home = tmp_path / "home"
    home.mkdir()
    files = {"fresh": {}, "debian": {".bashrc": DEBIAN_BASHRC, ".profile": DEBIAN_PROFILE},
             "bash_profile": {".bash_profile": "export FROM=bp\n", ".profile": "export FROM=profile\n"},
             "bash_login": {".bash_login": "export FROM=bl\n", ".profile": "export FROM=profile\n"}}[start]
    for name, text in files.items():
        (home / name).write_text(text)
    exe = jobenv_program(tmp_path)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb"}
    for _ in range(2):
        p = subprocess.run([str(exe), "init", "bash", "--install"], env=env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
    read = {"fresh": ".profile", "debian": ".profile", "bash_profile": ".bash_profile",
            "bash_login": ".bash_login"}[start]
    assert (home / read).read_text().count(init_install.MARK) == 1
    assert str(home / read) in p.stdout and str(home / ".bashrc") in p.stdout
    for name, text in files.items():  # the user's own lines stay; only the file bash reads gains one
        assert (home / name).read_text().startswith(text)
        if name not in (read, ".bashrc"):
            assert init_install.MARK not in (home / name).read_text()
    fresh = ["env", "-i", *[f"{k}={v}" for k, v in env.items()]]
    p = subprocess.run([*fresh, "bash", "-l", "-c", "type getjobenv && command -v jobenv"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and "getjobenv is a function" in p.stdout, p.stdout + p.stderr
    # an interactive login bash: the init runs once (Debian's .profile sourced .bashrc first)
    trace = tmp_path / "trace"
    wrapper = tmp_path / "counting-jobenv"
    wrapper.write_text(f"#!/bin/sh\necho run >> {trace}\nexec {exe} \"$@\"\n")
    wrapper.chmod(0o755)
    for name in {read, ".bashrc"}:  # the lines name a jobenv that counts its runs
        (home / name).write_text((home / name).read_text().replace(str(exe), str(wrapper)))
    p = subprocess.run([*fresh, "bash", "-l", "-i", "-c", "type getjobenv >/dev/null && echo OK"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.stdout.strip().endswith("OK"), p.stdout + p.stderr
    assert trace.read_text().count("run") == 1
    # sh reads ~/.profile too: the line is bash's only, a login dash starts clean
    if start in ("fresh", "debian") and shutil.which("dash"):
        p = subprocess.run([*fresh, "dash", "-l", "-c", "echo fine"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        assert p.stdout == "fine\n" and p.stderr == "", p.stderr


def test_a_login_zsh_finds_jobenv(tmp_path):
    """zsh reads .zshrc only when interactive: --install adds .zlogin's line for login shells."""
    need("zsh")
    home = tmp_path / "home"
    home.mkdir()
    exe = jobenv_program(tmp_path)
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "dumb"}
    for _ in range(2):
        subprocess.run([str(exe), "init", "zsh", "--install"], env=env, check=True, capture_output=True, timeout=60)
    assert (home / ".zlogin").read_text().count(init_install.MARK) == 1
    p = subprocess.run(["env", "-i", *[f"{k}={v}" for k, v in env.items()], "zsh", "-l", "-c",
                        "whence -w getjobenv"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert p.stdout.strip() == "getjobenv: function", p.stdout + p.stderr
