"""`jobenv import` of env files written by other tools: parsed as data, never run."""
from __future__ import annotations

import json

import pytest

import fsutil
from conftest import base_env, jobenv
from jobenv.core.errors import BadInput
from jobenv.capture.importer import import_env, parse
from jobenv.schedulers import PROGRAM_VARS

EZPZ_PBSENV = """\
export PBS_JOBID=1777928.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov
export PBS_NODEFILE=/var/spool/pbs/aux/1777928.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov
export PBS_O_WORKDIR=/home/a/$(touch {canary})
export HOSTFILE={hostfile}
export NHOSTS=2
export NGPU_PER_HOST=4
export DIST_LAUNCH=mpiexec --verbose --envall -n 8 -ppn 4 --hostfile {hostfile}
alias launch='mpiexec --verbose --envall -n 8 -ppn 4 --hostfile {hostfile}'
"""


def test_parse_is_literal():
    env = parse("export A=4(x2)\nB='it'\\''s'\nexport C=\"x \\\"y\\\" $z\"\nrm -rf /\n# c\nalias l=x\nD=$(id)\n")
    assert env == {"A": "4(x2)", "B": "it's", "C": 'x "y" $z', "D": "$(id)"}
    with pytest.raises(BadInput, match="line 1: unterminated quote"):
        parse("A='open\n", "f")


def test_import_ezpz_pbsenv(tmp_path, home):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("x3005c0s37b0n0.hsn.cm.polaris.alcf.anl.gov\nx3005c0s37b1n0.hsn.cm.polaris.alcf.anl.gov\n")
    canary = tmp_path / "pwned"
    f = tmp_path / ".pbsenv"
    f.write_text(EZPZ_PBSENV.format(hostfile=hostfile, canary=canary))
    env = base_env(home)
    p = jobenv(["import", str(f), "--json"], env)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["scheduler"] == "pbs" and rec["machine"] == "polaris" and rec["gpus_per_host"] == 4
    assert rec["hosts"] == hostfile.read_text().split()
    assert rec["env"]["PBS_O_WORKDIR"] == f"/home/a/$(touch {canary})" and not canary.exists()
    assert "imported from" in rec["status"]["reason"]


def test_import_slurmenv_and_cobaltenv(tmp_path, home):
    s = tmp_path / ".slurmenv"
    s.write_text("SLURM_JOB_ID=42\nSLURM_JOB_NODELIST=nid[001-002]\nSLURM_TASKS_PER_NODE=4(x2)\n"
                 "SLURM_CONF=/nonexistent/slurm.conf\n")
    rec = json.loads(jobenv(["import", str(s), "--json"], base_env(home), check=True).stdout)
    assert rec["scheduler"] == "slurm" and rec["hosts"] == ["nid001", "nid002"] and rec["ranks_per_host"] == 4
    nodefile = tmp_path / "cobalt.10446"
    nodefile.write_text("thetagpu13\nthetagpu12\n")
    c = tmp_path / ".cobaltenv"
    c.write_text(f"export COBALT_JOBID=10446\nexport COBALT_NODEFILE={nodefile}\n")
    rec = json.loads(jobenv(["import", str(c), "--json"], base_env(home), check=True).stdout)
    assert rec["scheduler"] == "cobalt" and rec["machine"] == "thetagpu" and rec["hosts"] == ["thetagpu13", "thetagpu12"]


@pytest.mark.parametrize("content,code,words", [
    ("export FOO=1\n", 5, "nothing to import"),
    ("export PBS_JOBID=1.x\nexport PBS_NODEFILE=/nonexistent\n", 5, "does not exist"),
])
def test_import_errors(tmp_path, home, content, code, words):
    f = tmp_path / "envfile"
    f.write_text(content)
    p = jobenv(["import", str(f)], base_env(home))
    assert p.returncode == code and words in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = jobenv(["import", str(tmp_path / "missing")], base_env(home))
    assert p.returncode != 0 and "Traceback" not in p.stderr


