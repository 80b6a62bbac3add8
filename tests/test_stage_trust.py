"""`jobenv stage` on a node shared with another user: a stage directory or staged copy
another account made or can write is never used (stage, restore, doctor's check, every
rank's rankenv.sh), cleanup never follows a symbolic link, and a restored shell runs the
staged copy's python3 before the shared venv's."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import base_env, jobenv, record
from jobenv.store import record as record_mod
from jobenv.stage import manifest, restore, worker
from jobenv.cli.stage import copy_name
from test_stage import make_venv

HOST = socket.gethostname()  # the worker's own name for this host


@pytest.fixture
def job(tmp_path, home, shared_tmp):
    """A local job whose default stage directory is $TMPDIR/jobenv-root, TMPDIR shared."""
    env = base_env(home, {"JOBENV_HOSTNAME": "workstation7", "TMPDIR": str(shared_tmp), "USER": "root"})
    jobenv(["save", "--quiet"], env, check=True)
    return env


def key_of(venv: Path) -> str:
    """The manifest key: computable by anyone who can read the venv's metadata."""
    return manifest.digest(manifest.entries(manifest.inspect(str(venv), {}, "no")))


def plant(other_user, copy: Path, key: str, root_mode: str = "777") -> None:
    """As the other user: the stage directory with a copy whose python3 is theirs."""
    other_user.sh(f"""set -e
mkdir -p '{copy}/bin'; chmod {root_mode} '{copy.parent}'
printf '#!/bin/sh\\necho PLANTED\\n' > '{copy}/bin/python3'; chmod 755 '{copy}/bin/python3'
printf '{{"key": "{key}", "kind": "venv", "entries": 1}}' > '{copy}/.jobenv-stage.json'
chmod -R a+rX '{copy}'""")


def modes(tree: Path) -> dict:
    return {str(p): p.stat().st_mode & 0o7777 for p in [tree, *tree.rglob("*")]}


@pytest.mark.parametrize("planted", ["copy", "empty-0777"])
def test_stage_refuses_a_stage_directory_another_user_made(tmp_path, job, other_user, shared_tmp, planted):
    venv = make_venv(tmp_path / "myenv")
    root = shared_tmp / "jobenv-root"
    copy = root / copy_name(str(venv))
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    before = modes(project)
    if planted == "copy":
        plant(other_user, copy, key_of(venv))
        other_user.sh(f"ln -s '{project}' '{root}/.{copy.name}.tmp.{HOST}.99999'")
    else:
        other_user.sh(f"mkdir '{root}' && chmod 777 '{root}'")
    p = jobenv(["stage", "--env", str(venv)], job)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and f"stage directory {root} is owned by uid {other_user.uid}" in p.stderr
    assert "staged" not in record(job)
    assert modes(project) == before  # nothing of the user's was re-permissioned
    assert not (root / copy.name / "lib").exists()  # nothing copied into their directory
    listing = sorted(os.listdir(root))
    p = jobenv(["stage", "--env", str(venv), "--clean"], job)
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "left alone" in p.stderr, p.stderr
    assert sorted(os.listdir(root)) == listing


def test_own_stage_directory_under_sticky_tmp_is_created_private(tmp_path, job, shared_tmp):
    venv = make_venv(tmp_path / "myenv")
    p = jobenv(["stage", "--env", str(venv)], job)
    assert p.returncode == 0, p.stderr
    root = shared_tmp / "jobenv-root"
    assert root.stat().st_mode & 0o777 == 0o700 and root.stat().st_uid == os.getuid()
    r = record_mod.from_dict(record(job))
    assert restore.check_copy(str(root / copy_name(str(venv))), r.staged["workstation7"]["manifest"])[0] == "ok"


