"""`jobenv stage` on a local job with small real venvs (no torch): copy, verify, relocate,
no-op re-stage, changed env, clean, the record, restore items, bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import machines
from conftest import base_env, jobenv, record
from jobenv.store import record as record_mod
from jobenv.stage import manifest, pack, relocate, restore
from jobenv.cli.stage import copy_name

BASE_PY = os.path.realpath(sys._base_executable if hasattr(sys, "_base_executable") else sys.executable)


def make_venv(path: Path) -> Path:
    subprocess.run([BASE_PY, "-m", "venv", "--without-pip", str(path)], check=True)
    (path / "bin" / "hello").write_text(f"#!{path}/bin/python\nimport sys\nprint('hello from', sys.prefix)\n")
    (path / "bin" / "hello").chmod(0o755)
    site = next((path / "lib").glob("python3*/site-packages"))
    (site / "stagedmod.py").write_text("X = 1\n")
    (site / "ro.txt").write_text("read only\n")
    (site / "ro.txt").chmod(0o444)
    (site / "link-inside").symlink_to("stagedmod.py")
    return path


@pytest.fixture
def job(tmp_path, home):
    env = base_env(home, machines.local(tmp_path))
    jobenv(["save", "--quiet"], env, check=True)
    return env


def stage(env, *args):
    return jobenv(["stage", *args], env)


def test_stage_copies_relocates_and_records(tmp_path, job):
    venv = make_venv(tmp_path / "shared" / "myenv")
    target = tmp_path / "local"
    p = stage(job, "--env", str(venv), "--to", str(target))
    assert p.returncode == 0, p.stderr
    copy = target / copy_name(str(venv))
    assert "1/1 hosts verified (1 copied, 0 unchanged)" in p.stdout
    run = subprocess.run([str(copy / "bin" / "python"), "-c", "import sys, stagedmod; print(sys.prefix, stagedmod.__file__)"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    prefix, modfile = run.stdout.split()
    assert prefix == str(copy) and modfile.startswith(str(copy) + "/"), run.stdout
    out = subprocess.run([str(copy / "bin" / "hello")], capture_output=True, text=True).stdout
    assert out.strip() == f"hello from {copy}"  # console-script shebang rewritten
    assert subprocess.run([str(copy / "bin" / "python"), "-m", "stagedmod"]).returncode == 0
    assert str(venv) not in (copy / "bin" / "activate").read_text()
    site = next((copy / "lib").glob("python3*/site-packages"))
    assert os.readlink(site / "link-inside") == "stagedmod.py"
    assert (site / "ro.txt").stat().st_mode & 0o777 == 0o444
    rec = record(job)
    entry = rec["staged"]["workstation7"]
    assert entry["prefix"] == str(copy) and len(entry["manifest"]) == 64
    # the source is untouched
    assert (venv / "bin" / "hello").read_text().startswith(f"#!{venv}/bin/python")
    # restore items for this host
    r = record_mod.from_dict(rec)
    sets, path, warns = restore.restore_items(r, job, "workstation7")
    assert sets["VIRTUAL_ENV"] == str(copy) and path == [str(copy / "bin")] and not warns
    assert restore.check(r, "workstation7")[0] == "ok"
    assert restore.restore_items(r, job, "otherhost") == ({}, [], [])

    # unchanged: nothing copied
    p = stage(job, "--env", str(venv), "--to", str(target))
    assert p.returncode == 0 and "archive" in p.stdout and "is current" in p.stdout
    assert "(0 copied, 1 unchanged)" in p.stdout, p.stdout

    # changed: re-staged; doctor's check sees the change first
    site_src = next((venv / "lib").glob("python3*/site-packages"))
    (site_src / "newmod.py").write_text("Y = 2\n")
    assert restore.check(r, "workstation7")[0] == "stale"
    p = stage(job, "--env", str(venv), "--to", str(target))
    assert p.returncode == 0 and "(1 copied, 0 unchanged)" in p.stdout, p.stdout + p.stderr
    assert (next((copy / "lib").glob("python3*/site-packages")) / "newmod.py").exists()
    assert len(list((Path(job["JOBENV_HOME"]) / "stage").glob("*.tar"))) == 1  # old archive pruned

    # rewritten with the same size inside the same second: still a change (mtime in nanoseconds)
    st = (site_src / "newmod.py").stat()
    (site_src / "newmod.py").write_text("Y = 3\n")
    os.utime(site_src / "newmod.py", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    p = stage(job, "--env", str(venv), "--to", str(target))
    assert p.returncode == 0 and "(1 copied, 0 unchanged)" in p.stdout, p.stdout + p.stderr
    assert (next((copy / "lib").glob("python3*/site-packages")) / "newmod.py").read_text() == "Y = 3\n"
    assert not [n for n in os.listdir(target) if n.startswith(".")]  # no temp or old copies left

    # clean
    p = stage(job, "--env", str(venv), "--to", str(target), "--clean")
    assert p.returncode == 0 and "removed" in p.stdout, p.stderr
    assert not copy.exists() and "staged" not in record(job)
    assert os.stat(target).st_mode & 0o777 == 0o700  # kept: nobody else can create the copy's path
    assert not list((Path(job["JOBENV_HOME"]) / "stage").glob("*.tar"))
    r2 = record_mod.from_dict(rec)
    assert restore.restore_items(r2, job, "workstation7")[2]  # a warning: copy missing


def test_dry_run_changes_nothing(tmp_path, job):
    venv = make_venv(tmp_path / "e")
    p = stage(job, "--env", str(venv), "--to", str(tmp_path / "t" / "%h"), "--dry-run")
    assert p.returncode == 0 and "would be packed" in p.stdout and "would stage to" in p.stdout
    assert not (tmp_path / "t").exists() and not list((Path(job["JOBENV_HOME"]) / "stage").glob("*.tar"))


def test_base_interpreter_staged_when_asked(tmp_path, job):
    venv = make_venv(tmp_path / "e")
    target = tmp_path / "t"
    p = stage(job, "--env", str(venv), "--to", str(target), "--base", "yes")
    assert p.returncode == 0, p.stderr
    assert "staged too" in p.stdout
    copy = target / copy_name(str(venv))
    out = subprocess.run([str(copy / "bin" / "python"), "-c", "import sys, os; print(sys.base_prefix, os.__file__)"],
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    base_prefix, osfile = out.stdout.split()
    assert base_prefix == str(copy / ".jobenv-base") and osfile.startswith(base_prefix), out


@pytest.mark.parametrize("what,want", [
    ("missing", "not a directory"), ("plain", "is not a Python environment"),
])
def test_not_an_environment(tmp_path, job, what, want):
    path = tmp_path / what
    if what == "plain":
        path.mkdir()
    p = stage(job, "--env", str(path), "--to", str(tmp_path / "t"))
    assert p.returncode == 5 and p.stderr.count("\n") == 1 and want in p.stderr, p.stderr
    assert not (tmp_path / "t").exists()


def test_unwritable_target_is_named(tmp_path, job):
    if os.geteuid() == 0:
        target = Path("/proc/jobenv-stage-test")  # not writable even for root
    else:
        target = tmp_path / "ro"
        target.mkdir(mode=0o500)
    venv = make_venv(tmp_path / "e")
    p = stage(job, "--env", str(venv), "--to", str(target / "x"))
    assert p.returncode == 1 and p.stderr.startswith("jobenv: error: workstation7: "), p.stderr
    assert "cannot write" in p.stderr or "No such file" in p.stderr
    assert "staged" not in record(job)


def test_full_target_is_named(tmp_path, job):
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    venv = make_venv(tmp_path / "e")
    (venv / "big.bin").write_bytes(os.urandom(3 << 20))
    small = tmp_path / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(small)], check=True)
    try:
        p = stage(job, "--env", str(venv), "--to", str(small))
        assert p.returncode == 1 and "workstation7: no space in" in p.stderr, p.stderr
        assert os.listdir(small) == []  # nothing half-made left behind
    finally:
        subprocess.run(["umount", str(small)], check=True)


def test_env_changing_while_packing_is_refused(tmp_path):
    venv = make_venv(tmp_path / "e")
    env = manifest.inspect(str(venv), {}, "no")
    items = manifest.entries(env)
    calls = []

    def meddle(n):
        calls.append(n)
        if len(calls) == 2:
            (venv / "intruder.py").write_text("x")
    with pytest.raises(manifest.EnvError, match="changed while packing"):
        pack.pack(env, items, manifest.digest(items), str(tmp_path), meddle)
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".tar", ".json") or p.name.startswith(".")]


def test_conda_env_relocated_like_conda_pack(tmp_path, job):
    env = tmp_path / "conda" / "envs" / "long-enough-name"
    (env / "conda-meta").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(BASE_PY)
    (env / "etc").mkdir()
    (env / "etc" / "conf.txt").write_text(f"prefix={env}\nlib={env}/lib\n")
    (env / "lib").mkdir()
    (env / "lib" / "libfake.so").write_bytes(b"\x7fELF\0\0" + str(env).encode() + b"/lib:x\0tail\0")
    (env / "bin" / "abs-link").symlink_to(f"{env}/etc/conf.txt")
    short = tmp_path / "t"
    p = stage(job, "--env", str(env), "--to", str(short))
    assert p.returncode == 0, p.stderr
    copy = short / copy_name(str(env))
    assert (copy / "etc" / "conf.txt").read_text() == f"prefix={copy}\nlib={copy}/lib\n"
    data = (copy / "lib" / "libfake.so").read_bytes()
    assert len(data) == len((env / "lib" / "libfake.so").read_bytes())
    assert str(copy).encode() + b"/lib:x\0" in data and data.endswith(b"\0tail\0")
    assert os.readlink(copy / "bin" / "abs-link") == f"{copy}/etc/conf.txt"
    sets, _, _ = restore.restore_items(record_mod.from_dict(record(job)), job, "workstation7")
    assert sets == {"CONDA_PREFIX": str(copy)}
    longer = tmp_path / ("x" * 80)
    p = stage(job, "--env", str(env), "--to", str(longer))
    assert p.returncode == 1 and "longer" in p.stderr and "workstation7" in p.stderr, p.stderr
    assert not (longer / copy_name(str(env))).exists()


def test_fix_shebang_and_fs_type(tmp_path):
    long = b"#!" + b"/p" * 80 + b"/bin/python\nprint(1)\n"
    fixed = relocate.fix_shebang(long)
    assert fixed.startswith(b"#!/bin/sh\n'''exec' \"/p/p") and fixed.endswith(b"print(1)\n")
    script = tmp_path / "s"
    script.write_bytes(relocate.fix_shebang(b"#!" + sys.executable.encode().ljust(130, b"/") + b"\nimport sys\n"))
    mounts = tmp_path / "mounts"
    mounts.write_text("/dev/vda / ext4 rw 0 0\nserver:/home /home nfs4 rw 0 0\nserver:/sw /home/sw\\040x lustre rw 0 0\n")
    assert manifest.fs_type("/home/alice/venv", str(mounts)) == "nfs4"
    assert manifest.fs_type("/home/sw x/py", str(mounts)) == "lustre"
    assert manifest.fs_type("/usr/bin", str(mounts)) == "ext4"
    assert manifest.is_shared("nfs4", {}) and not manifest.is_shared("ext4", {})
    assert manifest.is_shared("overlay", {"JOBENV_SHARED_FS": "overlay,xfs"})


def test_bad_staged_field_is_refused(tmp_path, job):
    rec = record(job)
    rec["staged"] = {"workstation7": {"prefix": "relative", "manifest": "x", "verified_at": 1}}
    with pytest.raises(Exception, match="bad staged field"):
        record_mod.from_dict(rec)
    rec["staged"] = {"h": {"prefix": "/a/h/x", "manifest": "m", "verified_at": 1.5}}
    assert record_mod.from_dict(rec).staged["h"]["prefix"] == "/a/h/x"


def test_template_and_rank_shim(tmp_path):
    key = "k" * 64
    rec = record_mod.JobRecord("slurm", "1", "slurm", ["n1", "n2"], 0, 1, None, ["srun"], {}, "", "",
                               staged={h: {"prefix": f"{tmp_path}/{h}/env-1", "manifest": key, "verified_at": 1.0}
                                       for h in ("n1", "n2")})
    assert restore.template(rec) == f"{tmp_path}/%h/env-1"
    assert restore.rank_prefix(rec)[2:] == [restore.template(rec), key]
    host = os.uname().nodename
    copy = tmp_path / host / "env-1"
    (copy / "bin").mkdir(parents=True)
    (copy / ".jobenv-stage.json").write_text(json.dumps({"key": key, "kind": "venv"}))
    argv = restore.rank_prefix(rec) + ["/bin/sh", "-c", 'echo "$PATH|$VIRTUAL_ENV"']
    out = subprocess.run(argv, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}).stdout.strip()
    assert out == f"{copy}/bin:/usr/bin:/bin|{copy}"
    rec.staged["n2"]["manifest"] = "other"
    assert restore.rank_prefix(rec) == []  # two keys: no one template to check against


def test_recording_a_copy_keeps_the_saved_time(tmp_path, job, monkeypatch):
    """stage writes its `staged` field through the store's one record writer, which keeps
    the record's saved time as its mtime: `get` picks the newest record by it."""
    from jobenv.store import files as store
    from jobenv.cli.stage import update_record

    monkeypatch.setenv("JOBENV_HOME", job["JOBENV_HOME"])
    (path, rec), = [(p, r) for p, r in store.iter_records(job) if not isinstance(r, Exception)]
    entry = {"prefix": str(tmp_path / "copy"), "manifest": "0" * 64, "verified_at": 1.0}
    update_record(path, {rec.hosts[0]: entry})
    assert os.stat(path).st_mtime == rec.created_at
    assert store.load(path).staged == {rec.hosts[0]: entry}