def test_import_takes_only_scheduler_variables_hostfile_and_gpus(tmp_path, home):
    """jobenv's own settings in an imported file are ignored."""
    import json as _json

    from conftest import base_env, jobenv

    nodefile = tmp_path / "nodefile"
    nodefile.write_text("cn001\ncn002\n")
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "profiles").mkdir()
    f = tmp_path / "pbsenv"
    f.write_text(f"export PBS_JOBID=77.pbs01\nexport PBS_NODEFILE={nodefile}\nexport NGPU_PER_HOST=2\n"
                 f"export JOBENV_HOME={evil}/store\nexport JOBENV_PROFILES={evil}/profiles\n"
                 "export JOBENV_GPUS_PER_HOST=9\nexport JOBENV_HOSTNAME=fake\n"
                 f"export XDG_CONFIG_HOME={evil}\nexport PATH=/evil\n")
    env = base_env(home)
    p = jobenv(["import", str(f), "--json"], env)
    assert p.returncode == 0, p.stderr
    rec = _json.loads(p.stdout)
    assert rec["gpus_per_host"] == 2 and rec["hostfile"].startswith(str(home / ".jobenv"))
    assert not (evil / "store").exists() and rec["created_on"] != "fake"


def test_import_refuses_fifos_devices_and_huge_files(tmp_path, home):
    import os

    from conftest import base_env, jobenv

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    env = base_env(home)
    for path in (str(fifo), "/dev/zero"):
        p = jobenv(["import", path], env)
        assert p.returncode == 5 and "not a regular file" in p.stderr, p.stderr
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(64 << 20)
    p = jobenv(["import", str(big)], env)
    assert p.returncode == 5 and "MiB" in p.stderr


@pytest.mark.parametrize("line", ["export PBS_NODEFILE={path}", "export PBS_NODEFILE=/gone\nexport HOSTFILE={path}",
                                  "export COBALT_NODEFILE={path}"])
@pytest.mark.parametrize("kind", fsutil.HOSTILE_FILES)
def test_import_of_a_file_naming_a_hostile_nodefile_is_one_line(tmp_path, home, line, kind):
    """The nodefile (or ezpz HOSTFILE copy) an imported file names is read as `save` reads
    one: a FIFO, /dev/zero, a directory, a dangling link or a huge file is one short line."""
    jobid = "COBALT_JOBID=10446" if "COBALT" in line else "PBS_JOBID=1.x"
    f = tmp_path / "envfile"
    f.write_text(f"export {jobid}\n" + line.format(path=fsutil.hostile_file(tmp_path / "evil", kind)) + "\n")
    p = fsutil.jobenv_within(20, ["import", str(f)], base_env(home))
    lines = p.stderr.splitlines()
    assert p.returncode == 5 and len(lines) == 1 and lines[0].startswith("jobenv: error: "), p.stderr[:2000]
    assert len(p.stderr) < 1000 and "Traceback" not in p.stderr



def test_imported_file_cannot_choose_what_srun_runs(tmp_path, home, other_user, shared_tmp):
    """srun reads SLURM_PROLOG / SLURM_TASK_PROLOG / SLURM_EPILOG / SLURM_TASK_EPILOG as
    --prolog, --task-prolog... (run as the user), and SLURM_CONF picks a slurm.conf whose
    SrunProlog and PluginDir srun obeys.  A file another user wrote put them in the record
    and `jobenv get` exported them into the victim's shell, so the next `launch` (srun)
    ran the attacker's program: import never takes them."""
    envfile = shared_tmp / "slurmenv"
    other_user.sh(f"cat > {envfile} <<'X'\nexport SLURM_JOB_ID=555\nexport SLURM_JOB_NODELIST=n1\n"
                  f"export SLURM_PROLOG={shared_tmp}/evil.sh\nexport SLURM_TASK_PROLOG={shared_tmp}/evil.sh\n"
                  f"export SLURM_CONF={shared_tmp}/slurm.conf\nX\n")
    env = base_env(home, {"JOBENV_HOSTNAME": "n1"})
    jobenv(["import", str(envfile)], env, check=True)
    snippet = jobenv(["get", "--job", "555", "--shell", "bash"], env, check=True).stdout
    leaked = [v for v in ("SLURM_PROLOG", "SLURM_TASK_PROLOG", "SLURM_CONF") if f"\n{v}=" in "\n" + snippet]
    assert not leaked, (leaked, snippet)


def test_import_takes_no_variable_that_names_a_program_or_configuration():
    """Every name of schedulers.PROGRAM_VARS (programs, configuration files and directories,
    --export, the tasks' directory and stdio) is left out of what is captured."""
    names = [n for ns in PROGRAM_VARS.values() for n in ns]
    env = import_env({"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1", **{n: "/tmp/x" for n in names}},
                     {"PATH": "/usr/bin", "SLURM_CONF": "/etc/slurm/slurm.conf"})
    assert env == {"PATH": "/usr/bin", "SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "n1"}