def test_a_copy_replaced_after_stage_is_not_run(tmp_path, job, other_user, shared_tmp):
    """The stage directory vanishes (a /tmp cleaner) and another user re-creates it with a
    copy carrying the recorded key: restore, doctor's check and every rank refuse it."""
    venv = make_venv(tmp_path / "myenv")
    assert jobenv(["stage", "--env", str(venv)], job).returncode == 0
    r = record_mod.from_dict(record(job))
    root = shared_tmp / "jobenv-root"
    copy = root / copy_name(str(venv))
    subprocess.run(["rm", "-rf", str(root)], check=True)
    plant(other_user, copy, r.staged["workstation7"]["manifest"])
    sets, path, warns = restore.restore_items(r, job, "workstation7")
    assert (sets, path) == ({}, []) and f"owned by uid {other_user.uid}" in warns[0], warns
    assert restore.check(r, "workstation7")[0] == "unsafe"
    from jobenv.doctor.checks import check_staged
    assert check_staged(r, "workstation7").status != "ok"
    # a rank whose launching shell still has the copy first on PATH (the path is the same on every host)
    argv = restore.rank_prefix(r) + ["/bin/sh", "-c", 'command -v python3; python3 -c "print(1)"; echo "v=$VIRTUAL_ENV"']
    p = subprocess.run(argv, capture_output=True, text=True,
                       env={"PATH": f"{copy}/bin:{venv}/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(copy)})
    assert "PLANTED" not in p.stdout and p.stdout.split()[0] == f"{venv}/bin/python3", p.stdout
    assert p.stdout.split()[-1] == "v=" and "not using the staged copy" in p.stderr, p.stderr


def shim(rec, script: str, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess:
    return subprocess.run(restore.rank_prefix(rec) + ["/bin/sh", "-c", script], capture_output=True, text=True,
                          env={"PATH": path})


def staged_rec(tmp_path: Path, key: str = "k" * 64):
    return record_mod.JobRecord("slurm", "1", "slurm", ["n1", "n2"], 0, 1, None, ["srun"], {}, "", "",
                                staged={h: {"prefix": f"{tmp_path}/{h}/env-1", "manifest": key, "verified_at": 1.0}
                                        for h in ("n1", "n2")})


@pytest.mark.parametrize("harm", ["root-g+w", "copy-o+w", "copy-symlink", "other-owner", "wrong-key", "no-stamp"])
def test_rank_shim_refuses_an_unsafe_copy(tmp_path, other_user, harm):
    rec = staged_rec(tmp_path)
    root = tmp_path / os.uname().nodename
    copy = root / "env-1"
    (copy / "bin").mkdir(parents=True)
    root.chmod(0o700)
    (copy / ".jobenv-stage.json").write_text(json.dumps({"key": "k" * 64, "kind": "venv"}))
    assert shim(rec, 'echo "$PATH|$VIRTUAL_ENV"').stdout.strip() == f"{copy}/bin:/usr/bin:/bin|{copy}"
    if harm == "root-g+w":
        root.chmod(0o770)
    elif harm == "copy-o+w":
        copy.chmod(0o757)
    elif harm == "copy-symlink":
        copy.rename(tmp_path / "real")
        copy.symlink_to(tmp_path / "real")
    elif harm == "other-owner":
        os.chown(copy, other_user.uid, other_user.gid)
    elif harm == "wrong-key":
        (copy / ".jobenv-stage.json").write_text(json.dumps({"key": "j" * 64, "kind": "venv"}))
    else:
        (copy / ".jobenv-stage.json").unlink()
    p = shim(rec, 'echo "$PATH|$VIRTUAL_ENV"', f"{copy}/bin:/usr/bin:/bin")
    assert p.stdout.strip() == "/usr/bin:/bin|", (p.stdout, p.stderr)
    assert p.stderr.count("jobenv: warning: not using the staged copy") == 1, p.stderr
    assert restore.check_copy(str(copy), "k" * 64)[0] != "ok"


def test_rank_shim_does_not_run_a_program_from_the_copy_it_is_checking(tmp_path):
    """A rank's PATH already has the staged copy's bin first (the restored shell put it
    there); the check that the copy is writable by nobody else must not look its own tool
    up on that PATH: a group member who can write the copy (the case the check exists for)
    would supply a `find` that runs as you and prints nothing, so the copy passes too."""
    rec = staged_rec(tmp_path)
    root = tmp_path / os.uname().nodename
    copy = root / "env-1"
    (copy / "bin").mkdir(parents=True)
    root.chmod(0o700)
    (copy / ".jobenv-stage.json").write_text('{"key": "' + "k" * 64 + '", "kind": "venv"}')
    copy.chmod(0o775)  # group-writable: must be refused
    mark = tmp_path / "ran"
    (copy / "bin" / "find").write_text(f"#!/bin/sh\ntouch '{mark}'\n")
    (copy / "bin" / "find").chmod(0o755)
    p = shim(rec, 'echo "$PATH|$VIRTUAL_ENV"', f"{copy}/bin:/usr/bin:/bin")
    assert not mark.exists(), "rankenv.sh ran find from the unchecked copy"
    assert p.stdout.strip() == "/usr/bin:/bin|", (p.stdout, p.stderr)
    assert p.stderr.count("\n") == 1 and f"writable by others: {copy}" in p.stderr, p.stderr


def test_rank_shim_finds_its_tool_on_any_path(tmp_path):
    """A rank whose PATH has no `find` (a container, a minimal PATH) still checks the copy
    and runs it: no "find: not found" taken for a copy writable by others."""
    rec = staged_rec(tmp_path)
    copy = tmp_path / os.uname().nodename / "env-1"
    (copy / "bin").mkdir(parents=True)
    copy.parent.chmod(0o700)
    (copy / ".jobenv-stage.json").write_text('{"key": "' + "k" * 64 + '", "kind": "venv"}')
    p = shim(rec, 'echo "$PATH|$VIRTUAL_ENV"', str(tmp_path / "nothing-here"))
    assert (p.stdout.strip(), p.stderr) == (f"{copy}/bin:{tmp_path}/nothing-here|{copy}", ""), (p.stdout, p.stderr)


def test_rank_shim_is_silent_where_there_is_no_copy(tmp_path):
    p = shim(staged_rec(tmp_path), 'echo "$PATH|$VIRTUAL_ENV"')
    assert (p.stdout.strip(), p.stderr) == ("/usr/bin:/bin|", "")


def test_cleanup_never_follows_a_symlink(tmp_path):
    project = tmp_path / "project"
    (project / "a" / "b").mkdir(parents=True)
    (project / "a" / "f").write_text("keep")
    before = modes(project)
    root = tmp_path / "stage"
    root.mkdir(mode=0o700)
    (root / f".env-1.tmp.{HOST}.99999").symlink_to(project)
    old = root / f".env-1.old.{HOST}.99998"
    (old / "ro").mkdir(parents=True)
    (old / "ro" / "into-project").symlink_to(project / "a")
    (old / "ro").chmod(0o500)
    worker._leftovers(str(root), "env-1", HOST)
    assert os.listdir(root) == [] and modes(project) == before and (project / "a" / "f").read_text() == "keep"


def test_restored_shell_runs_the_staged_python_first(tmp_path, home):
    venv = make_venv(tmp_path / "shared" / "myenv")
    env = base_env(home, {"JOBENV_HOSTNAME": "workstation7", "VIRTUAL_ENV": str(venv)},
                   path=f"{venv}/bin:/usr/local/bin:/usr/bin:/bin")
    jobenv(["save", "--quiet"], env, check=True)
    target = tmp_path / "local"
    assert jobenv(["stage", "--to", str(target)], env).returncode == 0
    copy = target / copy_name(str(venv))
    fresh = base_env(home, {"PYTHON": sys.executable, "JOBENV_HOSTNAME": "workstation7"})
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                        'source <("$PYTHON" -m jobenv get) && command -v python3 && echo "$VIRTUAL_ENV"'],
                       capture_output=True, text=True, env=fresh, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == [f"{copy}/bin/python3", str(copy)], p.stdout + p.stderr


def test_stage_directory_reached_through_another_users_link_is_refused(tmp_path, home, other_user, shared_tmp):
    """JOBENV_STAGE_DIR=/tmp/L/stg where another user owns the link /tmp/L (to a directory
    of yours, for now): they may repoint it between any two steps of the worker, so the
    stage fails naming it and nothing is made or changed behind it."""
    venv = make_venv(tmp_path / "myenv")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link = shared_tmp / "L"
    other_user.sh(f"ln -s '{private}' '{link}'")
    env = base_env(home, {"JOBENV_HOSTNAME": "workstation7", "JOBENV_STAGE_DIR": f"{link}/stg"})
    jobenv(["save", "--quiet"], env, check=True)
    p = jobenv(["stage", "--env", str(venv)], env)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stdout + p.stderr
    assert f"{link}, above the stage directory {link}/stg, is a symbolic link owned by uid {other_user.uid}" in p.stderr
    assert "staged" not in record(env) and os.listdir(private) == []


@pytest.mark.parametrize("var,value", [("JOBENV_STAGE_DIR", "stagedir"), ("TMPDIR", "scratch"),
                                       ("JOBENV_STAGE_DIR", "./x/../y")])
def test_relative_stage_dir_is_one_line_not_a_spinning_worker(tmp_path, home, var, value):
    """A relative JOBENV_STAGE_DIR or TMPDIR would name a different directory in every
    process's cwd, and a record must name the copy from anywhere: one line, nothing staged
    (it once sent the worker walking dirname('') == '' until --timeout)."""
    venv = make_venv(tmp_path / "myenv")
    cwd = tmp_path / "proj"
    cwd.mkdir()
    env = base_env(home, {"JOBENV_HOSTNAME": "ws7", var: value})
    jobenv(["save", "--quiet"], env, check=True)
    p = jobenv(["stage", "--env", str(venv), "--timeout", "15"], env, cwd=cwd)
    assert "no report" not in p.stderr, p.stderr  # the worker was killed by the timeout
    staged = record(env).get("staged") or {}
    assert all(os.path.isabs(e["prefix"]) for e in staged.values()), staged
    assert p.returncode == 5 and p.stderr.count("\n") == 1, p.stderr
    assert f"{var}={value!r} is not an absolute path" in p.stderr, p.stderr
    assert os.listdir(cwd) == [] and not staged


def test_a_worker_whose_own_environment_names_a_relative_stage_dir_says_so(tmp_path, monkeypatch):
    """Each host's worker reads its own environment (TMPDIR is often per node): it reports
    the one line itself rather than trusting the submitting host's check."""
    monkeypatch.setenv("TMPDIR", "rel")
    monkeypatch.delenv("JOBENV_STAGE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(worker.Failure, match="TMPDIR='rel' is not an absolute path"):
        worker.clean({"clean": True, "to": None, "name": "env-1"}, HOST)
    assert os.listdir(tmp_path) == []