def test_stage_any_directory_byte_for_byte_leaving_the_record_alone(tmp_path, job):
    data = tmp_path / "shared" / "dataset"
    (data / "shards").mkdir(parents=True)
    (data / "shards" / "0.bin").write_bytes(b"\0" + str(data).encode() + os.urandom(1000))  # names its own path
    (data / "latest").symlink_to("shards/0.bin")
    target = tmp_path / "local"
    p = stage(job, f"{data}/", "--to", str(target))
    assert p.returncode == 0, p.stderr
    copy = target / copy_name(str(data))
    assert (copy / "shards" / "0.bin").read_bytes() == (data / "shards" / "0.bin").read_bytes()  # not relocated
    assert os.readlink(copy / "latest") == "shards/0.bin"
    assert "staged" not in json.loads(jobenv(["show", "--json"], job).stdout)  # not the environment `get` restores
    p = stage(job, str(data), "--to", str(target))
    assert p.returncode == 0 and "(0 copied, 1 unchanged)" in p.stdout, p.stdout + p.stderr
    p = stage(job, str(data), "--env", str(data))
    assert p.returncode == 2 and "not both" in p.stderr
    p = stage(job, str(tmp_path / "nowhere/"), "--to", str(target))
    assert p.returncode != 0 and "not a directory" in p.stderr
    p = stage(job, str(data), "--to", str(target), "--clean")
    assert p.returncode == 0 and not copy.exists(), p.stderr


@pytest.mark.parametrize("bad", ["nan", "inf", "0", "1.5", "1e-3", "-0.5", "٠.5", " 0.5"])
def test_min_fraction_takes_a_plain_fraction_only(job, bad):
    p = stage(job, "--min-fraction", bad, "--dry-run")
    assert p.returncode == 2 and "give a fraction above 0 and at most 1" in p.stderr, p.stderr


def test_hosts_needed():
    from jobenv.stage.outcome import needed

    assert needed(10, None, None) == 10 and needed(10, 3, None) == 3 and needed(10, None, 0.75) == 8
    assert needed(10, 9, 0.5) == 9 and needed(10, 20, None) == 10 and needed(4, None, 0.75) == 3
    assert needed(3, None, 0.01) == 1
